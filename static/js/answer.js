// The run of one answer, however it was asked for (send, edit, retry, regenerate).

import { chosenModel, setBusy } from "./composer.js";
import { renderConversation, retry, showEnded, showStreaming } from "./conversation.js";
import { ui } from "./dom.js";
import { renderSidebar } from "./sidebar.js";
import { modelDelta, readEvents } from "./sse.js";
import { state, store, TOKEN_KEY } from "./state.js";
import { getImage, requestMessages } from "./store.js";
import { addVersion, parentOf, thread, tip } from "./tree.js";

export async function answer(conversation, { fresh = false } = {}) {
  const alias = ui.model.disabled ? undefined : ui.model.value;
  const sees = chosenModel()?.vision !== false;
  const message = { role: "assistant", content: "", reasoning: "", status: "streaming" };
  const history = place(conversation, message);
  const controller = new AbortController();
  state.active = { controller, conversation, message };
  store.touch(conversation);
  setBusy(true);
  renderSidebar();
  renderConversation();
  const { body, headers } = await request(conversation, history, { alias, sees, fresh });
  let frame = 0;
  const onText = () => {
    frame ||= requestAnimationFrame(() => {
      frame = 0;
      if (state.active) showStreaming(state.active.message);
    });
  };
  await streamAnswer(message, { body, headers, signal: controller.signal }, onText);
  if (message.error?.status === 401) askToken(Boolean(headers.Authorization));
  if (frame) cancelAnimationFrame(frame);
  state.active = null;
  setBusy(false);
  store.touch(conversation);
  showEnded(message);
  if (state.pendingRetry) {
    const next = state.pendingRetry;
    state.pendingRetry = null;
    next();
  }
}

export function stopActive() {
  if (state.active) state.active.controller.abort();
}

function place(conversation, message) {
  let parent = tip(conversation);
  if (parent.role === "assistant") parent = parentOf(conversation, parent); // regenerate: a sibling
  const path = thread(conversation);
  const history = path.slice(0, path.indexOf(parent) + 1);
  addVersion(parent, message);
  return history;
}

/** The /chat request of a question: `history` (the thread up to it) of `conversation`. */
export async function request(conversation, history, { alias, sees = true, fresh = false } = {}) {
  await state.limitsReady;
  const urls = new Map();
  if (sees)
    for (const m of history)
      for (const { id } of (m.role === "user" && m.images) || []) urls.set(id, await getImage(id));
  for (const m of history)
    for (const { id } of (m.role === "user" && m.documents) || []) urls.set(id, await getImage(id));
  const body = { messages: requestMessages(history, state.limits, urls) };
  if (alias) body.model = alias;
  if (!ui.reasoning.checked) body.reasoning = false;
  const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
  // Regenerate bypasses the server's answer cache.
  if (fresh) headers["Cache-Control"] = "no-cache";
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  if (conversation.preset) body.preset = conversation.preset;
  const base = state.knowledgeFor?.(conversation); // knowledge.js, once opened
  if (base) body.knowledge = base;
  const { id } = conversation; // names the conversation for the prompt cache
  if (typeof id === "string" && id && id.length <= 128) body.conversation = id;
  return { body, headers };
}

// Never rejects: the status says how it ended, and what came before an error stands.
// `url`: a comparison's answer is /chat?comparison=<id>&slot=<n>.
export async function streamAnswer(message, { body, headers, signal, url = "/chat" }, onText = () => {}) {
  const started = performance.now();
  let firstAt = 0;
  let final = null;
  let requestId;
  try {
    const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body), signal });
    if (!res.ok) return await refused(message, res);
    await readEvents(res.body, (name, data) => {
      if (final) return;
      if (name === "meta") requestId ??= data.request_id;
      // The closing is the Worker's only when it names meta's request: one
      // forged inside the model's relayed events is not the end.
      if ((name === "done" || name === "error") && data.request_id !== requestId) return;
      if (name === "message") {
        const { reasoning, content } = modelDelta(data);
        if (!reasoning && !content) return;
        firstAt ||= performance.now();
        message.reasoning += reasoning;
        message.content += content;
        onText();
      } else if (name === "done") {
        final = name;
        finish(message, data, (performance.now() - (firstAt || started)) / 1000);
      } else if (name === "error") {
        final = name;
        message.status = "error";
        message.error = { code: data.code, message: data.message, retryable: data.retryable };
      }
    });
    if (!final) message.status = "interrupted";
  } catch {
    if (signal.aborted) message.status = "stopped";
    else if (firstAt || message.content) message.status = "interrupted";
    else {
      message.status = "error";
      message.error = { offline: true };
    }
  }
}

/** The error of a refused request, as a message keeps it (conversation.js errorText words it). */
export async function refusal(res) {
  let error = {};
  try {
    error = (await res.json()).error || {};
  } catch {
    // not JSON
  }
  return {
    code: error.code,
    status: res.status,
    message: typeof error.message === "string" ? error.message : "",
    retryAfter: Number.parseInt(res.headers.get("Retry-After") || "", 10) || undefined,
    categories: error.categories,
    ...(typeof error.resets_at === "string" ? { resetsAt: error.resets_at } : {}),
  };
}

async function refused(message, res) {
  message.status = "error";
  message.error = await refusal(res);
}

function finish(message, data, seconds) {
  message.status = "done";
  const completion = data.usage ? data.usage.completion_tokens : 0;
  message.stats = {
    model: data.model,
    ttft_ms: data.ttft_ms,
    usage: data.usage,
    cost_usd: data.cost_usd,
    fallback_from: data.fallback_from,
    ...(data.route ? { route: { model: data.route.model, reason: data.route.reason } } : {}),
    // From the semantic cache: a similar question's kept answer ("Ask fresh" skips it).
    ...(data.cached?.kind === "similar"
      ? { similar: { score: data.cached.score, question: data.cached.question } }
      : {}),
    tps: completion && seconds > 0.05 ? completion / seconds : undefined,
    // A knowledge base's passages, kept with the answer (sources.js).
    ...(data.sources?.length ? { sources: data.sources } : {}),
  };
  if (data.moderation) message.moderation = data.moderation;
}

function askToken(rejected) {
  if (rejected) localStorage.removeItem(TOKEN_KEY);
  ui.tokenHint.textContent = rejected ? state.t.tokenRejected : state.t.tokenHint;
  ui.tokenInput.value = "";
  if (!ui.tokenDialog.open) ui.tokenDialog.showModal();
  ui.tokenInput.focus();
}

export function saveToken(e) {
  e.preventDefault();
  const value = ui.tokenInput.value.trim();
  if (!value) return;
  localStorage.setItem(TOKEN_KEY, value);
  ui.tokenDialog.close();
  if (state.active) state.pendingRetry = retry;
  else retry();
}
