// Compare mode: one question to 2 or 3 models at once, their answers side by
// side (columns; tabs on a narrow screen), then a vote (docs/api/feedback.md).
// Fetched at the first click on the topbar's Compare button (on-demand.js).
//
// - POST /api/comparisons first: a comparison the server refuses (budget,
//   rate limit, allocation) leaves the question in the composer, says why,
//   and asks no model.
// - Each answer is a version of the question's reply, in the slots' order
//   (tree.js), streamed by answer.js's streamAnswer from its own
//   /chat?comparison=<id>&slot=<n>; one AbortController for them all, so the
//   page's one Stop (and Esc) stops every stream.
// - The vote (POST /api/feedback) makes the chosen answer the one shown; the
//   others stay as its other versions, so history, sync, share and export
//   see versions as they always have. Its reply names a blind comparison's
//   models, which the answers' stats lines then show.

import { refusal, request, streamAnswer } from "./answer.js";
import { modelLabel, placeQuestion, setBusy } from "./composer.js";
import {
  answerView,
  errorText,
  renderAllActions,
  renderConversation,
  renderFooters,
  showEnded,
  showStreaming,
} from "./conversation.js";
import { button, el, stylesheet, ui } from "./dom.js";
import { nodeKey } from "./node-key.js";
import { renderSidebar } from "./sidebar.js";
import { state, store, TOKEN_KEY } from "./state.js";
import { addVersion, nodes, parentOf, reveal, thread, tip } from "./tree.js";

const SAVED_KEY = "edgechat.compare";
const NARROW = matchMedia("(max-width: 640px)");
// A vote just after the streams may meet an answer the server is still
// closing (409 with Retry-After: 1): asked again this many times.
const VOTE_TRIES = 5;

const TEXT = {
  en: {
    legend: "Compare 2 or 3 models",
    blind: "Blind",
    blindHint: "names hidden until the vote",
    pickTwo: "Choose 2 or 3 models to compare.",
    comparison: "Comparison",
    answers: "Answers",
    answer: (n) => `Answer ${n}`,
    answerOf: (n, name) => `Answer ${n}: ${name}`,
    better: "This one is better",
    betterLabel: (n) => `This one is better (answer ${n})`,
    tie: "Tie",
    bothBad: "Both bad",
    vote: "Your vote",
    chosen: "Chosen",
    answering: (n) => `Asking ${n} models…`,
    allIn: "The answers are in. Which one is better?",
    noVote: "Fewer than two answers finished: there is nothing to vote on.",
    voted: (what) => `Vote counted: ${what}.`,
    votedTie: "a tie",
    votedBad: "both bad",
    votedFor: (n) => `answer ${n} is better`,
    were: (names) => `The answers were ${names}.`,
    voteFailed: "The vote was not counted.",
  },
  zh: {
    legend: "对比 2 或 3 个模型",
    blind: "盲评",
    blindHint: "投票前隐藏模型名称",
    pickTwo: "请选择 2 或 3 个模型进行对比。",
    comparison: "对比",
    answers: "回答",
    answer: (n) => `回答 ${n}`,
    answerOf: (n, name) => `回答 ${n}：${name}`,
    better: "这个更好",
    betterLabel: (n) => `这个更好（回答 ${n}）`,
    tie: "不相上下",
    bothBad: "都不好",
    vote: "你的投票",
    chosen: "已选",
    answering: (n) => `正在询问 ${n} 个模型…`,
    allIn: "回答都到了。哪个更好？",
    noVote: "完成的回答不到两个，无法投票。",
    voted: (what) => `已计票：${what}。`,
    votedTie: "不相上下",
    votedBad: "都不好",
    votedFor: (n) => `回答 ${n} 更好`,
    were: (names) => `各回答的模型：${names}。`,
    voteFailed: "投票未被计入。",
  },
};

const text = () => TEXT[state.lang] || TEXT.en;

stylesheet("../compare.css");

// The bar of models above the composer, while compare mode is on.
const bar = el("fieldset", "compare-bar");
bar.id = "compare-bar";

function headers() {
  const out = { "Content-Type": "application/json", Accept: "application/json" };
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) out.Authorization = `Bearer ${token}`;
  return out;
}

// --- compare mode: the bar of models above the composer

const choices = () => state.models.filter((m) => m.alias !== "auto");

function savedChoice() {
  let saved = null;
  try {
    saved = JSON.parse(localStorage.getItem(SAVED_KEY) || "null");
  } catch {
    // a hand-edited value: start over
  }
  const allowed = new Set(choices().map((m) => m.alias));
  const models = (Array.isArray(saved?.models) ? saved.models : []).filter((a) => allowed.has(a)).slice(0, 3);
  if (models.length < 2) {
    // The picker's model and the next one.
    const list = choices().map((m) => m.alias);
    const first = allowed.has(ui.model.value) ? ui.model.value : list[0];
    models.splice(0, models.length, first, ...list.filter((a) => a !== first).slice(0, 1));
  }
  return { models: models.filter(Boolean), blind: saved?.blind === true };
}

export function toggleCompare() {
  if (state.compareMode) {
    state.compareMode = null;
    bar.remove();
    ui.compareToggle.setAttribute("aria-pressed", "false");
    ui.model.disabled = !state.models.length;
    ui.input.focus();
    return;
  }
  state.compareMode = { ...savedChoice(), send: ask };
  ui.compareToggle.setAttribute("aria-pressed", "true");
  // The picker's one model does not apply while compare mode is on.
  ui.model.disabled = true;
  renderBar();
  bar.querySelector("input")?.focus();
}

/** The bar in the page's language (app.js calls it when the language changes). */
export function renderBar() {
  const mode = state.compareMode;
  if (!mode) return;
  const T = text();
  const legend = el("legend", null, T.legend);
  const boxes = choices().map((m) => {
    const label = el("label", "toggle");
    const box = el("input");
    box.type = "checkbox";
    box.value = m.alias;
    box.checked = mode.models.includes(m.alias);
    box.addEventListener("change", () => {
      mode.models = choices()
        .map((x) => x.alias)
        .filter((a) => (a === m.alias ? box.checked : mode.models.includes(a)));
      keepChoice();
      limitBoxes(bar);
    });
    label.append(box, el("span", null, m.label));
    return label;
  });
  const blind = el("label", "toggle blind");
  const blindBox = el("input");
  blindBox.type = "checkbox";
  blindBox.checked = mode.blind;
  blindBox.addEventListener("change", () => {
    mode.blind = blindBox.checked;
    keepChoice();
  });
  blind.append(blindBox, el("span", null, T.blind), el("span", "hint", `(${T.blindHint})`));
  bar.replaceChildren(legend, ...boxes, blind);
  limitBoxes(bar);
  if (!bar.isConnected) ui.composer.before(bar);
}

// At most 3: the others wait until one is unchecked.
function limitBoxes(bar) {
  const full = state.compareMode.models.length >= 3;
  for (const box of bar.querySelectorAll("input[value]")) box.disabled = full && !box.checked;
}

function keepChoice() {
  const { models, blind } = state.compareMode;
  localStorage.setItem(SAVED_KEY, JSON.stringify({ models, blind }));
}

function warn(message) {
  ui.warn.replaceChildren(el("span", null, message));
}

// --- a comparison

async function ask(question) {
  const T = text();
  const { models, blind } = state.compareMode;
  if (models.length < 2 || models.length > 3) {
    warn(T.pickTwo);
    return;
  }
  const controller = new AbortController();
  state.active = { controller, conversation: store.current, message: null };
  setBusy(true);
  ui.warn.replaceChildren();
  const asked = { models, blind };
  if (store.current) asked.conversation = store.current.id;
  let res = null;
  try {
    res = await fetch("/api/comparisons", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify(asked),
      signal: controller.signal,
    });
  } catch {
    res = null;
  }
  const comparison = res?.ok ? await res.json().catch(() => null) : null;
  if (!Array.isArray(comparison?.slots)) {
    // Refused before any model was asked: the question stays in the composer.
    state.active = null;
    setBusy(false);
    if (!controller.signal.aborted) warn(errorText(res ? await refusal(res) : { offline: true }));
    return;
  }
  const conversation = placeQuestion(question);
  const asking = tip(conversation);
  const slots = comparison.slots;
  // Each answer keeps its comparison (stats.comparison): after a reload, or on
  // another device, resume() finds it and offers the vote the server still takes.
  const marks = slots.map(({ slot }) => ({ id: comparison.id, slot, blind: comparison.blind === true }));
  const messages = marks.map((comparison) => {
    const message = { role: "assistant", content: "", reasoning: "", status: "streaming", stats: { comparison } };
    addVersion(asking, message);
    return message;
  });
  asking.pick = asking.next.indexOf(messages[0]);
  const path = thread(conversation);
  const history = path.slice(0, path.indexOf(asking) + 1);
  state.compare = onScreen(comparison, conversation, messages, slots);
  state.active = { controller, conversation, message: messages[0] };
  store.touch(conversation);
  renderSidebar();
  renderConversation();
  announce(T.answering(messages.length));
  const sees = models.every((alias) => state.models.find((m) => m.alias === alias)?.vision !== false);
  const { body, headers: sent } = await request(conversation, history, { sees });
  // One column is drawn a frame, the one that has waited longest (a Set
  // keeps the order they changed in): three growing answers then cost a
  // frame about what one does, each still drawn every few frames.
  const changed = new Set();
  let frame = 0;
  const draw = () => {
    frame = 0;
    const [next] = changed;
    changed.delete(next);
    showStreaming(next);
    if (changed.size) frame = requestAnimationFrame(draw);
  };
  await Promise.all(
    messages.map(async (message, k) => {
      const url = `/chat?comparison=${encodeURIComponent(comparison.id)}&slot=${slots[k].slot}`;
      await streamAnswer(message, { body, headers: sent, signal: controller.signal, url }, () => {
        changed.add(message);
        frame ||= requestAnimationFrame(draw);
      });
      changed.delete(message);
      // A finished answer's stats are done's, which a blind comparison's name no model and no cost.
      message.stats = { ...message.stats, comparison: marks[k] };
      showEnded(message);
    }),
  );
  if (frame) cancelAnimationFrame(frame);
  state.active = null;
  setBusy(false);
  store.touch(conversation);
  renderAllActions();
  if (state.compare?.id === comparison.id) {
    refresh();
    announce(finished().length >= 2 ? T.allIn : T.noVote);
  }
}

/** The comparison state.compare holds while its answers are on screen. */
function onScreen(comparison, conversation, messages, slots) {
  const status = el("p", "sr-only");
  status.setAttribute("role", "status");
  const voted = comparison.vote ?? null;
  return { id: comparison.id, blind: comparison.blind, conversation, messages, slots, tab: 0, voted, status, render };
}

// GET /api/comparisons/<id> of each comparison met after a reload, its
// answer kept for the page's life (a vote given here updates it); null when
// the server does not give it (another user's, or gone): then its answers are
// shown as any. Offline, it is asked again the next time it is shown.
const known = new Map();

function lookUp(id) {
  if (!known.has(id))
    known.set(
      id,
      fetch(`/api/comparisons/${encodeURIComponent(id)}`, { headers: headers() }).then(
        async (res) => {
          const comparison = res.ok ? await res.json().catch(() => null) : null;
          return Array.isArray(comparison?.slots) ? comparison : null;
        },
        () => {
          known.delete(id);
          return null;
        },
      ),
    );
  return known.get(id);
}

/**
 * A conversation shown whose last answer is a comparison's (conversation.js
 * calls it, after a reload or a sync from another device): an unvoted
 * comparison is drawn again with its vote; a voted one stays as the vote
 * left it, its models named (a blind one's, which the stored answers may
 * not hold yet when the vote was given elsewhere).
 */
export async function resume(conversation) {
  const last = tip(conversation);
  const mark = last.stats?.comparison;
  if (!mark) return;
  const comparison = await lookUp(mark.id);
  const c = state.compare;
  if (!comparison || state.active || store.current !== conversation || tip(conversation) !== last) return;
  if (c?.id === mark.id && c.conversation === conversation && c.messages.includes(last)) return;
  const question = parentOf(conversation, last);
  const messages = (question?.next || [])
    .filter((m) => m.stats?.comparison?.id === mark.id)
    .sort((a, b) => a.stats.comparison.slot - b.stats.comparison.slot);
  const slots = messages.map(
    ({ stats }) => comparison.slots.find((s) => s.slot === stats.comparison.slot) || { slot: stats.comparison.slot },
  );
  if (comparison.vote !== null) {
    if (named(slots, messages)) store.touch(conversation);
    renderFooters();
    return;
  }
  state.compare = onScreen(comparison, conversation, messages, slots);
  renderConversation();
}

const finished = () => state.compare.messages.filter((m) => m.status === "done");

function announce(message) {
  // Emptied first, so the same words twice are announced twice.
  const { status } = state.compare;
  status.textContent = "";
  requestAnimationFrame(() => {
    status.textContent = message;
  });
}

function columnName(k) {
  const T = text();
  const { slots, messages } = state.compare;
  const model = slots[k].model || messages[k].stats?.model;
  return model ? T.answerOf(k + 1, modelLabel(model)) : T.answer(k + 1);
}

function canVote() {
  const c = state.compare;
  return !state.active && c.voted === null && finished().length >= 2;
}

/**
 * The comparison on screen: its answers in columns (tabs when narrow), and
 * the vote. Built once (again only for another width or language): the
 * end of the streams and the vote change it in place (refresh), so three
 * long answers are not laid out anew.
 */
function render() {
  const c = state.compare;
  const narrow = NARROW.matches;
  if (c.root && c.narrow === narrow && c.lang === state.lang) {
    for (const view of c.views) answerView(view.conversation, view.message, view);
    refresh();
    return c.root;
  }
  const T = text();
  const root = el("section", "compare");
  root.setAttribute("aria-label", T.comparison);
  const cols = el("div", "compare-cols");
  cols.style.setProperty("--columns", String(c.messages.length));
  const tabs = el("div", "compare-tabs");
  tabs.setAttribute("role", "tablist");
  tabs.setAttribute("aria-label", T.answers);
  Object.assign(c, { root, narrow, lang: state.lang, tabs: [], panels: [], views: [], columns: [] });
  c.messages.forEach((message, k) => {
    const view = answerView(c.conversation, message);
    const col = el("div", "compare-col");
    col.id = `compare-${k}`;
    const title = el("h3");
    title.id = `compare-${k}-head`;
    const chosen = el("span", "tag", T.chosen);
    const head = el("div", "compare-head");
    head.append(title, chosen);
    const better = button("btn btn-small vote-one", T.better, () => vote(c.slots[k].slot), T.betterLabel(k + 1));
    if (narrow) {
      const tab = el("button", "compare-tab");
      tab.type = "button";
      tab.id = `compare-${k}-tab`;
      tab.setAttribute("role", "tab");
      tab.setAttribute("aria-controls", col.id);
      tab.addEventListener("click", () => showTab(k, false));
      tab.addEventListener("keydown", tabKey);
      tabs.append(tab);
      c.tabs.push(tab);
      col.setAttribute("role", "tabpanel");
      col.setAttribute("aria-labelledby", tab.id);
      col.tabIndex = 0;
      title.hidden = true;
    } else {
      col.setAttribute("role", "group");
      col.setAttribute("aria-labelledby", title.id);
    }
    col.append(head, view.root, better);
    c.panels.push(col);
    c.views.push(view);
    c.columns.push({ title, chosen, better });
    cols.append(col);
  });
  c.both = el("div", "compare-vote");
  c.both.setAttribute("role", "group");
  c.both.setAttribute("aria-label", T.vote);
  c.both.append(
    button("btn btn-small", T.tie, () => vote("tie")),
    button("btn btn-small", T.bothBad, () => vote("both_bad")),
  );
  if (narrow) root.append(tabs);
  root.append(cols, c.both, c.status);
  refresh();
  showTab(c.tab, false);
  return root;
}

// Names (a blind comparison's once voted), the chosen mark, and the vote's buttons while it may be given.
function refresh() {
  const c = state.compare;
  if (!c.root) return;
  const voting = canVote();
  const chosen = c.voted === null ? -1 : chosenIndex();
  c.columns.forEach((column, k) => {
    const name = columnName(k);
    column.title.textContent = name;
    if (c.tabs[k]) c.tabs[k].textContent = name;
    c.views[k].root.setAttribute("aria-label", name);
    column.chosen.hidden = chosen !== k;
    column.better.hidden = !voting || c.messages[k].status !== "done";
  });
  c.both.hidden = !voting;
}

function showTab(k, focus) {
  const c = state.compare;
  c.tab = k;
  c.tabs.forEach((tab, j) => {
    tab.setAttribute("aria-selected", String(j === k));
    tab.tabIndex = j === k ? 0 : -1;
  });
  if (c.tabs.length)
    c.panels.forEach((panel, j) => {
      panel.hidden = j !== k;
    });
  if (focus) c.tabs[k]?.focus();
}

// The tabs pattern of the ARIA Authoring Practices: arrows move (and select), Home and End go to the ends.
function tabKey(e) {
  const { tabs, tab } = state.compare;
  const n = tabs.length;
  const to = { ArrowRight: tab + 1, ArrowLeft: tab - 1 + n, Home: 0, End: n - 1 }[e.key];
  if (to === undefined) return;
  e.preventDefault();
  showTab(to % n, true);
}

// A narrow screen and a wide one draw the comparison differently.
NARROW.addEventListener("change", () => {
  if (state.compare && store.current === state.compare.conversation) renderConversation();
});

// The answer kept as the one shown: the chosen one, or for a tie or "both
// bad" the first that finished.
function chosenIndex() {
  const c = state.compare;
  if (typeof c.voted === "number") return c.slots.findIndex((s) => s.slot === c.voted);
  return c.messages.findIndex((m) => m.status === "done");
}

async function vote(choice) {
  const c = state.compare;
  const T = text();
  if (!canVote() || c.voting) return;
  c.voting = true;
  let res = null;
  for (let tries = 1; ; tries++) {
    res = await fetch("/api/feedback", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ comparison: c.id, choice }),
    }).catch(() => null);
    const wait = Number.parseInt(res?.headers.get("Retry-After") || "", 10);
    if (res?.status !== 409 || !wait || tries >= VOTE_TRIES) break;
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
  }
  c.voting = false;
  if (!res?.ok) {
    announce(`${T.voteFailed} ${errorText(res ? await refusal(res) : { offline: true })}`);
    return;
  }
  const { comparison } = await res.json();
  known.set(c.id, Promise.resolve(comparison));
  c.voted = choice;
  const conversation = kept(c.conversation);
  name(comparison, conversation);
  const k = chosenIndex();
  reveal(conversation, kept(c.messages[k], conversation));
  store.touch(conversation);
  refresh();
  renderFooters();
  const what = choice === "tie" ? T.votedTie : choice === "both_bad" ? T.votedBad : T.votedFor(k + 1);
  const names = c.slots.map((_, j) => columnName(j)).join(", ");
  announce(`${T.voted(what)} ${c.blind ? T.were(names) : ""}`.trim());
  ui.input.focus();
}

// The conversation, or one of its messages, as the store holds it now: a
// signed-in user's sync may have taken in the server's copy meanwhile (the
// same message then has the same role and text, node-key.js nodeKey).
function kept(node, conversation) {
  if (!conversation) return store.conversations.find((x) => x.id === node.id) || node;
  let same = null;
  for (const n of nodes(conversation)) {
    if (n === node) return n;
    if (!same && nodeKey(n) === nodeKey(node)) same = n;
  }
  return same || node;
}

// The vote's reply names every model (a blind comparison's too) and its cost.
function name(comparison, conversation) {
  const c = state.compare;
  if (!Array.isArray(comparison?.slots)) return;
  c.slots = c.slots.map((slot) => comparison.slots.find((s) => s.slot === slot.slot) || slot);
  named(c.slots, c.messages);
  named(
    c.slots,
    c.messages.map((m) => kept(m, conversation)),
  );
}

// Each answer's stats name its slot's model and cost; true when one changed.
function named(slots, messages) {
  let changed = false;
  slots.forEach((slot, k) => {
    const stats = messages[k]?.stats;
    if (!slot.model || !stats || stats.model === slot.model) return;
    stats.model = slot.model;
    if (typeof slot.cost_usd === "number") stats.cost_usd = slot.cost_usd;
    changed = true;
  });
  return changed;
}
