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
  you: "You",
  assistant: "Assistant",
  emptyTitle: "Ask GLM or Kimi anything",
  emptyHint: "Answers stream in as they are written. Enter sends, Shift+Enter adds a line, Esc stops.",
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
  you: "你",
  assistant: "助手",
  emptyTitle: "问 GLM 或 Kimi 任何问题",
  emptyHint: "回答边生成边显示。Enter 发送，Shift+Enter 换行，Esc 停止。",
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

/** Fills elements marked data-i18n, data-i18n-label and data-i18n-placeholder. */
export function applyStrings(root, t) {
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t[node.dataset.i18n];
  for (const node of root.querySelectorAll("[data-i18n-label]"))
    node.setAttribute("aria-label", t[node.dataset.i18nLabel]);
  for (const node of root.querySelectorAll("[data-i18n-placeholder]"))
    node.placeholder = t[node.dataset.i18nPlaceholder];
}
