// Conversations live in localStorage, so they survive a reload and never
// leave the browser except as the `messages` of a /chat request.
//
// A conversation: {id, title, updated, messages: [message]}. A message:
// {role: "user"|"assistant", content, reasoning?, status?, stats?, error?}
// where status is "done", "stopped", "interrupted" or "error".

const KEY = "edgechat.conversations.v1";
const CURRENT = "edgechat.current";

// The server's defaults (MAX_MESSAGES, MAX_TOTAL_CHARS): older turns are left
// out of a request rather than making a long conversation fail.
const MAX_MESSAGES = 50;
const MAX_TOTAL_CHARS = 32000;

export class Store {
  constructor(storage = localStorage) {
    this.storage = storage;
    this.conversations = this.load();
    this.currentId = storage.getItem(CURRENT);
  }

  load() {
    try {
      const list = JSON.parse(this.storage.getItem(KEY) || "[]");
      return Array.isArray(list) ? list.filter((c) => c && Array.isArray(c.messages)) : [];
    } catch {
      return [];
    }
  }

  save() {
    try {
      this.storage.setItem(KEY, JSON.stringify(this.conversations));
      if (this.currentId) this.storage.setItem(CURRENT, this.currentId);
      else this.storage.removeItem(CURRENT);
    } catch {
      // Storage full or disabled: the chat keeps working for this visit.
    }
  }

  sorted() {
    return [...this.conversations].sort((a, b) => b.updated - a.updated);
  }

  get current() {
    return this.conversations.find((c) => c.id === this.currentId) || null;
  }

  create() {
    const id = crypto.randomUUID ? crypto.randomUUID() : String(Date.now() + Math.random());
    const conversation = { id, title: "", updated: Date.now(), messages: [] };
    this.conversations.push(conversation);
    this.currentId = id;
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
}

/** The `messages` of a /chat request: the answered turns, newest kept when over the caps. */
export function requestMessages(messages) {
  const usable = messages
    .filter((m) => m.content?.trim() && (m.role === "user" || m.role === "assistant"))
    .map((m) => ({ role: m.role, content: m.content }));
  const out = [];
  let total = 0;
  for (let k = usable.length - 1; k >= 0; k--) {
    total += usable[k].content.length;
    if (out.length >= MAX_MESSAGES || (out.length && total > MAX_TOTAL_CHARS)) break;
    out.unshift(usable[k]);
  }
  while (out.length > 1 && out[0].role !== "user") out.shift();
  return out;
}
