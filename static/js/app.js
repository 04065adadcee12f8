// The chat page: conversations in the sidebar, a streamed answer per turn.
// Every piece of model or user text reaches the DOM as text (textContent or
// the Markdown renderer's text nodes), never as markup.

import { applyStrings, initialLang, saveLang, strings } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";
import { modelDelta, readEvents } from "./sse.js";
import { requestMessages, Store } from "./store.js";

const $ = (id) => document.getElementById(id);
const ui = {
  shell: $("shell"),
  sidebar: $("sidebar"),
  backdrop: $("backdrop"),
  menu: $("menu"),
  list: $("conv-list"),
  newChat: $("new-chat"),
  model: $("model"),
  reasoning: $("reasoning"),
  lang: $("lang"),
  messages: $("messages"),
  empty: $("empty"),
  form: $("composer"),
  input: $("input"),
  send: $("send"),
  stop: $("stop"),
  dialog: $("token-dialog"),
  tokenForm: $("token-form"),
  tokenInput: $("token-input"),
  tokenHint: $("token-hint"),
  tokenCancel: $("token-cancel"),
};

const MODEL_KEY = "edgechat.model";
const TOKEN_KEY = "edgechat.token";
const THINK_KEY = "edgechat.think";

const store = new Store();
let lang = initialLang();
let t = strings(lang);
let models = [];
let active = null; // {controller, conversation, message}
let stick = true;
let pendingRetry = null;
const views = new Map(); // message object → its DOM parts, for the shown conversation

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(className, text, onClick) {
  const b = el("button", className, text);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

// --- language -------------------------------------------------------------------

function applyLang() {
  t = strings(lang);
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  applyStrings(document, t);
  const other = lang === "zh" ? "English" : "中文";
  ui.lang.textContent = other;
  ui.lang.lang = lang === "zh" ? "en" : "zh";
  ui.lang.setAttribute("aria-label", other);
  fillModels();
  renderSidebar();
  renderConversation();
}

// --- models ---------------------------------------------------------------------

async function loadModels() {
  try {
    const res = await fetch("/api/models", { headers: { Accept: "application/json" } });
    if (!res.ok) throw new Error(String(res.status));
    const data = await res.json();
    models = Array.isArray(data) ? data : data.models || [];
  } catch {
    models = [];
  }
  fillModels();
}

function fillModels() {
  if (!models.length) return;
  const saved = localStorage.getItem(MODEL_KEY);
  const chosen = models.find((m) => m.alias === saved) || models.find((m) => m.default) || models[0];
  ui.model.replaceChildren(
    ...models.map((m) => {
      const option = el("option", null, m.free_plan ? m.label : `${m.label} · ${t.paid}`);
      option.value = m.alias;
      option.selected = m === chosen;
      return option;
    }),
  );
  ui.model.disabled = false;
}

function modelLabel(id) {
  const m = models.find((x) => x.id === id || x.alias === id);
  return m ? m.label : id;
}

// --- sidebar --------------------------------------------------------------------

function renderSidebar() {
  const items = store.sorted().map((c) => {
    const li = el("li", "conv");
    const title = c.title || t.untitled;
    const open = button("conv-open", title, () => {
      store.select(c.id);
      closeSidebar();
      renderSidebar();
      renderConversation();
      ui.input.focus();
    });
    if (c.id === store.currentId) {
      open.setAttribute("aria-current", "true");
      li.classList.add("current");
    }
    const rename = button("btn-icon conv-action", "✎", () => startRename(li, c));
    rename.setAttribute("aria-label", `${t.rename}: ${title}`);
    rename.title = t.rename;
    const remove = button("btn-icon conv-action", "×", () => {
      if (active && active.conversation === c) stopActive();
      store.remove(c.id);
      renderSidebar();
      renderConversation();
    });
    remove.setAttribute("aria-label", `${t.delete}: ${title}`);
    remove.title = t.delete;
    li.append(open, rename, remove);
    return li;
  });
  ui.list.replaceChildren(...items);
}

function startRename(li, conversation) {
  const input = el("input", "conv-rename");
  input.value = conversation.title || "";
  input.setAttribute("aria-label", t.renameTo);
  input.maxLength = 100;
  let done = false;
  const finish = (keep) => {
    if (done) return;
    done = true;
    if (keep && input.value.trim()) store.rename(conversation.id, input.value);
    renderSidebar();
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      finish(true);
    } else if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      finish(false);
    }
  });
  input.addEventListener("blur", () => finish(true));
  li.replaceChildren(input);
  input.focus();
  input.select();
}

function openSidebar() {
  ui.shell.classList.add("nav-open");
  ui.backdrop.hidden = false;
  ui.menu.setAttribute("aria-expanded", "true");
}

function closeSidebar() {
  ui.shell.classList.remove("nav-open");
  ui.backdrop.hidden = true;
  ui.menu.setAttribute("aria-expanded", "false");
}

// --- messages -------------------------------------------------------------------

function renderConversation() {
  views.clear();
  const conversation = store.current;
  const nodes = [];
  const messages = conversation ? conversation.messages : [];
  messages.forEach((m, k) => {
    nodes.push(messageView(m, k === messages.length - 1));
  });
  ui.empty.hidden = nodes.length > 0;
  ui.messages.replaceChildren(ui.empty, ...nodes);
  stick = true;
  scrollDown();
}

function messageView(message, isLast) {
  const root = el("article", `msg ${message.role}`);
  root.setAttribute("aria-label", message.role === "user" ? t.you : t.assistant);
  if (message.role === "user") {
    root.append(el("div", "bubble", message.content));
    return root;
  }
  const view = { root, message, isLast };
  view.reasoning = el("details", "reasoning");
  view.reasoningTitle = el("summary");
  view.reasoningBody = el("div", "reasoning-body");
  view.reasoning.append(view.reasoningTitle, view.reasoningBody);
  view.answer = el("div", "answer");
  view.dots = el("div", "dots", "•••");
  view.dots.setAttribute("aria-hidden", "true");
  view.footer = el("div", "footer");
  root.append(view.reasoning, view.answer, view.dots, view.footer);
  views.set(message, view);
  updateView(view, true);
  return root;
}

function updateView(view, full) {
  const m = view.message;
  const streaming = m.status === "streaming";
  view.root.setAttribute("aria-busy", String(streaming));
  view.root.classList.toggle("streaming", streaming);
  view.reasoning.hidden = !m.reasoning;
  view.reasoningTitle.textContent = streaming && !m.content ? t.thinking : t.reasoning;
  view.reasoningBody.textContent = m.reasoning || "";
  view.answer.replaceChildren(renderMarkdown(m.content || "", { copy: t.copy }));
  view.dots.hidden = !streaming || Boolean(m.content || m.reasoning);
  if (full || !streaming) renderFooter(view);
}

function renderFooter(view) {
  const m = view.message;
  const parts = [];
  if (m.status === "stopped") parts.push(el("span", "tag", t.stopped));
  if (m.status === "interrupted" || m.status === "error") {
    const box = el("div", "problem");
    box.setAttribute("role", "alert");
    box.append(el("span", null, m.status === "interrupted" ? t.interrupted : errorText(m.error)));
    if (view.isLast && !active) box.append(button("btn btn-small", t.retry, () => retry()));
    parts.push(box);
  }
  if (m.stats) parts.push(statsLine(m.stats));
  view.footer.replaceChildren(...parts);
}

function errorText(error = {}) {
  const base = t.errors[error.code] || t.errors[error.status] || error.message || t.errors[500];
  if (error.offline) return t.offline;
  return error.retryAfter ? `${base} ${t.waitSeconds(error.retryAfter)}` : base;
}

function statsLine(s) {
  const line = el("div", "stats");
  const bits = [modelLabel(s.model)];
  if (Number.isFinite(s.ttft_ms)) bits.push(`${Math.round(s.ttft_ms)} ms ${t.ttft}`);
  if (s.tps) bits.push(`${s.tps.toFixed(1)} ${t.perSecond}`);
  if (s.usage) bits.push(`${s.usage.total_tokens} ${t.tokens}`);
  if (typeof s.cost_usd === "number") bits.push(`$${formatCost(s.cost_usd)}`);
  line.textContent = bits.join(" · ");
  if (s.fallback_from) {
    const note = el("div", "note", t.fallback(modelLabel(s.model), modelLabel(s.fallback_from)));
    const wrap = el("div");
    wrap.append(note, line);
    return wrap;
  }
  return line;
}

function formatCost(usd) {
  if (usd === 0) return "0";
  if (usd >= 0.01) return usd.toFixed(2);
  return usd.toPrecision(2).replace(/0+$/, "");
}

let frame = 0;
function scheduleRender() {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    if (!active) return;
    const view = views.get(active.message);
    if (view) updateView(view, false);
    scrollDown();
  });
}

function scrollDown() {
  if (stick) ui.messages.scrollTop = ui.messages.scrollHeight;
}

// --- chatting -------------------------------------------------------------------

function setBusy(busy) {
  ui.send.hidden = busy;
  ui.stop.hidden = !busy;
}

function send(text) {
  if (active || !text.trim()) return;
  const conversation = store.current || store.create();
  conversation.messages.push({ role: "user", content: text });
  if (!conversation.title) conversation.title = text.trim().replace(/\s+/g, " ").slice(0, 60);
  ui.input.value = "";
  resizeInput();
  stick = true;
  run(conversation);
}

function retry() {
  const conversation = store.current;
  if (active || !conversation) return;
  const last = conversation.messages.at(-1);
  if (last && last.role === "assistant") conversation.messages.pop();
  run(conversation);
}

async function run(conversation) {
  const alias = ui.model.disabled ? undefined : ui.model.value;
  const message = { role: "assistant", content: "", reasoning: "", status: "streaming" };
  const body = { messages: requestMessages(conversation.messages) };
  if (alias) body.model = alias;
  if (!ui.reasoning.checked) body.reasoning = false;
  conversation.messages.push(message);
  store.touch(conversation);
  const controller = new AbortController();
  active = { controller, conversation, message };
  setBusy(true);
  renderSidebar();
  renderConversation();

  const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const started = performance.now();
  let firstAt = 0;
  let final = null;
  try {
    const res = await fetch("/chat", {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: controller.signal,
      cache: "no-store",
    });
    if (!res.ok) {
      let error = {};
      try {
        error = (await res.json()).error || {};
      } catch {
        // not JSON: the status says enough
      }
      final = "error";
      message.status = "error";
      message.error = {
        code: error.code,
        status: res.status,
        message: typeof error.message === "string" ? error.message : "",
        retryAfter: Number.parseInt(res.headers.get("Retry-After") || "", 10) || undefined,
      };
      if (res.status === 401) askToken(Boolean(token));
    } else {
      await readEvents(res.body, (name, data) => {
        if (final) return;
        if (name === "message") {
          // The model's own events, as Workers AI sent them.
          const { reasoning, content } = modelDelta(data);
          if (!reasoning && !content) return;
          firstAt ||= performance.now();
          message.reasoning += reasoning;
          message.content += content;
          scheduleRender();
        } else if (name === "done") {
          final = "done";
          message.status = "done";
          const seconds = (performance.now() - (firstAt || started)) / 1000;
          const completion = data.usage ? data.usage.completion_tokens : 0;
          message.stats = {
            model: data.model,
            ttft_ms: data.ttft_ms,
            usage: data.usage,
            cost_usd: data.cost_usd,
            fallback_from: data.fallback_from,
            tps: completion && seconds > 0.05 ? completion / seconds : undefined,
          };
        } else if (name === "error") {
          final = "error";
          message.status = "error";
          message.error = { code: data.code, message: data.message, retryable: data.retryable };
        }
      });
      if (!final) message.status = "interrupted";
    }
  } catch {
    if (controller.signal.aborted) message.status = "stopped";
    else if (firstAt || message.content) message.status = "interrupted";
    else {
      message.status = "error";
      message.error = { offline: true };
    }
  }
  if (frame) {
    cancelAnimationFrame(frame);
    frame = 0;
  }
  active = null;
  setBusy(false);
  store.touch(conversation);
  const view = views.get(message);
  if (view) {
    updateView(view, true);
    scrollDown();
  }
  if (pendingRetry) {
    const next = pendingRetry;
    pendingRetry = null;
    next();
  }
}

function stopActive() {
  if (active) active.controller.abort();
}

// --- API token ------------------------------------------------------------------

function askToken(rejected) {
  if (rejected) localStorage.removeItem(TOKEN_KEY);
  ui.tokenHint.textContent = rejected ? t.tokenRejected : t.tokenHint;
  ui.tokenInput.value = "";
  if (!ui.dialog.open) ui.dialog.showModal();
  ui.tokenInput.focus();
}

ui.tokenForm.addEventListener("submit", (e) => {
  e.preventDefault();
  const value = ui.tokenInput.value.trim();
  if (!value) return;
  localStorage.setItem(TOKEN_KEY, value);
  ui.dialog.close();
  if (active) pendingRetry = retry;
  else retry();
});
ui.tokenCancel.addEventListener("click", () => ui.dialog.close());

// --- composer and controls ------------------------------------------------------

function resizeInput() {
  if (CSS.supports("field-sizing", "content")) return;
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, 200)}px`;
}

ui.form.addEventListener("submit", (e) => {
  e.preventDefault();
  send(ui.input.value);
});
ui.input.addEventListener("keydown", (e) => {
  // isComposing: Enter that confirms a Chinese IME candidate must not send.
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
    e.preventDefault();
    send(ui.input.value);
  }
});
ui.input.addEventListener("input", resizeInput);
ui.stop.addEventListener("click", () => {
  stopActive();
  ui.input.focus();
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && active && !ui.dialog.open) {
    e.preventDefault();
    stopActive();
  }
});
ui.messages.addEventListener("scroll", () => {
  const m = ui.messages;
  stick = m.scrollHeight - m.scrollTop - m.clientHeight < 48;
});
ui.messages.addEventListener("click", (e) => {
  const copy = e.target.closest("button.copy");
  if (!copy) return;
  const code = copy.closest(".code").querySelector("code").textContent;
  const done = () => {
    copy.textContent = t.copied;
    setTimeout(() => {
      copy.textContent = t.copy;
    }, 1500);
  };
  if (navigator.clipboard) navigator.clipboard.writeText(code).then(done, () => {});
});
ui.newChat.addEventListener("click", () => {
  const current = store.current;
  if (!current || current.messages.length) store.create();
  closeSidebar();
  renderSidebar();
  renderConversation();
  ui.input.focus();
});
ui.model.addEventListener("change", () => localStorage.setItem(MODEL_KEY, ui.model.value));
ui.reasoning.addEventListener("change", () => localStorage.setItem(THINK_KEY, ui.reasoning.checked ? "1" : "0"));
ui.lang.addEventListener("click", () => {
  lang = lang === "zh" ? "en" : "zh";
  saveLang(lang);
  applyLang();
});
ui.menu.addEventListener("click", () => (ui.shell.classList.contains("nav-open") ? closeSidebar() : openSidebar()));
ui.backdrop.addEventListener("click", closeSidebar);

// --- start ----------------------------------------------------------------------

ui.reasoning.checked = localStorage.getItem(THINK_KEY) !== "0";
// A conversation left streaming by a reload was cut off.
for (const c of store.conversations) {
  for (const m of c.messages) if (m.status === "streaming") m.status = "interrupted";
}
if (!store.current && store.conversations.length) store.select(store.sorted()[0].id);
applyLang();
loadModels();
ui.input.focus();
