// The chat page: conversations in the sidebar, a streamed answer per turn.
// Model and user text reach the DOM as text only, never as markup.

import { applyStrings, categoryNames, initialLang, saveLang, strings } from "./i18n.js";
import { MarkdownStream } from "./markdown.js";
import { search } from "./search.js";
import { modelDelta, readEvents } from "./sse.js";
import { dropImages, encodeImage, fitCount, getImage, parseLimits, putImage, requestMessages, Store } from "./store.js";
import { fileName, ImportError, MAX_IMPORT_BYTES, parseImport, toJson, toMarkdown } from "./transfer.js";
import { addVersion, dropVersion, nodes, parentOf, reveal, stepVersion, thread, tip, versionOf } from "./tree.js";

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
  searchOpen: $("search-open"),
  searchKey: $("search-key"),
  searchDialog: $("search-dialog"),
  searchInput: $("search-input"),
  searchStatus: $("search-status"),
  searchResults: $("search-results"),
  searchClose: $("search-close"),
  exportMd: $("export-md"),
  exportJson: $("export-json"),
  exportAll: $("export-all"),
  importButton: $("import"),
  importFile: $("import-file"),
  notice: $("notice"),
  previews: $("previews"),
  warn: $("warn"),
  attach: $("attach"),
  attachFile: $("attach-file"),
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
let limits = null; // GET /api/limits; null until read, or unreadable
const views = new Map(); // message → its DOM parts
let pending = []; // images for the next question
let encoding = 0; // of them, still being encoded
let attaching = Promise.resolve();
let problem = null; // why one was not attached: [key of t, arg]

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

// --- language

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
  renderTray();
  if (ui.searchDialog.open) runSearch();
}

// --- models

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
      const marks = [m.label, m.vision && t.sees, !m.free_plan && t.paid].filter(Boolean);
      const option = el("option", null, marks.join(" · "));
      option.value = m.alias;
      option.selected = m === chosen;
      return option;
    }),
  );
  ui.model.disabled = false;
}

const chosenModel = () => models.find((m) => m.alias === ui.model.value);

function modelLabel(id) {
  const m = models.find((x) => x.id === id || x.alias === id);
  return m ? m.label : id;
}

// --- sidebar

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
      dropImages([...nodes(c)].flatMap((m) => (m.images || []).map((i) => i.id)));
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
  const shown = store.current;
  const empty = !shown?.next.length;
  ui.exportMd.disabled = empty;
  ui.exportJson.disabled = empty;
  ui.exportAll.disabled = !store.conversations.some((c) => c.next.length);
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

// --- messages

function renderConversation() {
  views.clear();
  const conversation = store.current;
  const messages = conversation ? thread(conversation) : [];
  const articles = messages.map((m, k) => messageView(conversation, m, k === messages.length - 1));
  ui.empty.hidden = articles.length > 0;
  ui.messages.replaceChildren(ui.empty, ...articles);
  stick = true;
  scrollDown();
}

function messageView(conversation, message, isLast) {
  const root = el("article", `msg ${message.role}`);
  root.setAttribute("aria-label", message.role === "user" ? t.you : t.assistant);
  const view = { root, conversation, message, isLast };
  view.actions = el("div", "actions");
  if (message.role === "user") {
    view.bubble = el("div", "bubble", message.content);
    view.bubble.hidden = !message.content.trim();
    if (message.images?.length) {
      const row = el("div", "thumbs");
      row.append(...message.images.map(picture));
      root.append(row);
    }
    root.append(view.bubble, view.actions);
    views.set(message, view);
    renderActions(view);
    return root;
  }
  view.reasoning = el("details", "reasoning");
  view.reasoningTitle = el("summary");
  view.reasoningBody = el("div", "reasoning-body");
  view.reasoning.append(view.reasoningTitle, view.reasoningBody);
  view.flag = el("div", "problem flag");
  view.flagText = el("span");
  view.flagButton = button("btn btn-small", "", () => {
    view.shown = !view.shown;
    updateView(view, true);
  });
  view.flag.append(view.flagText, view.flagButton);
  view.answer = el("div", "answer");
  view.markdown = new MarkdownStream(view.answer, { copy: t.copy });
  view.dots = el("div", "dots", "•••");
  view.dots.setAttribute("aria-hidden", "true");
  view.footer = el("div", "footer");
  root.append(view.flag, view.reasoning, view.answer, view.dots, view.footer, view.actions);
  views.set(message, view);
  updateView(view, true);
  return root;
}

function updateView(view, full) {
  const m = view.message;
  const streaming = m.status === "streaming";
  view.root.setAttribute("aria-busy", String(streaming));
  view.root.classList.toggle("streaming", streaming);
  // Flagged by Llama Guard: hidden behind a notice.
  const flagged = m.moderation?.safe === false;
  view.flag.hidden = !flagged;
  if (flagged) {
    view.flagText.textContent = t.flagged(categoryNames(m.moderation.categories, t));
    view.flagButton.textContent = view.shown ? t.hide : t.showAnyway;
  }
  view.answer.hidden = flagged && !view.shown;
  view.reasoning.hidden = !m.reasoning || view.answer.hidden;
  view.reasoningTitle.textContent = streaming && !m.content ? t.thinking : t.reasoning;
  if (view.reasoningBody.textContent.length !== (m.reasoning || "").length)
    view.reasoningBody.textContent = m.reasoning || "";
  view.markdown.update(m.content || "");
  view.dots.hidden = !streaming || Boolean(m.content || m.reasoning);
  if (full || !streaming) {
    renderFooter(view);
    renderActions(view);
  }
}

function renderActions(view) {
  const { conversation, message: m } = view;
  const parts = [];
  const busy = Boolean(active);
  const { index, count } = versionOf(conversation, m);
  if (count > 1) {
    const nav = el("div", "versions");
    nav.setAttribute("role", "group");
    nav.setAttribute("aria-label", t.version(index + 1, count));
    const prev = button("btn-icon version-step", "‹", () => showVersion(m, -1));
    prev.setAttribute("aria-label", t.previousVersion);
    prev.disabled = busy || index === 0;
    const next = button("btn-icon version-step", "›", () => showVersion(m, 1));
    next.setAttribute("aria-label", t.nextVersion);
    next.disabled = busy || index === count - 1;
    const where = el("span", "version-count", `${index + 1}/${count}`);
    where.setAttribute("aria-hidden", "true");
    nav.append(prev, where, next);
    parts.push(nav);
  }
  if (m.status !== "streaming" && m.content && !view.answer?.hidden) {
    const copy = button("btn-small btn-ghost action", t.copy, () => copyText(copy, m.content, t.copyMessage));
    copy.setAttribute("aria-label", t.copyMessage);
    parts.push(copy);
  }
  if (m.role === "user" && !busy) {
    const edit = button("btn-small btn-ghost action", t.edit, () => startEdit(view));
    edit.setAttribute("aria-label", t.editMessage);
    parts.push(edit);
  }
  if (m.role === "assistant" && view.isLast && !busy && (m.status === "done" || m.status === "stopped")) {
    parts.push(button("btn-small btn-ghost action", t.regenerate, () => regenerate()));
  }
  view.actions.replaceChildren(...parts);
}

function showVersion(message, step) {
  const conversation = store.current;
  if (active || !conversation) return;
  const shown = stepVersion(conversation, message, step);
  if (!shown) return;
  store.save();
  renderConversation();
  // Focus stays on the arrow used, or the other one at an end.
  const article = ui.messages.querySelectorAll("article")[thread(conversation).indexOf(shown)];
  const steps = [...(article?.querySelectorAll(".version-step:not(:disabled)") || [])];
  const label = step < 0 ? t.previousVersion : t.nextVersion;
  (steps.find((b) => b.getAttribute("aria-label") === label) || steps[0])?.focus();
}

function startEdit(view) {
  if (active) return;
  const form = el("form", "edit-form");
  const box = el("textarea", "edit-input");
  box.value = view.message.content;
  box.setAttribute("aria-label", t.editMessage);
  if (limits) box.maxLength = limits.max_message_chars;
  const save = el("button", "btn btn-primary btn-small", t.saveAndSend);
  save.type = "submit";
  const cancel = button("btn btn-small", t.cancel, () => {
    renderConversation();
    ui.input.focus();
  });
  const row = el("div", "edit-actions");
  row.append(cancel, save);
  form.append(box, row);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    resend(view.message, box.value);
  });
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      resend(view.message, box.value);
    } else if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      renderConversation();
      ui.input.focus();
    }
  });
  view.root.classList.add("editing");
  view.bubble.replaceWith(form);
  view.actions.replaceChildren();
  box.focus();
  box.setSelectionRange(box.value.length, box.value.length);
}

function resend(message, text) {
  const conversation = store.current;
  if (active || !conversation || (!text.trim() && !message.images?.length)) return;
  const parent = parentOf(conversation, message);
  if (!parent) return;
  addVersion(parent, { role: "user", content: text, images: message.images });
  stick = true;
  run(conversation);
  ui.input.focus();
}

function copyText(control, text, label) {
  const done = () => {
    control.textContent = t.copied;
    if (label) control.setAttribute("aria-label", t.copied);
    setTimeout(() => {
      control.textContent = t.copy;
      if (label) control.setAttribute("aria-label", label);
    }, 1500);
  };
  if (navigator.clipboard) navigator.clipboard.writeText(text).then(done, () => {});
}

function renderFooter(view) {
  const m = view.message;
  const parts = [];
  if (m.status === "stopped") parts.push(el("span", "tag", t.stopped));
  if (m.status === "interrupted" || m.status === "error") {
    const box = el("div", "problem");
    box.setAttribute("role", "alert");
    box.append(el("span", null, m.status === "interrupted" ? t.interrupted : errorText(m.error)));
    if (view.isLast && !active && m.error?.code !== "content_refused")
      box.append(button("btn btn-small", t.retry, () => retry()));
    parts.push(box);
  }
  if (m.stats) parts.push(statsLine(m.stats));
  view.footer.replaceChildren(...parts);
}

function errorText(error = {}) {
  if (error.code === "content_refused") return t.refused(categoryNames(error.categories, t));
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

// --- chatting

function setBusy(busy) {
  ui.send.hidden = busy;
  ui.stop.hidden = !busy;
}

function send(text) {
  if (active || (!text.trim() && !pending.length && !encoding)) return;
  if (encoding) {
    attaching.then(() => send(text));
    return;
  }
  if (pending.length && chosenModel()?.vision === false) return; // the tray says why
  const conversation = store.current || store.create();
  const last = tip(conversation);
  // After an unanswered question (an import can end so), a new version of it: roles alternate.
  const parent = last.role === "user" ? parentOf(conversation, last) : last;
  const question = { role: "user", content: text };
  if (pending.length) {
    question.images = pending.map(({ url, ...image }) => {
      image.id = crypto.randomUUID();
      putImage(image.id, url);
      return image;
    });
  }
  pending = [];
  problem = null;
  renderTray();
  addVersion(parent, question);
  if (!conversation.title) conversation.title = text.trim().replace(/\s+/g, " ").slice(0, 60);
  ui.input.value = "";
  resizeInput();
  stick = true;
  run(conversation);
}

function retry() {
  const conversation = store.current;
  if (active || !conversation) return;
  const last = tip(conversation);
  if (last.role === "assistant") dropVersion(parentOf(conversation, last), last);
  run(conversation);
}

function regenerate() {
  const conversation = store.current;
  if (active || !conversation) return;
  const last = tip(conversation);
  if (last.role !== "assistant") return;
  stick = true;
  run(conversation, { fresh: true });
}

const limitsReady = loadLimits();

async function loadLimits() {
  try {
    const res = await fetch("/api/limits", { headers: { Accept: "application/json" } });
    if (res.ok) limits = parseLimits(await res.json());
  } catch {
    limits = null; // the server names any limit broken
  }
  if (limits) ui.input.maxLength = limits.max_message_chars;
}

async function run(conversation, { fresh = false } = {}) {
  const alias = ui.model.disabled ? undefined : ui.model.value;
  const sees = chosenModel()?.vision !== false;
  const message = { role: "assistant", content: "", reasoning: "", status: "streaming" };
  let parent = tip(conversation);
  if (parent.role === "assistant") parent = parentOf(conversation, parent); // regenerate: a sibling
  const path = thread(conversation);
  const history = path.slice(0, path.indexOf(parent) + 1);
  addVersion(parent, message);
  const controller = new AbortController();
  active = { controller, conversation, message };
  store.touch(conversation);
  setBusy(true);
  renderSidebar();
  renderConversation();
  await limitsReady;
  const urls = new Map();
  if (sees)
    for (const m of history)
      for (const { id } of (m.role === "user" && m.images) || []) urls.set(id, await getImage(id));
  const body = { messages: requestMessages(history, limits, urls) };
  if (alias) body.model = alias;
  if (!ui.reasoning.checked) body.reasoning = false;

  const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
  // Regenerate bypasses the server's answer cache.
  if (fresh) headers["Cache-Control"] = "no-cache";
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
    });
    if (!res.ok) {
      let error = {};
      try {
        error = (await res.json()).error || {};
      } catch {
        // not JSON
      }
      final = "error";
      message.status = "error";
      message.error = {
        code: error.code,
        status: res.status,
        message: typeof error.message === "string" ? error.message : "",
        retryAfter: Number.parseInt(res.headers.get("Retry-After") || "", 10) || undefined,
        categories: error.categories,
      };
      if (res.status === 401) askToken(Boolean(token));
    } else {
      await readEvents(res.body, (name, data) => {
        if (final) return;
        if (name === "message") {
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
          if (data.moderation) message.moderation = data.moderation;
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
  for (const other of views.values()) if (other !== view) renderActions(other);
  if (pendingRetry) {
    const next = pendingRetry;
    pendingRetry = null;
    next();
  }
}

function stopActive() {
  if (active) active.controller.abort();
}

// --- API token

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

// --- composer and controls

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
  // Enter confirming an IME candidate must not send.
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
  if ((e.ctrlKey || e.metaKey) && !e.altKey && !e.shiftKey && e.key.toLowerCase() === "k") {
    e.preventDefault();
    openSearch();
    return;
  }
  if (e.key === "Escape" && active && !ui.dialog.open && !ui.searchDialog.open) {
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
  copyText(copy, copy.closest(".code").querySelector("code").textContent);
});
ui.newChat.addEventListener("click", () => {
  const current = store.current;
  if (!current || current.next.length) store.create();
  closeSidebar();
  renderSidebar();
  renderConversation();
  ui.input.focus();
});
ui.model.addEventListener("change", () => {
  localStorage.setItem(MODEL_KEY, ui.model.value);
  renderTray();
});
ui.reasoning.addEventListener("change", () => localStorage.setItem(THINK_KEY, ui.reasoning.checked ? "1" : "0"));
ui.lang.addEventListener("click", () => {
  lang = lang === "zh" ? "en" : "zh";
  saveLang(lang);
  applyLang();
});
ui.menu.addEventListener("click", () => (ui.shell.classList.contains("nav-open") ? closeSidebar() : openSidebar()));
ui.backdrop.addEventListener("click", closeSidebar);

// --- images

function picture(image, k) {
  const img = el("img", "thumb");
  img.alt = t.imageAlt(k + 1, image.width, image.height);
  if (image.url) img.src = image.url;
  else
    getImage(image.id).then((url) => {
      if (url) img.src = url;
    });
  return img;
}

function renderTray() {
  ui.previews.replaceChildren(
    ...pending.map((p, k) => {
      const li = el("li", "preview");
      const remove = button("btn-icon remove", "×", () => {
        pending = pending.filter((x) => x !== p);
        problem = null;
        renderTray();
        ui.input.focus();
      });
      remove.setAttribute("aria-label", t.removeImage(k + 1));
      li.append(picture(p, k), remove);
      return li;
    }),
  );
  const why = problem ? [el("span", null, t[problem[0]](problem[1]))] : [];
  const model = chosenModel();
  const seeing = models.find((m) => m.vision);
  if (pending.length && model?.vision === false) {
    why.push(el("span", null, t.noVision(model.label)));
    if (seeing)
      why.push(
        button("btn btn-small", t.switchTo(seeing.label), () => {
          ui.model.value = seeing.alias;
          localStorage.setItem(MODEL_KEY, seeing.alias);
          renderTray();
          ui.input.focus();
        }),
      );
  }
  ui.warn.replaceChildren(...why);
  scrollDown();
}

function attach(files) {
  const images = [...files].filter((f) => f.type.startsWith("image/"));
  if (!images.length) return;
  encoding += images.length;
  attaching = attaching.then(async () => {
    await limitsReady;
    const take = fitCount(pending.length, images.length, limits);
    problem = take < images.length && ["tooMany", limits.max_images];
    encoding -= images.length - take;
    for (const file of images.slice(0, take)) {
      try {
        pending.push(await encodeImage(file, limits?.max_image_bytes));
      } catch (error) {
        problem = [error.message, file.name];
      }
      encoding -= 1;
      renderTray();
    }
  });
}

ui.attach.addEventListener("click", () => ui.attachFile.click());
ui.attachFile.addEventListener("change", () => {
  attach(ui.attachFile.files);
  ui.attachFile.value = "";
});
ui.form.addEventListener("paste", (e) => {
  const files = e.clipboardData?.files || [];
  if (!files.length) return;
  e.preventDefault();
  attach(files);
});
for (const name of ["dragover", "drop"]) {
  document.addEventListener(name, (e) => {
    if (![...(e.dataTransfer?.types || [])].includes("Files")) return;
    e.preventDefault();
    if (name === "drop") attach(e.dataTransfer.files);
  });
}

// --- search

let found = [];
let chosen = -1;

function openSearch() {
  if (ui.dialog.open) return;
  closeSidebar();
  if (!ui.searchDialog.open) ui.searchDialog.showModal();
  ui.searchInput.select();
  runSearch();
}

function runSearch() {
  const query = ui.searchInput.value;
  found = search(store.conversations, query);
  chosen = found.length ? 0 : -1;
  ui.searchResults.replaceChildren(
    ...found.map((r, k) => {
      const li = el("li", "result");
      li.id = `result-${k}`;
      li.setAttribute("role", "option");
      const title = el("span", "result-title");
      if (r.node) title.textContent = r.conversation.title || t.untitled;
      else marked(title, r.text, r.marks);
      li.append(title);
      if (r.node) {
        const text = el("span", "result-text");
        marked(text, r.text, r.marks);
        li.append(text);
      }
      li.addEventListener("click", () => openResult(k));
      return li;
    }),
  );
  ui.searchInput.setAttribute("aria-expanded", String(found.length > 0));
  ui.searchStatus.textContent = query.trim() ? (found.length ? t.results(found.length) : t.noResults) : "";
  markChosen();
}

/** `text` into `node`, `marks` ranges in <mark>: text nodes only. */
function marked(node, text, marks) {
  let at = 0;
  for (const [start, end] of marks) {
    if (start > at) node.append(text.slice(at, start));
    node.append(el("mark", null, text.slice(start, end)));
    at = end;
  }
  if (at < text.length) node.append(text.slice(at));
}

function markChosen() {
  ui.searchResults.querySelectorAll("[role=option]").forEach((li, k) => {
    li.setAttribute("aria-selected", String(k === chosen));
    if (k === chosen) li.scrollIntoView({ block: "nearest" });
  });
  if (chosen >= 0) ui.searchInput.setAttribute("aria-activedescendant", `result-${chosen}`);
  else ui.searchInput.removeAttribute("aria-activedescendant");
}

function openResult(k) {
  const r = found[k];
  if (!r) return;
  if (active && active.conversation !== r.conversation) stopActive();
  if (r.node) reveal(r.conversation, r.node);
  store.select(r.conversation.id);
  ui.searchDialog.close();
  renderSidebar();
  renderConversation();
  const article = r.node ? views.get(r.node)?.root : null;
  if (article) {
    stick = false;
    article.scrollIntoView({ block: "center" });
    article.classList.add("found");
  }
  ui.input.focus();
}

ui.searchInput.addEventListener("input", runSearch);
ui.searchInput.addEventListener("keydown", (e) => {
  if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    e.preventDefault();
    if (!found.length) return;
    chosen = (chosen + (e.key === "ArrowDown" ? 1 : -1) + found.length) % found.length;
    markChosen();
  } else if (e.key === "Enter") {
    e.preventDefault();
    openResult(chosen);
  } else if (e.key === "Escape") {
    // Escape closes the search, not just clears the field.
    e.preventDefault();
    ui.searchDialog.close();
  }
});
ui.searchDialog.addEventListener("close", () => ui.input.focus());
ui.searchOpen.addEventListener("click", openSearch);
ui.searchClose.addEventListener("click", () => ui.searchDialog.close());
ui.searchDialog.addEventListener("click", (e) => {
  if (e.target === ui.searchDialog) ui.searchDialog.close(); // the backdrop
});
if (/Mac|iPhone|iPad/.test(navigator.platform || "")) ui.searchKey.textContent = "⌘ K";

// --- export and import

function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function notify(text, problem = false) {
  ui.notice.textContent = text;
  ui.notice.classList.toggle("problem-text", problem);
}

ui.exportMd.addEventListener("click", () => {
  const c = store.current;
  if (!c) return;
  download(fileName(c.title, "md"), "text/markdown", toMarkdown(c, { user: t.you, assistant: t.assistant }));
});
ui.exportJson.addEventListener("click", () => {
  const c = store.current;
  if (c) download(fileName(c.title, "json"), "application/json", toJson([c]));
});
ui.exportAll.addEventListener("click", () => {
  const list = store.sorted().filter((c) => c.next.length);
  download(fileName("conversations", "json"), "application/json", toJson(list));
});
ui.importButton.addEventListener("click", () => ui.importFile.click());
ui.importFile.addEventListener("change", async () => {
  const file = ui.importFile.files[0];
  ui.importFile.value = "";
  if (!file) return;
  try {
    if (file.size > MAX_IMPORT_BYTES) throw new ImportError("size");
    const list = parseImport(await file.text());
    if (!store.addAll(list)) throw new ImportError("storage");
    store.select(store.sorted()[0].id);
    renderSidebar();
    renderConversation();
    notify(t.imported(list.length));
  } catch (error) {
    const why = t.importRefused[error instanceof ImportError ? error.code : "json"] || t.importRefused.json;
    notify(typeof why === "function" ? why(error.path) : why, true);
  }
});

// --- start

ui.reasoning.checked = localStorage.getItem(THINK_KEY) !== "0";
// A conversation left streaming by a reload was cut off.
for (const c of store.conversations) {
  for (const m of nodes(c)) if (m.status === "streaming") m.status = "interrupted";
}
if (!store.current && store.conversations.length) store.select(store.sorted()[0].id);
applyLang();
loadModels();
ui.input.focus();
