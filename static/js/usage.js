// The usage page (/usage): today and the last 30 days from GET /api/usage?days=30,
// per user and per model, as uPlot charts and tables; the spend alerts of those
// days; and the leaderboard of the models from GET /api/leaderboard (votes,
// ratings, speed and cost), as a table. A user sees their own answers, votes
// and budget's alerts, an admin everyone's, every alert and the shadow trials
// (the server decides; this page only shows).
import uPlot from "/vendor/uplot/uPlot.js";
import { applyStrings, initialLang, saveLang } from "./i18n.js";

const DAYS = 30;
const TOKEN_KEY = "edgechat.token";
const SERIES = 6; // colours in usage.css: .swatch-0 … .swatch-5

const en = {
  usageTitle: "Usage",
  usageNav: "Pages",
  backToChat: "Back to the chat",
  today: "Today (UTC)",
  lastDays: "The last 30 days",
  allocation: "Neurons against the daily free allocation",
  chartNeurons: "Neurons a day, and the free allocation",
  chartUsers: "Dollars a day, per user",
  chartModels: "Requests a day, per model",
  requests: "Requests",
  promptTokens: "Prompt tokens",
  cachedTokens: "of them cached",
  completionTokens: "Completion tokens",
  dollars: "Dollars",
  neurons: "Neurons",
  user: "User",
  model: "Model",
  freeAllocation: "Free allocation",
  todayTable: "Today, per user and model",
  monthTable: "The last 30 days, per user and model",
  nothing: "No answers counted yet.",
  yours: (user) => `Your own usage (${user}).`,
  everyone: (user) => `Everyone's usage: ${user} is an admin.`,
  ofAllocation: (n, of) => `${n} of ${of}`,
  incomplete: "Some days had more answers than one request reads; their counts are low.",
  failed: (status) => `The usage could not be read (${status}).`,
  signIn: "A key is needed: open the chat, enter it there, and come back.",
  autoTitle: "auto's savings, the last 30 days",
  similarTitle: "Answered from similar questions, the last 30 days",
  similarSaved: (n, usd, neurons) =>
    `${n} questions answered from a similar question's kept answer: ${usd} (${neurons} Neurons) of model calls saved.`,
  autoSaved: (n, spent, base, saved) =>
    `${n} answers routed by auto cost ${spent}; the same tokens on the default model: ${base}. ` +
    (saved.startsWith("-") ? `auto spent ${saved.slice(1)} more.` : `Saved: ${saved}.`),
  shadowTitle: "Shadow trials",
  shadowAbout: (challenger, judge, share) =>
    `${share} of the answers are asked again of ${challenger} after the reply, unseen; ${judge} judges which answer is better.`,
  trials: "Trials",
  wins: "Challenger better",
  losses: "Answering model better",
  ties: "Ties",
  noVerdict: "No verdict",
  failedTrials: "Challenger failed",
  shadowSpent: "Spent today, of the cap",
  shadowTable: "Shadow trials over the last 30 days: medians",
  answers: "Answers",
  primarySide: "Answering models",
  challengerSide: (model) => `Challenger (${model})`,
  ttft: "Time to first token",
  pace: "Tokens a second",
  shadowIncomplete: "More trials than one request reads: the figures are of the latest.",
  alertsTitle: "Spend alerts",
  alertsTable: "Spend alerts of the last 30 days",
  day: "Day (UTC)",
  limit: "Limit",
  threshold: "Threshold",
  spentOf: "Spent of the limit",
  state: "State",
  attempts: "Attempts",
  time: "Time",
  noAlerts: "No spend alerts in these days.",
  accountLimit: "The account (DAILY_NEURON_LIMIT)",
  shadowCap: "Shadow trials' cap",
  userBudget: (user, unit) => `${user}'s budget in ${unit}`,
  sent: "Sent",
  pending: "Sending",
  failedNext: (error, at) => `Failed (${error}); next try ${at}`,
  gaveUp: (error) => `Failed (${error}); given up`,
  boardTitle: "Which model serves best",
  boardDays: "Days",
  boardUser: "User (empty: everyone)",
  boardShow: "Show",
  boardTable: (days) => `The leaderboard, the last ${days} days`,
  boardModel: "Model",
  blindRating: "Blind rating (95 % interval)",
  blindVotes: "Blind votes (won / lost / tie / both bad)",
  openRating: "Open rating (95 % interval)",
  openVotes: "Open votes (won / lost / tie / both bad)",
  upShare: "👍 share",
  medianTtft: "Median time to first token",
  medianPace: "Median tokens per second",
  perThousand: "Dollars per 1,000 answers",
  boardNothing: "No comparison or rating in these days.",
  boardYours: (user) => `Your own votes and ratings (${user}).`,
  boardEveryone: "Everyone's votes and ratings.",
  boardOf: (user) => `The votes and ratings of ${user}.`,
  boardSignIn: "The leaderboard counts a signed-in user's votes: open the chat with a key, then come back.",
  boardFailed: (status) => `The leaderboard could not be read (${status}).`,
  boardMethod: (m) =>
    `Ratings: Bradley–Terry, fitted by Newton's method; each model starts from ${m.prior_wins} win and ` +
    `${m.prior_losses} loss against a reference model; a tie is half a win to each, "both bad" a tie. ` +
    `The ratings of a board average ${m.mean}; ${m.points_per_tenfold_odds} points apart are 10 : 1 odds; ` +
    `the interval is ${Math.round(m.interval * 100)} %. Blind votes and open ones are rated apart. ` +
    `Speed and cost: the models' comparison answers (medians of the latest ${m.median_of_latest}).`,
};

const zh = {
  usageTitle: "用量",
  usageNav: "页面",
  backToChat: "返回对话",
  today: "今天（UTC）",
  lastDays: "最近 30 天",
  allocation: "每日免费额度中已用的 Neurons",
  chartNeurons: "每天的 Neurons 与免费额度",
  chartUsers: "每个用户每天的花费（美元）",
  chartModels: "每个模型每天的请求数",
  requests: "请求",
  promptTokens: "输入 tokens",
  cachedTokens: "其中缓存",
  completionTokens: "输出 tokens",
  dollars: "美元",
  neurons: "Neurons",
  user: "用户",
  model: "模型",
  freeAllocation: "免费额度",
  todayTable: "今天，按用户和模型",
  monthTable: "最近 30 天，按用户和模型",
  nothing: "还没有计入任何回答。",
  yours: (user) => `你自己的用量（${user}）。`,
  everyone: (user) => `所有人的用量：${user} 是管理员。`,
  ofAllocation: (n, of) => `${n} / ${of}`,
  incomplete: "有些天的回答多于一次请求能读取的数量，其计数偏低。",
  failed: (status) => `无法读取用量（${status}）。`,
  signIn: "需要密钥：请在对话页输入后再回来。",
  autoTitle: "自动选择节省的花费（最近 30 天）",
  similarTitle: "来自相似问题的回答（最近 30 天）",
  similarSaved: (n, usd, neurons) => `${n} 个问题沿用了相似问题保存的回答：节省模型调用 ${usd}（${neurons} Neurons）。`,
  autoSaved: (n, spent, base, saved) =>
    `自动选择的 ${n} 个回答花费 ${spent}；同样的 tokens 用默认模型为 ${base}。` +
    (saved.startsWith("-") ? `自动选择多花了 ${saved.slice(1)}。` : `节省：${saved}。`),
  shadowTitle: "影子对比",
  shadowAbout: (challenger, judge, share) =>
    `${share} 的回答会在回复之后再交给 ${challenger} 回答一次（不展示给任何人）；由 ${judge} 判断哪个回答更好。`,
  trials: "对比次数",
  wins: "挑战者更好",
  losses: "原模型更好",
  ties: "平局",
  noVerdict: "无结论",
  failedTrials: "挑战者失败",
  shadowSpent: "今天已花费 / 上限",
  shadowTable: "最近 30 天的影子对比：中位数",
  answers: "回答",
  primarySide: "原回答模型",
  challengerSide: (model) => `挑战者（${model}）`,
  ttft: "首个 token 用时",
  pace: "每秒 tokens",
  shadowIncomplete: "对比次数多于一次请求能读取的数量：数字来自最近的对比。",
  alertsTitle: "花费提醒",
  alertsTable: "最近 30 天的花费提醒",
  day: "日期（UTC）",
  limit: "限额",
  threshold: "阈值",
  spentOf: "已用 / 限额",
  state: "状态",
  attempts: "尝试次数",
  time: "时间",
  noAlerts: "这些天没有花费提醒。",
  accountLimit: "账户（DAILY_NEURON_LIMIT）",
  shadowCap: "影子试验的上限",
  userBudget: (user, unit) => `${user} 的${unit}预算`,
  sent: "已发送",
  pending: "发送中",
  failedNext: (error, at) => `失败（${error}），下次尝试 ${at}`,
  gaveUp: (error) => `失败（${error}），已放弃`,
  boardTitle: "哪个模型更好",
  boardDays: "天数",
  boardUser: "用户（留空：所有人）",
  boardShow: "显示",
  boardTable: (days) => `排行榜，最近 ${days} 天`,
  boardModel: "模型",
  blindRating: "盲评分（95% 区间）",
  blindVotes: "盲评投票（胜 / 负 / 平 / 都差）",
  openRating: "公开评分（95% 区间）",
  openVotes: "公开投票（胜 / 负 / 平 / 都差）",
  upShare: "👍 占比",
  medianTtft: "首个 token 的中位时间",
  medianPace: "每秒 tokens 中位数",
  perThousand: "每 1,000 个回答的美元",
  boardNothing: "这些天没有对比或评价。",
  boardYours: (user) => `你自己的投票和评价（${user}）。`,
  boardEveryone: "所有人的投票和评价。",
  boardOf: (user) => `${user} 的投票和评价。`,
  boardSignIn: "排行榜只统计已登录用户的投票：请在对话页输入密钥后再回来。",
  boardFailed: (status) => `无法读取排行榜（${status}）。`,
  boardMethod: (m) =>
    `评分：Bradley–Terry 模型，用牛顿法拟合；每个模型先有对参照模型的 ${m.prior_wins} 胜 ${m.prior_losses} 负；` +
    `平局各算半胜，“都差”算平局。同一榜单的评分平均为 ${m.mean}；相差 ${m.points_per_tenfold_odds} 分即 10 : 1 的胜率；` +
    `区间为 ${Math.round(m.interval * 100)}%。盲评与公开投票分开评分。速度与花费：各模型的对比回答（最近 ${m.median_of_latest} 个的中位数）。`,
};

const LANGS = { en, zh };
let lang = initialLang();
let body = null;
// GET /api/leaderboard's answer: {status, board} once read.
let board = null;
const charts = [];

const $ = (id) => document.getElementById(id);
const t = () => LANGS[lang] || en;
const number = (n) => n.toLocaleString(lang === "zh" ? "zh-CN" : "en-US");
const dollars = (n) => `$${n.toFixed(n > 0 && n < 0.01 ? 6 : 4)}`;

function headers() {
  const sent = { Accept: "application/json" };
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) sent.Authorization = `Bearer ${token}`;
  return sent;
}

async function load() {
  const reply = await fetch(`/api/usage?days=${DAYS}`, { headers: headers() });
  if (!reply.ok) {
    const error = $("error");
    error.hidden = false;
    error.textContent = reply.status === 401 ? t().signIn : t().failed(reply.status);
    return;
  }
  body = await reply.json();
  render();
}

function render() {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  applyStrings(document, t());
  $("lang").textContent = lang === "zh" ? "English" : "中文";
  $("lang").lang = lang === "zh" ? "en" : "zh";
  if (!body) return;
  const { viewer, day } = body;
  $("who").textContent = viewer.admin ? t().everyone(viewer.user) : t().yours(viewer.user);
  const today = body.daily.at(-1);
  cards(today);
  allocation(today.neurons, body.free_allocation_neurons);
  table(
    $("today-table"),
    t().todayTable,
    body.rows.filter((row) => row.day === day),
  );
  table($("month-table"), t().monthTable, combined(body.rows));
  $("note").textContent = body.complete ? "" : t().incomplete;
  savings(body.auto);
  similarSavings(body.similar);
  shadow(body.shadow);
  alertsTable($("alerts-table"), body.alerts);
  drawCharts();
}

// --- the leaderboard (GET /api/leaderboard) ------------------------------------------

async function loadBoard() {
  const days = $("board-days").value;
  const user = $("board-user").value.trim();
  const query = new URLSearchParams({ days });
  if (user) query.set("user", user);
  const reply = await fetch(`/api/leaderboard?${query}`, { headers: headers() });
  board = { status: reply.status, body: reply.ok ? await reply.json() : null };
  renderBoard();
}

function renderBoard() {
  const section = $("board");
  // Without the DB binding there is no leaderboard (404): no section.
  section.hidden = !board || board.status === 404;
  if (!board || section.hidden) return;
  const status = $("board-status");
  const node = $("board-table");
  const found = board.body;
  if (!found) {
    status.textContent = board.status === 403 ? t().boardSignIn : t().boardFailed(board.status);
    node.replaceChildren();
    $("board-method").textContent = "";
    return;
  }
  $("board-admin").hidden = !found.viewer.admin;
  status.textContent =
    found.user === null
      ? t().boardEveryone
      : found.user === found.viewer.user
        ? t().boardYours(found.user)
        : t().boardOf(found.user);
  boardTable(node, found);
  $("board-method").textContent = t().boardMethod(found.method);
}

const rating = (side) =>
  side.rating === null
    ? "—"
    : `${Math.round(side.rating)} (${Math.round(side.rating_low)}–${Math.round(side.rating_high)})`;
const votes = (side) => `${number(side.votes)} (${side.wins} / ${side.losses} / ${side.ties} / ${side.both_bad})`;
const maybe = (value, write) => (value === null ? "—" : write(value));

function boardTable(node, found) {
  const columns = [
    t().boardModel,
    t().blindRating,
    t().blindVotes,
    t().openRating,
    t().openVotes,
    t().upShare,
    t().medianTtft,
    t().medianPace,
    t().perThousand,
  ];
  fill(
    node,
    t().boardTable(found.days),
    columns,
    t().boardNothing,
    found.models.map((model) => ({
      name: model.label,
      title: model.model,
      cells: [
        rating(model.blind),
        votes(model.blind),
        rating(model.open),
        votes(model.open),
        maybe(model.up_share, (share) => `${Math.round(share * 100)} % (${model.up} / ${model.up + model.down})`),
        maybe(model.ttft_ms, (ms) => `${number(Math.round(ms))} ms`),
        maybe(model.tokens_per_s, (pace) => pace.toFixed(1)),
        maybe(model.usd_per_1000, dollars),
      ],
    })),
  );
}

// What auto's answers cost beside the baseline model (GET /api/usage's auto).
function savings(auto) {
  $("auto").hidden = !auto?.requests;
  if (!auto?.requests) return;
  const saved = auto.saved_usd < 0 ? `-${dollars(-auto.saved_usd)}` : dollars(auto.saved_usd);
  $("auto-text").textContent = t().autoSaved(
    number(auto.requests),
    dollars(auto.cost_usd),
    dollars(auto.baseline_usd),
    saved,
  );
}

// The semantic cache's hits and what they saved (GET /api/usage's similar).
function similarSavings(similar) {
  $("similar").hidden = !similar?.hits;
  if (!similar?.hits) return;
  $("similar-text").textContent = t().similarSaved(
    number(similar.hits),
    dollars(similar.saved_usd),
    number(similar.saved_neurons),
  );
}

function cards(today) {
  definitions($("today"), [
    [t().requests, number(today.requests)],
    [t().promptTokens, `${number(today.prompt_tokens)} (${t().cachedTokens} ${number(today.cached_prompt_tokens)})`],
    [t().completionTokens, number(today.completion_tokens)],
    [t().dollars, dollars(today.cost_usd)],
    [t().neurons, number(today.neurons)],
  ]);
}

/** A description list of [term, value] pairs, as cards. */
function definitions(list, items) {
  list.replaceChildren();
  for (const [name, value] of items) {
    const item = document.createElement("div");
    const term = document.createElement("dt");
    const detail = document.createElement("dd");
    term.textContent = name;
    detail.textContent = value;
    item.append(term, detail);
    list.append(item);
  }
}

/** The shadow trials (an admin's, when the deployment runs them); hidden otherwise. */
function shadow(summary) {
  const section = $("shadow");
  section.hidden = !summary;
  if (!summary) return;
  const share = `${(summary.rate * 100).toLocaleString(lang === "zh" ? "zh-CN" : "en-US")}%`;
  $("shadow-about").textContent = t().shadowAbout(summary.challenger_model, summary.judge_model, share);
  const { spent_usd: spent, cap_usd: cap } = summary.today;
  definitions($("shadow-cards"), [
    [t().trials, number(summary.trials)],
    [t().wins, number(summary.wins)],
    [t().losses, number(summary.losses)],
    [t().ties, number(summary.ties)],
    [t().noVerdict, number(summary.no_verdict)],
    [t().failedTrials, number(summary.failed)],
    [t().shadowSpent, `${dollars(spent)} / ${cap === null ? "—" : dollars(cap)}`],
  ]);
  const sides = [
    [t().primarySide, summary.primary],
    [t().challengerSide(summary.challenger_model), summary.challenger],
  ];
  fill(
    $("shadow-table"),
    t().shadowTable,
    [t().answers, t().ttft, t().pace, t().dollars],
    "",
    sides.map(([side, medians]) => ({
      name: side,
      cells: [
        maybe(medians.ttft_ms, (ms) => `${number(Math.round(ms))} ms`),
        maybe(medians.tokens_per_s, number),
        maybe(medians.usd, dollars),
      ],
    })),
  );
  $("shadow-note").textContent = summary.complete ? "" : t().shadowIncomplete;
}

function allocation(neurons, of) {
  const meter = $("allocation");
  meter.max = of;
  meter.value = Math.min(neurons, of);
  $("allocation-text").textContent = t().ofAllocation(number(neurons), number(of));
}

/** The rows of every day added up per user and model. */
function combined(rows) {
  const sums = new Map();
  for (const row of rows) {
    const key = `${row.user}\n${row.model}`;
    const sum = sums.get(key) ?? {
      ...row,
      requests: 0,
      prompt_tokens: 0,
      cached_prompt_tokens: 0,
      completion_tokens: 0,
      cost_usd: 0,
      neurons: 0,
    };
    for (const name of [
      "requests",
      "prompt_tokens",
      "cached_prompt_tokens",
      "completion_tokens",
      "cost_usd",
      "neurons",
    ])
      sum[name] += row[name];
    sums.set(key, sum);
  }
  return [...sums.values()];
}

function table(node, title, rows) {
  const columns = [
    t().user,
    t().model,
    t().requests,
    t().promptTokens,
    t().cachedTokens,
    t().completionTokens,
    t().dollars,
    t().neurons,
  ];
  fill(
    node,
    title,
    columns,
    t().nothing,
    rows.map((row) => [
      row.user,
      row.model,
      number(row.requests),
      number(row.prompt_tokens),
      number(row.cached_prompt_tokens),
      number(row.completion_tokens),
      dollars(row.cost_usd),
      number(row.neurons),
    ]),
  );
}

/** The spend alerts: whose limit, which threshold, and how the hook took it. */
function alertsTable(node, alerts) {
  const columns = [t().day, t().limit, t().threshold, t().spentOf, t().state, t().attempts, t().time];
  const amount = (n, unit) => (unit === "usd" ? dollars(n) : number(n));
  fill(
    node,
    t().alertsTable,
    columns,
    t().noAlerts,
    alerts.map((alert) => [
      alert.day,
      subject(alert),
      `${alert.threshold}%`,
      `${amount(alert.spent, alert.unit)} / ${amount(alert.limit, alert.unit)}`,
      state(alert),
      number(alert.attempts),
      when(alert.updated_at),
    ]),
  );
}

function subject(alert) {
  if (alert.kind === "account") return t().accountLimit;
  if (alert.kind === "shadow") return t().shadowCap;
  return t().userBudget(alert.user, alert.unit === "usd" ? t().dollars : t().neurons);
}

function state(alert) {
  if (alert.state === "sent") return t().sent;
  if (alert.state === "pending") return t().pending;
  return alert.next_attempt_at ? t().failedNext(alert.error, when(alert.next_attempt_at)) : t().gaveUp(alert.error);
}

/** A time of the server's, in the reader's own zone. */
function when(iso) {
  return new Date(iso).toLocaleString(lang === "zh" ? "zh-CN" : "en-US", {
    dateStyle: "short",
    timeStyle: "short",
  });
}

/**
 * A table of text cells under a caption, or one row saying there is nothing.
 * A row is its cells, or {name, title?, cells}: then its name heads it (a row
 * header, for screen readers' table navigation).
 */
function fill(node, title, columns, nothing, rows) {
  const caption = document.createElement("caption");
  caption.textContent = title;
  const head = document.createElement("thead");
  head.append(line(columns, "th"));
  const main = document.createElement("tbody");
  if (rows.length === 0) {
    const cell = document.createElement("td");
    cell.colSpan = columns.length;
    cell.textContent = nothing;
    const empty = document.createElement("tr");
    empty.append(cell);
    main.append(empty);
  }
  for (const row of rows) main.append(Array.isArray(row) ? line(row) : headed(row));
  node.replaceChildren(caption, head, main);
}

function headed({ name, title, cells }) {
  const row = line(cells);
  const header = document.createElement("th");
  header.scope = "row";
  header.textContent = name;
  if (title) header.title = title;
  row.prepend(header);
  return row;
}

function line(cells, kind = "td") {
  const row = document.createElement("tr");
  for (const text of cells) {
    const cell = document.createElement(kind);
    if (kind === "th") cell.scope = "col";
    cell.textContent = text;
    row.append(cell);
  }
  return row;
}

/** One series per name: its value on each day of the range (0 where it had none). */
function perDay(by, value) {
  const days = body.daily.map((d) => d.day);
  const names = [...new Set(body.rows.map((row) => row[by]))].sort();
  const series = names.map((name) =>
    days.map((day) =>
      body.rows.filter((row) => row.day === day && row[by] === name).reduce((n, row) => n + row[value], 0),
    ),
  );
  return { names, series };
}

function drawCharts() {
  for (const chart of charts.splice(0)) chart.destroy();
  const x = body.daily.map((d) => Date.parse(`${d.day}T00:00:00Z`) / 1000);
  const neurons = body.daily.map((d) => d.neurons);
  const allocationLine = x.map(() => body.free_allocation_neurons);
  chart(
    "chart-neurons",
    x,
    [
      { label: t().neurons, values: neurons, colour: 0 },
      { label: t().freeAllocation, values: allocationLine, colour: 1, dash: [6, 4] },
    ],
    number,
  );
  const users = perDay("user", "cost_usd");
  chart(
    "chart-users",
    x,
    users.names.map((name, k) => ({ label: name, values: users.series[k], colour: k })),
    (v) => (v === 0 ? "$0" : `$${v.toPrecision(2)}`),
  );
  legend($("legend-users"), users.names);
  const models = perDay("model", "requests");
  chart(
    "chart-models",
    x,
    models.names.map((name, k) => ({ label: name, values: models.series[k], colour: k })),
    number,
  );
  legend($("legend-models"), models.names);
}

function legend(list, names) {
  list.replaceChildren(
    ...names.map((name, k) => {
      const item = document.createElement("li");
      item.className = `swatch-${k % SERIES}`;
      const label = document.createElement("span");
      label.textContent = name;
      item.append(label);
      return item;
    }),
  );
}

/** A swatch class's colour, as the stylesheet has it for the scheme in use. */
function colourOf(k) {
  const probe = document.createElement("span");
  probe.className = `swatch-${k % SERIES}`;
  document.body.append(probe);
  const colour = getComputedStyle(probe).color;
  probe.remove();
  return colour;
}

/** A uPlot line chart of `lines` over the days `x`; `label` writes a y value. */
function chart(id, x, lines, label) {
  const node = $(id);
  node.replaceChildren();
  const muted = getComputedStyle(document.documentElement).getPropertyValue("--muted").trim();
  const grid = getComputedStyle(document.documentElement).getPropertyValue("--line").trim();
  const axis = { stroke: muted, grid: { stroke: grid }, ticks: { stroke: grid } };
  const yAxis = { ...axis, size: 76, values: (_u, splits) => splits.map(label) };
  const options = {
    width: Math.max(280, node.clientWidth || 320),
    height: 220,
    legend: { show: false },
    // The days are UTC days: their axis says so whatever the reader's zone.
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    axes: [axis, yAxis],
    series: [
      {},
      ...lines.map((l) => ({
        label: l.label,
        stroke: colourOf(l.colour),
        width: 2,
        dash: l.dash,
        points: { show: x.length < 2 },
      })),
    ],
  };
  charts.push(new uPlot(options, [x, ...lines.map((l) => l.values)], node));
}

$("lang").addEventListener("click", () => {
  lang = lang === "zh" ? "en" : "zh";
  saveLang(lang);
  render();
  renderBoard();
});
$("board-form").addEventListener("submit", (event) => {
  event.preventDefault();
  loadBoard();
});
render();
load();
loadBoard();
