// Conversations in localStorage: they leave the browser only in /chat requests
// or exports. A conversation {id, title, updated, next, pick} roots a tree of
// messages (tree.js): {role, content, reasoning?, status?, stats?, error?,
// moderation?, images?: [{id, type, width, height}], next, pick}.

import { fromList, nodes } from "./tree.js";

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
      // Full or disabled: the chat still works for this visit.
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

  /** Adds validated conversations (taken ids renewed); false, nothing changed, when storage is full. */
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
 * A /chat request's `messages`: the newest turns within the server's limits, so
 * a long conversation drops its oldest instead of failing (the newest always
 * goes: the server names a limit it breaks). Image URLs come from `urls` by id
 * and count towards max_images, not body bytes, as on the server.
 */
export function requestMessages(messages, limits = null, urls = new Map()) {
  const usable = messages
    .map((m) => ({
      role: m.role,
      content: m.content || "",
      urls: m.role === "user" ? (m.images || []).map((i) => urls.get(i.id)).filter(Boolean) : [],
      files: m.role === "user" ? (m.documents || []).filter((d) => urls.get(d.id)) : [],
    }))
    .filter(
      (m) => (m.content.trim() || m.urls.length || m.files.length) && (m.role === "user" || m.role === "assistant"),
    );
  const out = [];
  let total = 0;
  let images = 0;
  let documents = 0;
  let bytes = 64; // {"messages":[…],"model":…,"reasoning":false}
  for (let k = usable.length - 1; k >= 0; k--) {
    const m = usable[k];
    total += m.content.length;
    images += m.urls.length;
    documents += m.files.length;
    bytes += jsonBytes({ role: m.role, content: m.content }) + 1 + m.urls.length * 48;
    if (
      out.length &&
      limits &&
      (out.length >= limits.max_messages ||
        total > limits.max_total_chars ||
        m.content.length > limits.max_message_chars ||
        bytes > limits.max_body_bytes ||
        images > limits.max_images ||
        documents > (limits.max_documents ?? Number.POSITIVE_INFINITY))
    )
      break;
    const files = m.files.map((d) => filePart(d.name, urls.get(d.id)));
    out.unshift({ role: m.role, content: contentParts(m.content, m.urls, files) });
  }
  while (out.length > 1 && out[0].role !== "user") out.shift();
  return out;
}

const encoder = new TextEncoder();
const jsonBytes = (value) => encoder.encode(JSON.stringify(value)).length;

const LIMIT_FIELDS = ["max_body_bytes", "max_messages", "max_message_chars", "max_total_chars"];

/** The limits from a GET /api/limits body, or null when malformed. */
export function parseLimits(data) {
  if (!data || typeof data !== "object") return null;
  for (const name of LIMIT_FIELDS) if (!Number.isInteger(data[name]) || data[name] <= 0) return null;
  const names = [
    ...LIMIT_FIELDS,
    "max_images",
    "max_image_bytes",
    "max_json_depth",
    "max_documents",
    "max_document_bytes",
    "max_document_tokens",
    "max_batch_bytes",
    "max_batch_conversations",
    "max_feedback_chars",
  ];
  return Object.fromEntries(
    names.filter((n) => Number.isInteger(data[n]) && data[n] > 0).map((name) => [name, data[name]]),
  );
}

// --- images
// Scaled down (vision models read ~1.5k px long side), kept as data: URLs in
// IndexedDB (localStorage is too small).

export const MAX_SIDE = 1568;

export function fitSize(width, height, max = MAX_SIDE) {
  const k = Math.min(1, max / Math.max(width, height));
  return { width: Math.max(1, Math.round(width * k)), height: Math.max(1, Math.round(height * k)) };
}

/** How many of `adding` images fit beside `pending` ones. */
export const fitCount = (pending, adding, limits) =>
  limits?.max_images ? Math.max(0, Math.min(adding, limits.max_images - pending)) : adding;

/** A document as an OpenAI file part. */
export const filePart = (name, url) => ({ type: "file", file: { filename: name, file_data: url } });

export function contentParts(text, urls, files = []) {
  if (!urls.length && !files.length) return text;
  const parts = [...urls.map((url) => ({ type: "image_url", image_url: { url } })), ...files];
  return text.trim() ? [{ type: "text", text }, ...parts] : parts;
}

/** `file` as JPEG {url, type, width, height} on white, quality lowered to fit `maxBytes`. */
export async function encodeImage(file, maxBytes = Number.POSITIVE_INFINITY) {
  const bitmap = await createImageBitmap(file).catch(() => {
    throw new Error("unreadable");
  });
  const { width, height } = fitSize(bitmap.width, bitmap.height);
  const canvas = document.createElement("canvas");
  canvas.width = width;
  canvas.height = height;
  const g = canvas.getContext("2d");
  g.fillStyle = "#fff";
  g.fillRect(0, 0, width, height);
  g.drawImage(bitmap, 0, 0, width, height);
  for (const quality of [0.85, 0.7, 0.5]) {
    const url = canvas.toDataURL("image/jpeg", quality);
    if (((url.length - 23) * 3) / 4 <= maxBytes) return { url, type: "image/jpeg", width, height };
  }
  throw new Error("tooLarge");
}

const kept = new Map(); // this visit's, so a request never waits on the disk
let db;

function idb(mode, act) {
  db ||= new Promise((resolve, reject) => {
    const open = indexedDB.open("edgechat", 1);
    open.onupgradeneeded = () => open.result.createObjectStore("images");
    open.onsuccess = () => resolve(open.result);
    open.onerror = reject;
  });
  return db
    .then(
      (d) =>
        new Promise((resolve, reject) => {
          const request = act(d.transaction("images", mode).objectStore("images"));
          request.onsuccess = () => resolve(request.result);
          request.onerror = reject;
        }),
    )
    .catch(() => {}); // no IndexedDB (a private window may refuse it): this visit only
}

export function putImage(id, url) {
  kept.set(id, url);
  idb("readwrite", (s) => s.put(url, id));
}

// Where an image this browser lacks comes from: for a signed-in user, the
// server (sync.js sets it), asked once at a time per image and only when the
// image is shown or sent, so a new device does not fetch every image at once.
let remote = null;
const asked = new Map();

/** `source(id)`: the image's data: URL from elsewhere, or undefined. */
export function imagesFrom(source) {
  remote = source;
}

/** The image as this browser keeps it (a data: URL), or undefined. */
export async function keptImage(id) {
  if (!kept.has(id)) {
    const url = await idb("readonly", (s) => s.get(id));
    if (url) kept.set(id, url);
  }
  return kept.get(id);
}

/** The image as this browser keeps it, else from `imagesFrom`'s source; or undefined. */
export async function getImage(id) {
  const here = await keptImage(id);
  if (here || !remote) return here;
  if (!asked.has(id))
    asked.set(
      id,
      remote(id)
        .catch(() => undefined)
        .finally(() => asked.delete(id)),
    );
  const fetched = await asked.get(id);
  if (fetched) putImage(id, fetched);
  return fetched;
}

export function dropImages(ids) {
  for (const id of ids) {
    kept.delete(id);
    idb("readwrite", (s) => s.delete(id));
  }
}

/** Deletes the data this browser keeps of `c`'s images and documents (`c` is going). */
export const dropFilesOf = (c) =>
  dropImages(nodes(c).flatMap((m) => [...(m.images || []), ...(m.documents || [])].map((i) => i.id)));
