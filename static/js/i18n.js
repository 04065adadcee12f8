// UI strings in English and Chinese. The page follows the browser's language
// until the user picks one; the choice is kept in localStorage.

const en = {
  conversations: "Conversations",
  menu: "Conversations",
  newChat: "New chat",
  untitled: "New chat",
  rename: "Rename",
  renameTo: "New name",
  delete: "Delete",
  model: "Model",
  paid: "paid plan",
  think: "Think",
  messages: "Messages",
  message: "Message",
  placeholder: "Message edgechat…",
  send: "Send",
  stop: "Stop",
  retry: "Retry",
  copy: "Copy",
  copied: "Copied",
  copyCode: "Copy code",
  copyMessage: "Copy message",
  edit: "Edit",
  editMessage: "Edit message",
  saveAndSend: "Save and send",
  regenerate: "Regenerate",
  previousVersion: "Previous version",
  nextVersion: "Next version",
  version: (i, n) => `Version ${i} of ${n}`,
  search: "Search",
  searchTitle: "Search conversations",
  searchResults: "Results",
  noResults: "No conversation matches.",
  results: (n) => (n === 1 ? "1 result" : `${n} results`),
  inTitle: "title",
  close: "Close",
  exportTitle: "This chat",
  exportMarkdown: "Export as Markdown",
  exportJson: "Export as JSON",
  exportAll: "Export all chats (JSON)",
  importJson: "Import chats (JSON)…",
  imported: (n) => (n === 1 ? "Imported 1 conversation." : `Imported ${n} conversations.`),
  importRefused: {
    size: "Not imported: the file is larger than 5 MB.",
    json: "Not imported: the file is not valid JSON.",
    format: "Not imported: this is not an edgechat export.",
    field: (path) => `Not imported: unexpected or invalid data at ${path}.`,
    storage: "Not imported: this browser's storage is full.",
  },
  attach: "Attach images",
  imageAlt: (k, w, h) => `Image ${k}, ${w}×${h}`,
  removeImage: (k) => `Remove image ${k}`,
  sees: "sees images",
  noVision: (m) => `${m} cannot see images.`,
  switchTo: (m) => `Switch to ${m}`,
  tooMany: (n) => `At most ${n} images per message.`,
  tooLarge: (name) => `${name} is too large, even made smaller.`,
  unreadable: (name) => `${name}: not an image this browser reads.`,
  flagged: (names) => `Hidden: Llama Guard flagged this answer as ${names}.`,
  showAnyway: "Show anyway",
  hide: "Hide",
  refused: (names) =>
    `Not answered: Llama Guard flagged the conversation as ${names}. Rephrase it, or start a new chat.`,
  categories:
    "Violent crimes|Non-violent crimes|Sex-related crimes|Child sexual exploitation|Defamation|Specialized advice|Privacy|Intellectual property|Indiscriminate weapons|Hate|Suicide and self-harm|Sexual content|Elections|Code interpreter abuse".split(
      "|",
    ),
  unsafe: "unsafe content",
  you: "You",
  assistant: "Assistant",
  emptyTitle: "Ask GLM or Kimi anything",
  emptyHint: "Answers stream in as they are written. Enter sends, Shift+Enter adds a line, Esc stops, Ctrl+K searches.",
  thinking: "Thinking…",
  reasoning: "Reasoning",
  stopped: "Stopped",
  interrupted: "The answer was cut off before it finished.",
  offline: "Could not reach edgechat. Check your connection.",
  fallback: (used, asked) => `Answered by ${used} because ${asked} was unavailable.`,
  ttft: "first token",
  tokens: "tokens",
  perSecond: "tok/s",
  tokenTitle: "API token required",
  tokenHint: "This edgechat asks for a token. It is kept in this browser only.",
  tokenRejected: "That token was not accepted. Check it and try again.",
  tokenLabel: "API token",
  tokenNeeded: "An API token is needed to chat.",
  cancel: "Cancel",
  save: "Save",
  waitSeconds: (s) => `Try again in ${s >= 120 ? `${Math.round(s / 60)} min` : `${s} s`}.`,
  errors: {
    400: "The request was not accepted.",
    401: "An API token is needed to chat.",
    403: "This page may not call edgechat from here.",
    413: "The conversation is too long. Start a new chat.",
    429: "Too many requests right now.",
    500: "edgechat had a problem. Please try again.",
    502: "The model had a problem answering.",
    503: "The model is busy right now.",
    504: "The model took too long to answer.",
    model_busy: "The model is busy right now.",
    quota_exhausted: "Today's free model quota is used up.",
    rate_limited: "Too many requests right now.",
    upstream_rate_limited: "The model is receiving too many requests.",
    upstream_timeout: "The model took too long to answer.",
    deadline_exceeded: "The answer took too long and was stopped.",
    conversation_too_large: "The conversation is too long for this model. Start a new chat.",
    model_unavailable: "This model is not available right now. Pick another one.",
    upstream_malformed: "The model sent an answer edgechat could not read.",
    upstream_error: "The model had a problem answering.",
  },
};

const zh = {
  conversations: "对话",
  menu: "对话列表",
  newChat: "新对话",
  untitled: "新对话",
  rename: "重命名",
  renameTo: "新名称",
  delete: "删除",
  model: "模型",
  paid: "付费",
  think: "思考",
  messages: "消息",
  message: "消息",
  placeholder: "给 edgechat 发消息…",
  send: "发送",
  stop: "停止",
  retry: "重试",
  copy: "复制",
  copied: "已复制",
  copyCode: "复制代码",
  copyMessage: "复制消息",
  edit: "编辑",
  editMessage: "编辑消息",
  saveAndSend: "保存并发送",
  regenerate: "重新生成",
  previousVersion: "上一版本",
  nextVersion: "下一版本",
  version: (i, n) => `第 ${i} 版，共 ${n} 版`,
  search: "搜索",
  searchTitle: "搜索对话",
  searchResults: "结果",
  noResults: "没有匹配的对话。",
  results: (n) => `${n} 条结果`,
  inTitle: "标题",
  close: "关闭",
  exportTitle: "此对话",
  exportMarkdown: "导出为 Markdown",
  exportJson: "导出为 JSON",
  exportAll: "导出全部对话 (JSON)",
  importJson: "导入对话 (JSON)…",
  imported: (n) => `已导入 ${n} 个对话。`,
  importRefused: {
    size: "未导入：文件超过 5 MB。",
    json: "未导入：文件不是有效的 JSON。",
    format: "未导入：这不是 edgechat 导出的文件。",
    field: (path) => `未导入：${path} 处的数据不符合格式。`,
    storage: "未导入：浏览器存储空间已满。",
  },
  attach: "添加图片",
  imageAlt: (k, w, h) => `图片 ${k}，${w}×${h}`,
  removeImage: (k) => `移除图片 ${k}`,
  sees: "可识图",
  noVision: (m) => `${m} 无法识别图片。`,
  switchTo: (m) => `切换到 ${m}`,
  tooMany: (n) => `每条消息最多 ${n} 张图片。`,
  tooLarge: (name) => `${name} 太大，缩小后仍超出限制。`,
  unreadable: (name) => `${name}：无法读取的图片。`,
  flagged: (names) => `已隐藏：Llama Guard 将此回答标记为${names}。`,
  showAnyway: "仍然显示",
  hide: "隐藏",
  refused: (names) => `未回答：Llama Guard 将此对话标记为${names}。请换个说法，或开始新对话。`,
  categories:
    "暴力犯罪|非暴力犯罪|性相关犯罪|儿童性剥削|诽谤|专业建议|隐私|知识产权|无差别杀伤性武器|仇恨|自杀与自残|色情内容|选举|代码解释器滥用".split(
      "|",
    ),
  unsafe: "不安全内容",
  you: "你",
  assistant: "助手",
  emptyTitle: "问 GLM 或 Kimi 任何问题",
  emptyHint: "回答边生成边显示。Enter 发送，Shift+Enter 换行，Esc 停止，Ctrl+K 搜索。",
  thinking: "思考中…",
  reasoning: "思考过程",
  stopped: "已停止",
  interrupted: "回答在完成前被中断。",
  offline: "无法连接 edgechat，请检查网络。",
  fallback: (used, asked) => `${asked} 暂不可用，由 ${used} 回答。`,
  ttft: "首字",
  tokens: "tokens",
  perSecond: "tok/s",
  tokenTitle: "需要 API 令牌",
  tokenHint: "此 edgechat 需要令牌。令牌只保存在本浏览器中。",
  tokenRejected: "令牌无效，请检查后重试。",
  tokenLabel: "API 令牌",
  tokenNeeded: "需要 API 令牌才能聊天。",
  cancel: "取消",
  save: "保存",
  waitSeconds: (s) => `请 ${s >= 120 ? `${Math.round(s / 60)} 分钟` : `${s} 秒`}后再试。`,
  errors: {
    400: "请求未被接受。",
    401: "需要 API 令牌才能聊天。",
    403: "不允许从此处调用 edgechat。",
    413: "对话太长，请开始新对话。",
    429: "请求太频繁。",
    500: "edgechat 出现问题，请重试。",
    502: "模型回答时出现问题。",
    503: "模型正忙。",
    504: "模型响应超时。",
    model_busy: "模型正忙。",
    quota_exhausted: "今天的免费模型额度已用完。",
    rate_limited: "请求太频繁。",
    upstream_rate_limited: "模型收到的请求太多。",
    upstream_timeout: "模型响应超时。",
    deadline_exceeded: "回答耗时过长，已停止。",
    conversation_too_large: "对话超出此模型的长度，请开始新对话。",
    model_unavailable: "此模型暂不可用，请换一个。",
    upstream_malformed: "模型返回了无法读取的回答。",
    upstream_error: "模型回答时出现问题。",
  },
};

const LANGS = { en, zh };
const KEY = "edgechat.lang";

export function initialLang() {
  const saved = localStorage.getItem(KEY);
  if (saved && LANGS[saved]) return saved;
  return (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en";
}

export function saveLang(lang) {
  localStorage.setItem(KEY, lang);
}

export function strings(lang) {
  return LANGS[lang] || en;
}

/** Llama Guard's categories ("S2", …) by name: "Non-violent crimes (S2), Hate (S10)". */
export function categoryNames(codes, t) {
  const names = (Array.isArray(codes) ? codes : []).map((code) => {
    const name = t.categories[Number(/^S(\d+)$/.exec(code)?.[1]) - 1];
    return name ? `${name} (${code})` : String(code);
  });
  return names.join(t === zh ? "、" : ", ") || t.unsafe;
}

/** Fills elements marked data-i18n, data-i18n-label and data-i18n-placeholder. */
export function applyStrings(root, t) {
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t[node.dataset.i18n];
  for (const node of root.querySelectorAll("[data-i18n-label]"))
    node.setAttribute("aria-label", t[node.dataset.i18nLabel]);
  for (const node of root.querySelectorAll("[data-i18n-placeholder]"))
    node.placeholder = t[node.dataset.i18nPlaceholder];
}
