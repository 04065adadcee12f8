// Conversations live in localStorage, so they survive a reload and never
// leave the browser except as the `messages` of a /chat request (or a file
// the user exports).
//
// A conversation: {id, title, updated, next, pick}, the root of a tree of
// messages (tree.js). A message: {role: "user"|"assistant", content,
// reasoning?, status?, stats?, error?, moderation?, images?, next, pick}
// where status is "done", "stopped", "interrupted" or "error", moderation
// is done's verdict {safe, categories} and images a user message's
// [{id, type, width, height}] (the bytes are in IndexedDB, imagedb.js).

import { contentParts } from "./images.js";
import { fromList } from "./tree.js";

const KEY = "edgechat.conversations.v2";
const OLD_KEY = "edgechat.conversations.v1"; // a plain list of messages per conversation
const CURRENT = "edgechat.current";

export class Store {
  constructor(storage = localStorage) {
    this.storage = storage;
    this.conversations = this.load();
    this.currentId = storage.getItem(CURRENT);
  }

  load() {
    try {
      const saved = this.storage.getItem(KEY);
      if (saved !== null) {
        const list = JSON.parse(saved);
        return Array.isArray(list) ? list.filter((c) => c && typeof c === "object" && Array.isArray(c.next)) : [];
      }
      const old = JSON.parse(this.storage.getItem(OLD_KEY) || "[]");
      if (!Array.isArray(old)) return [];
      return old
        .filter((c) => c && typeof c === "object" && Array.isArray(c.messages))
        .map(({ messages, ...c }) =>
          fromList(
            c,
            messages.filter((m) => m && typeof m === "object"),
          ),
        );
    } catch {
      return [];
    }
  }

  /** Writes everything; false when the storage refused (full or disabled). */
  save() {
    try {
      this.storage.setItem(KEY, JSON.stringify(this.conversations));
      if (this.currentId) this.storage.setItem(CURRENT, this.currentId);
      else this.storage.removeItem(CURRENT);
      return true;
    } catch {
      // Storage full or disabled: the chat keeps working for this visit.
      return false;
    }
  }

  sorted() {
    return [...this.conversations].sort((a, b) => b.updated - a.updated);
  }

  get current() {
    return this.conversations.find((c) => c.id === this.currentId) || null;
  }

  create() {
    const conversation = { id: newId(), title: "", updated: Date.now(), next: [], pick: 0 };
    this.conversations.push(conversation);
    this.currentId = conversation.id;
    this.save();
    return conversation;
  }

  select(id) {
    if (this.conversations.some((c) => c.id === id)) this.currentId = id;
    this.save();
  }

  rename(id, title) {
    const conversation = this.conversations.find((c) => c.id === id);
    if (conversation) conversation.title = title.trim().slice(0, 100);
    this.save();
  }

  remove(id) {
    this.conversations = this.conversations.filter((c) => c.id !== id);
    if (this.currentId === id) this.currentId = this.sorted()[0]?.id || null;
    this.save();
  }

  touch(conversation) {
    conversation.updated = Date.now();
    this.save();
  }

  /**
   * Adds conversations (already validated, transfer.js) all at once: an id
   * already here gets a new one, so nothing is overwritten. Returns false and
   * changes nothing when the storage cannot hold them.
   */
  addAll(list) {
    const before = this.conversations;
    const taken = new Set(before.map((c) => c.id));
    const added = list.map((c) => (taken.has(c.id) ? { ...c, id: newId() } : c));
    this.conversations = [...before, ...added];
    if (this.save()) return true;
    this.conversations = before;
    this.save();
    return false;
  }
}

function newId() {
  return crypto.randomUUID ? crypto.randomUUID() : String(Date.now() + Math.random());
}

/**
 * The `messages` of a /chat request from the thread on screen: the answered
 * turns, the newest kept within the server's limits (GET /api/limits), so a
 * long conversation leaves its oldest turns out instead of failing. The
 * newest message is always sent: if it alone breaks a limit, the server says
 * which. Without limits (they could not be read) everything is sent.
 * A user message's images ({id} in `images`) go as image parts, their data
 * URLs from `urls` (id → URL; one this browser no longer has is left out);
 * they count towards max_images but not the body's bytes, as on the server.
 */
export function requestMessages(messages, limits = null, urls = new Map()) {
  const usable = messages
    .map((m) => ({
      role: m.role,
      content: m.content || "",
      urls: m.role === "user" ? (m.images || []).map((i) => urls.get(i.id)).filter(Boolean) : [],
    }))
    .filter((m) => (m.content.trim() || m.urls.length) && (m.role === "user" || m.role === "assistant"));
  const out = [];
  let total = 0;
  let images = 0;
  let bytes = 64; // {"messages":[…],"model":…,"reasoning":false}
  for (let k = usable.length - 1; k >= 0; k--) {
    const m = usable[k];
    total += m.content.length;
    images += m.urls.length;
    bytes += jsonBytes({ role: m.role, content: m.content }) + 1 + m.urls.length * 48;
    if (
      out.length &&
      limits &&
      (out.length >= limits.max_messages ||
        total > limits.max_total_chars ||
        m.content.length > limits.max_message_chars ||
        bytes > limits.max_body_bytes ||
        images > (limits.max_images ?? Number.POSITIVE_INFINITY))
    )
      break;
    out.unshift({ role: m.role, content: contentParts(m.content, m.urls) });
  }
  while (out.length > 1 && out[0].role !== "user") out.shift();
  return out;
}

const encoder = new TextEncoder();
const jsonBytes = (value) => encoder.encode(JSON.stringify(value)).length;

const LIMIT_FIELDS = ["max_body_bytes", "max_messages", "max_message_chars", "max_total_chars"];
const IMAGE_FIELDS = ["max_images", "max_image_bytes"]; // from servers that take images

/** The server's limits from a GET /api/limits body, or null when it is not what the server sends. */
export function parseLimits(data) {
  if (!data || typeof data !== "object") return null;
  for (const name of LIMIT_FIELDS) if (!Number.isInteger(data[name]) || data[name] <= 0) return null;
  const names = [...LIMIT_FIELDS, ...IMAGE_FIELDS.filter((n) => Number.isInteger(data[n]) && data[n] > 0)];
  return Object.fromEntries(names.map((name) => [name, data[name]]));
}
