// 👍/👎 on an answer, with an optional reason (docs/api/feedback.md): sent
// with POST /api/feedback, kept in this browser by `<conversation>/<node>`
// (conversation.js reads them to draw the buttons), and for a signed-in user
// read back from GET /api/feedback on each load (pull), so a rating given on
// one device shows on the others. An anonymous page's ratings count on the
// server but only this browser shows them, and it offers no free text: the
// server keeps none it could not give back (README, "GLM or Kimi?").
// Fetched when the first finished answer is drawn, which then gets its
// buttons (on-demand.js): the empty page does without it.

import { renderConversation, rerenderActions } from "./conversation.js";
import { button, el, stylesheet, ui } from "./dom.js";
import { nodeKey } from "./node-key.js";
import { state, TOKEN_KEY } from "./state.js";

// The reasons the server takes, in its order.
const TAGS = ["inaccurate", "incomplete", "unhelpful", "too_long", "unsafe", "slow"];
const RATINGS_KEY = "edgechat.ratings.v1";
const SEQ_KEY = "edgechat.ratings.seq";
const MAX_TEXT = 500; // the server's MAX_FEEDBACK_CHARS default, until /api/limits says

const TEXT = {
  en: {
    good: "Good answer",
    bad: "Bad answer",
    reasons: {
      inaccurate: "Inaccurate",
      incomplete: "Incomplete",
      unhelpful: "Unhelpful",
      too_long: "Too long",
      unsafe: "Unsafe",
      slow: "Slow",
    },
    why: "What was wrong? (optional)",
    more: "Tell us more (optional)",
    send: "Send",
    close: "Close",
    thanks: "Thanks: your rating is kept.",
    failed: "The rating was not sent. Try again.",
  },
  zh: {
    good: "好回答",
    bad: "差回答",
    reasons: {
      inaccurate: "不准确",
      incomplete: "不完整",
      unhelpful: "没有帮助",
      too_long: "太长",
      unsafe: "不安全",
      slow: "太慢",
    },
    why: "哪里不好？（可选）",
    more: "补充说明（可选）",
    send: "发送",
    close: "关闭",
    thanks: "谢谢，评价已保存。",
    failed: "评价未发送，请重试。",
  },
};

const text = () => TEXT[state.lang] || TEXT.en;

stylesheet("../compare.css");

let kept = null;

/** The user's ratings, by `<conversation>/<node>`, read at the first use. */
function ratings() {
  if (!kept) {
    try {
      kept = JSON.parse(localStorage.getItem(RATINGS_KEY) || "{}") || {};
    } catch {
      kept = {};
    }
  }
  return kept;
}

/** Forgets this browser's ratings and where their sync stands ("Delete everything" in My data). */
export function forgetRatings() {
  kept = {};
  for (const key of Object.keys(localStorage)) {
    if (key === RATINGS_KEY || key.startsWith("edgechat.ratings.")) localStorage.removeItem(key);
  }
}

const ratingKey = (conversation, message) => `${conversation.id}/${nodeKey(message)}`;

/** A finished answer's 👍 and 👎 (conversation.js places them), pressed as rated, and the reasons given. */
export function rateButtons(view) {
  const T = text();
  const mine = ratings()[ratingKey(view.conversation, view.message)];
  const parts = [
    ["up", "👍", T.good],
    ["down", "👎", T.bad],
  ].map(([rating, face, label]) => {
    const pressed = button("btn-small btn-ghost action rate", face, () => rate(view, rating), label);
    pressed.setAttribute("aria-pressed", String(mine?.rating === rating));
    return pressed;
  });
  if (mine?.tags?.length) parts.push(el("span", "rated", mine.tags.map((tag) => T.reasons[tag] || tag).join(", ")));
  return parts;
}

function headers() {
  const out = { "Content-Type": "application/json", Accept: "application/json" };
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) out.Authorization = `Bearer ${token}`;
  return out;
}

function keep(key, value) {
  ratings()[key] = value;
  try {
    localStorage.setItem(RATINGS_KEY, JSON.stringify(ratings()));
  } catch {
    // storage full: the server has it (a signed-in user gets it back)
  }
}

async function post(view, rating, tags = [], words = "") {
  const body = { conversation: view.conversation.id, node: nodeKey(view.message), rating };
  if (view.message.stats?.model) body.model = view.message.stats.model;
  if (tags.length) body.tags = tags;
  if (words) body.text = words;
  const res = await fetch("/api/feedback", { method: "POST", headers: headers(), body: JSON.stringify(body) }).catch(
    () => null,
  );
  if (!res?.ok) return null;
  const { feedback } = await res.json();
  keep(ratingKey(view.conversation, view.message), {
    rating,
    tags,
    ...(words ? { text: words } : {}),
    updated: feedback?.updated || Date.now(),
  });
  return feedback;
}

function say(message) {
  ui.notice.textContent = message;
}

/** 👍 or 👎 on an answer; 👎 then asks why (optional). */
async function rate(view, rating) {
  const mine = ratings()[ratingKey(view.conversation, view.message)];
  if (mine?.rating !== rating) {
    const sent = await post(view, rating);
    rerenderActions(view);
    if (!sent) {
      say(text().failed);
      return;
    }
    say(text().thanks);
  }
  if (rating === "down") openReasons(view);
  else view.feedback.replaceChildren();
}

function openReasons(view) {
  const T = text();
  const mine = ratings()[ratingKey(view.conversation, view.message)] || {};
  const form = el("form", "reason-form");
  form.setAttribute("aria-label", T.bad);
  const tags = el("fieldset", "reason-tags");
  tags.append(el("legend", null, T.why));
  const boxes = TAGS.map((tag) => {
    const label = el("label", "toggle");
    const box = el("input");
    box.type = "checkbox";
    box.value = tag;
    box.checked = Boolean(mine.tags?.includes(tag));
    label.append(box, el("span", null, T.reasons[tag]));
    tags.append(label);
    return box;
  });
  form.append(tags);
  // Free text is kept for a signed-in user only (sync.js runs only for one).
  let more = null;
  if (state.sync) {
    const label = el("label", "field");
    more = el("textarea", "reason-text");
    more.rows = 2;
    more.maxLength = state.limits?.max_feedback_chars || MAX_TEXT;
    more.value = mine.text || "";
    label.append(el("span", null, T.more), more);
    form.append(label);
  }
  const close = () => {
    view.feedback.replaceChildren();
    view.actions.querySelector(".rate[aria-pressed=true]")?.focus();
  };
  const row = el("div", "edit-actions");
  const send = el("button", "btn btn-primary btn-small", T.send);
  send.type = "submit";
  row.append(button("btn btn-small", T.close, close), send);
  form.append(row);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const chosen = boxes.filter((b) => b.checked).map((b) => b.value);
    const sent = await post(view, "down", chosen, more?.value.trim() || "");
    say(sent ? T.thanks : T.failed);
    if (!sent) return;
    rerenderActions(view);
    close();
  });
  form.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    e.preventDefault();
    e.stopPropagation();
    close();
  });
  view.feedback.replaceChildren(form);
  boxes[0].focus();
}

/** `user`'s ratings from the server, since the last pull (app.js calls it on load, once signed in). */
export async function pull(user) {
  // The last seq seen is the user's own: another account in this browser starts from 0.
  const seqKey = `${SEQ_KEY}.${user}`;
  const since = Number(localStorage.getItem(seqKey)) || 0;
  let seq = since;
  let before = null;
  let changed = false;
  for (;;) {
    const query = new URLSearchParams({ limit: "200" });
    if (since) query.set("since", String(since));
    if (before !== null) query.set("before", String(before));
    const res = await fetch(`/api/feedback?${query}`, { headers: headers() }).catch(() => null);
    if (!res?.ok) return;
    const page = await res.json();
    seq = Math.max(seq, page.seq || 0);
    for (const item of page.feedback || []) {
      if (item.kind !== "rating") continue;
      const key = `${item.conversation}/${item.node}`;
      const mine = ratings()[key];
      if (mine && (mine.updated || 0) > item.updated) continue;
      keep(key, {
        rating: item.rating,
        tags: item.tags || [],
        ...(item.text ? { text: item.text } : {}),
        updated: item.updated,
      });
      changed = true;
    }
    if (page.next === null || page.next === undefined) break;
    before = page.next;
  }
  localStorage.setItem(seqKey, String(seq));
  if (changed && !state.active) renderConversation();
}
