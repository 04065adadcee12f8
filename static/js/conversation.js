// The conversation on screen: a view per message, and the actions each allows.

import { answer } from "./answer.js";
import { isSendKey, modelLabel, picture } from "./composer.js";
import { documentChip } from "./documents.js";
import { button, el, ui } from "./dom.js";
import { categoryNames } from "./i18n.js";
import { MarkdownStream } from "./markdown.js";
import { onDemand } from "./on-demand.js";
import { renderPresets } from "./presets.js";
import { state, store } from "./state.js";
import { addVersion, dropVersion, parentOf, stepVersion, thread, tip, versionOf } from "./tree.js";

// Read aloud (speech.js) comes with the first click on it; until then nothing is being read.
const speech = onDemand("./speech.js");
const isReading = (m) => Boolean(speech.loaded?.isReading(m));
// 👍/👎 with a reason (feedback.js) come with the first finished answer drawn.
const feedback = onDemand("./feedback.js");
// A knowledge base's passages (sources.js) come with the first answer that cites them.
const sources = onDemand("./sources.js");
// A comparison's answers met again (a reload, another device): compare.js offers their vote.
const compareMode = onDemand("./compare.js");

const views = new Map();

export const viewOf = (message) => views.get(message);

export function renderConversation() {
  views.clear();
  const conversation = store.current;
  const messages = conversation ? thread(conversation) : [];
  // A comparison's answers side by side (compare.js), in place of the one picked.
  const { compare } = state;
  const comparing = compare?.conversation === conversation && compare.messages.includes(messages.at(-1));
  if (comparing) messages.pop();
  else if (messages.at(-1)?.stats?.comparison) compareMode.call("resume")(conversation);
  const articles = messages.map((m, k) => {
    const view = messageView(conversation, m, k === messages.length - 1);
    views.set(m, view);
    return view.root;
  });
  if (comparing) articles.push(compare.render());
  ui.empty.hidden = articles.length > 0;
  ui.messages.replaceChildren(ui.empty, ...articles);
  renderPresets();
  state.stick = true;
  scrollDown();
}

export function scrollDown() {
  if (state.stick) ui.messages.scrollTop = ui.messages.scrollHeight;
}

export function followScroll() {
  const m = ui.messages;
  state.stick = m.scrollHeight - m.scrollTop - m.clientHeight < 48;
}

// The answer may be off screen: another conversation opened while it streams.
export function showStreaming(message) {
  const view = views.get(message);
  if (view) updateView(view, false);
  scrollDown();
}

// Also the other messages' actions, which a busy page leaves out.
export function showEnded(message) {
  const view = views.get(message);
  if (view) {
    updateView(view, true);
    scrollDown();
  }
  for (const other of views.values()) if (other !== view) renderActions(other);
}

export function copyCode(e) {
  const copy = e.target.closest("button.copy");
  if (!copy) return;
  copyText(copy, copy.closest(".code").querySelector("code").textContent);
}

function showVersion(message, step) {
  const conversation = store.current;
  if (state.active || !conversation) return;
  const shown = stepVersion(conversation, message, step);
  if (!shown) return;
  store.save();
  renderConversation();
  // Focus stays on the arrow used, or the other one at an end.
  const article = ui.messages.querySelectorAll("article")[thread(conversation).indexOf(shown)];
  const steps = [...(article?.querySelectorAll(".version-step:not(:disabled)") || [])];
  const label = step < 0 ? state.t.previousVersion : state.t.nextVersion;
  (steps.find((b) => b.getAttribute("aria-label") === label) || steps[0])?.focus();
}

function resend(message, text) {
  const conversation = store.current;
  if (state.active || !conversation || (!text.trim() && !message.images?.length && !message.documents?.length)) return;
  const parent = parentOf(conversation, message);
  if (!parent) return;
  addVersion(parent, { role: "user", content: text, images: message.images, documents: message.documents });
  state.stick = true;
  answer(conversation);
  ui.input.focus();
}

export function retry() {
  const conversation = store.current;
  if (state.active || !conversation) return;
  const last = tip(conversation);
  if (last.role === "assistant") dropVersion(parentOf(conversation, last), last);
  answer(conversation);
}

function regenerate() {
  const conversation = store.current;
  if (state.active || !conversation) return;
  const last = tip(conversation);
  if (last.role !== "assistant") return;
  state.stick = true;
  answer(conversation, { fresh: true });
}

/** One answer of a comparison (compare.js places it), kept like the thread's: drawn once, or `view` again. */
export function answerView(conversation, message, view = messageView(conversation, message, false, true)) {
  views.set(message, view);
  return view;
}

function messageView(conversation, message, isLast, compare = false) {
  const { t } = state;
  const root = el("article", `msg ${message.role}`);
  root.setAttribute("aria-label", message.role === "user" ? t.you : t.assistant);
  const view = { root, conversation, message, isLast, compare };
  view.actions = el("div", "actions");
  if (message.role === "user") {
    view.bubble = el("div", "bubble", message.content);
    view.bubble.hidden = !message.content.trim();
    if (message.images?.length) {
      const row = el("div", "thumbs");
      row.append(...message.images.map(picture));
      root.append(row);
    }
    if (message.documents?.length) {
      const chips = el("ul", "doc-chips");
      chips.setAttribute("aria-label", state.t.attached);
      chips.append(...message.documents.map((doc) => documentChip(doc)));
      root.append(chips);
    }
    root.append(view.bubble, view.actions);
    renderActions(view);
    return view;
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
  view.markdown = new MarkdownStream(view.answer, {
    copy: t.copy,
    diagram: t.diagram,
    showSource: t.showSource,
    showDiagram: t.showDiagram,
    diagramError: t.diagramError,
  });
  view.dots = el("div", "dots", "•••");
  view.dots.setAttribute("aria-hidden", "true");
  view.footer = el("div", "footer");
  view.feedback = el("div", "feedback");
  root.append(view.flag, view.reasoning, view.answer, view.dots, view.footer, view.actions, view.feedback);
  updateView(view, true);
  return view;
}

function updateView(view, full) {
  const { t } = state;
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
  // A streaming answer's last block may still grow; any other answer is whole.
  view.markdown.update(m.content || "", !streaming);
  view.dots.hidden = !streaming || Boolean(m.content || m.reasoning);
  if (full || !streaming) {
    renderFooter(view);
    renderActions(view);
  }
}

function renderActions(view) {
  const { t } = state;
  const { conversation, message: m } = view;
  const parts = [];
  const busy = Boolean(state.active);
  const { index, count } = versionOf(conversation, m);
  if (count > 1 && !view.compare) parts.push(versionSteps(m, index, count, busy));
  if (m.status !== "streaming" && m.content && !view.answer?.hidden) {
    const copy = button(
      "btn-small btn-ghost action",
      t.copy,
      () => copyText(copy, m.content, state.t.copyMessage),
      t.copyMessage,
    );
    parts.push(copy);
  }
  if (m.role === "user" && !busy) {
    parts.push(button("btn-small btn-ghost action", t.edit, () => startEdit(view), t.editMessage));
  }
  if (m.role === "assistant" && view.isLast && !busy && (m.status === "done" || m.status === "stopped")) {
    parts.push(button("btn-small btn-ghost action", t.regenerate, () => regenerate()));
  }
  // Last, so Copy and Regenerate keep their places in the tab order.
  if (m.role === "assistant" && m.status !== "streaming" && m.content && !view.answer?.hidden) {
    const read = button("btn-small btn-ghost action", isReading(m) ? t.stopReading : t.readAloud, () => {
      if (isReading(m)) speech.loaded.stopReading();
      else speech.call("readAloud")(m, () => views.get(m) && renderActions(views.get(m)));
    });
    read.setAttribute("aria-pressed", String(isReading(m)));
    parts.push(read);
  }
  if (m.role === "assistant" && m.status === "done" && !view.compare && conversation.id) parts.push(...rated(view));
  view.actions.replaceChildren(...parts);
}

// 👍/👎 are feedback.js's: they come with the first answer that takes them.
function rated(view) {
  if (feedback.loaded) return feedback.loaded.rateButtons(view);
  feedback.ready().then(
    () => views.get(view.message) === view && renderActions(view),
    () => {}, // asked again with the next answer drawn
  );
  return [];
}

export const rerenderActions = (view) => renderActions(view);

/** Every message's actions, as a page no longer busy offers them. */
export function renderAllActions() {
  for (const view of views.values()) renderActions(view);
}

function versionSteps(m, index, count, busy) {
  const { t } = state;
  const nav = el("div", "versions");
  nav.setAttribute("role", "group");
  nav.setAttribute("aria-label", t.version(index + 1, count));
  const prev = button("btn-icon version-step", "‹", () => showVersion(m, -1), t.previousVersion);
  prev.disabled = busy || index === 0;
  const next = button("btn-icon version-step", "›", () => showVersion(m, 1), t.nextVersion);
  next.disabled = busy || index === count - 1;
  const where = el("span", "version-count", `${index + 1}/${count}`);
  where.setAttribute("aria-hidden", "true");
  nav.append(prev, where, next);
  return nav;
}

function startEdit(view) {
  if (state.active) return;
  const { t, limits } = state;
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
    if (isSendKey(e)) {
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

function copyText(control, text, label) {
  const done = () => {
    control.textContent = state.t.copied;
    if (label) control.setAttribute("aria-label", state.t.copied);
    setTimeout(() => {
      control.textContent = state.t.copy;
      if (label) control.setAttribute("aria-label", label);
    }, 1500);
  };
  if (navigator.clipboard) navigator.clipboard.writeText(text).then(done, () => {});
}

// The stats lines name models by the catalog's labels: a conversation shown
// before /api/models answered is named again once it has.
export function renderFooters() {
  for (const view of views.values()) if (view.footer) renderFooter(view);
}

function renderFooter(view) {
  const { t } = state;
  const m = view.message;
  const parts = [];
  if (m.status === "stopped") parts.push(el("span", "tag", t.stopped));
  if (m.status === "interrupted" || m.status === "error") {
    const box = el("div", "problem");
    box.setAttribute("role", "alert");
    box.append(el("span", null, m.status === "interrupted" ? t.interrupted : errorText(m.error)));
    if (view.isLast && !state.active && m.error?.code !== "content_refused")
      box.append(button("btn btn-small", t.retry, () => retry()));
    parts.push(box);
  }
  if (m.stats) parts.push(statsLine(m.stats));
  if (m.stats?.similar) parts.push(similarNote(m.stats.similar, view.isLast && !state.active));
  view.footer.replaceChildren(...parts);
  if (m.stats?.sources) sources.call("cite")(view);
}

export function errorText(error = {}) {
  const { t } = state;
  if (error.code === "content_refused") return t.refused(categoryNames(error.categories, t));
  const base = t.errors[error.code] || t.errors[error.status] || error.message || t.errors[500];
  if (error.offline) return t.offline;
  // A daily limit says when it resets (00:00 UTC), shown in local time.
  const resets = error.resetsAt ? new Date(error.resetsAt) : null;
  if (resets && !Number.isNaN(resets.getTime())) {
    return `${base} ${t.resetsAt(resets.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }))}`;
  }
  return error.retryAfter ? `${base} ${t.waitSeconds(error.retryAfter)}` : base;
}

function statsLine(s) {
  const { t } = state;
  const line = el("div", "stats");
  // auto's choice reads "auto → GLM 4.7 Flash: short question"; a blind comparison's names none.
  const bits = s.model ? [s.route ? t.routed(modelLabel(s.model), s.route.reason) : modelLabel(s.model)] : [];
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

// An answer kept for a similar question: which, how similar, and a way to a fresh one.
function similarNote({ score, question }, canAsk) {
  const { t } = state;
  const note = el("div", "note similar", t.similar(Number(score).toFixed(2)));
  const asked = el("q", "similar-question", question);
  note.append(" ", asked);
  if (canAsk) {
    const fresh = button("btn btn-small", t.askFresh, () => regenerate(), t.askFreshLabel);
    note.append(" ", fresh);
  }
  return note;
}

function formatCost(usd) {
  if (usd === 0) return "0";
  if (usd >= 0.01) return usd.toFixed(2);
  return usd.toPrecision(2).replace(/0+$/, "");
}
