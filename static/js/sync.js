// Conversations that follow a signed-in user (the server's /api/conversations).
// Loaded only for a user the server knows (app.js asks /api/me): an anonymous
// page never fetches this file. Offline first: localStorage stays the page's
// store and the server is the truth it catches up with — on load, on focus,
// when the network is back, and a moment after every local change.
//
// - A conversation travels flat (the server's form, conversations.py): its
//   nodes in breadth-first order, each naming its parent's index.
// - Both devices' edits are kept: two trees merge node by node, a node being
//   the same message when its role and text are; a message only one side has
//   becomes one more version where it was added (tree.js's versions).
// - A local delete is sent as a DELETE with the version last seen; the
//   server's tombstones delete here, unless this page changed the
//   conversation since (then its copy goes back up: nothing is lost).
// - A question's images go to the server before the conversation naming them
//   (PUT /api/files/<id>, their bytes as this browser keeps them); one this
//   browser lacks comes down into its store when it is first shown or sent
//   (GET /api/files/<id>). Documents stay in the browser that attached them.
// - A failure (offline, 5xx) keeps everything here, says so, and retries.

import { button, el, ui } from "./dom.js";
import { fnv } from "./node-key.js";
import { onDemand } from "./on-demand.js";
import { state, store, TOKEN_KEY } from "./state.js";
import { dropFilesOf, imagesFrom, keptImage } from "./store.js";
import { fromFlat, nodes } from "./tree.js";

const SYNC_KEY = "edgechat.sync.v1";
const RETRY_MS = [2000, 5000, 15000, 30000, 60000];
const QUIET_MS = 800; // after a change, before it is sent
// The server's rules for an answer's stats (history/conversations.py _STATS): a
// comparison's answer takes its comparison to the user's other devices, which
// offer its vote (compare.js resume).
const STATS = [
  "model",
  "ttft_ms",
  "usage",
  "cost_usd",
  "fallback_from",
  "tps",
  "route",
  "similar",
  "sources",
  "comparison",
];
const USAGE = ["prompt_tokens", "completion_tokens", "total_tokens"];
const ERROR = ["code", "status", "message", "retryAfter", "retryable", "offline", "categories"];
const STATUSES = new Set(["done", "stopped", "interrupted", "error"]);
const IMAGE = ["id", "type", "width", "height"];

const only = (value, names) =>
  Object.fromEntries(names.filter((n) => value[n] !== undefined && value[n] !== null).map((n) => [n, value[n]]));

/** The flat form of a conversation tree: what PUT /api/conversations/<id> takes. */
export function toFlat(c) {
  const flat = [];
  const queue = (c.next || []).map((node) => [node, null]);
  for (let k = 0; k < queue.length; k++) {
    const [node, parent] = queue[k];
    const out = { parent, role: node.role, content: node.content || "" };
    if (node.reasoning) out.reasoning = node.reasoning;
    if (node.status) out.status = STATUSES.has(node.status) ? node.status : "interrupted";
    if (node.stats) {
      out.stats = only(node.stats, STATS);
      if (out.stats.usage) out.stats.usage = only(out.stats.usage, USAGE);
    }
    if (node.error) out.error = only(node.error, ERROR);
    if (node.moderation)
      out.moderation = { safe: !!node.moderation.safe, categories: node.moderation.categories || [] };
    if (node.pick) out.pick = node.pick;
    if (node.role === "user" && node.images?.length) out.images = node.images.map((i) => only(i, IMAGE));
    flat.push(out);
    for (const child of node.next || []) queue.push([child, flat.length - 1]);
  }
  const body = { id: c.id, title: c.title || "", updated: c.updated || 0, nodes: flat };
  if (c.pick) body.pick = c.pick;
  if (c.preset) body.preset = c.preset;
  return body;
}

/**
 * `local` becomes `remote` (the server's, with nothing new here), keeping
 * what only this browser holds of a message (its images and documents).
 */
export function adopt(local, remote) {
  const stack = [[local, remote]];
  while (stack.length) {
    const [mine, theirs] = stack.pop();
    for (const other of theirs.next || []) {
      const match = (mine.next || []).find((node) => same(node, other));
      if (!match) continue;
      if (match.images) other.images = match.images;
      if (match.documents) other.documents = match.documents;
      stack.push([match, other]);
    }
  }
  for (const key of Object.keys(local)) if (!(key in remote)) delete local[key];
  Object.assign(local, remote);
}

const same = (a, b) => a.role === b.role && (a.content || "") === (b.content || "");

/**
 * `local` with every message of `remote` it lacks, added as versions where
 * they belong; nothing of either is dropped. `local`'s objects are kept (they
 * hold what only this browser has: images, documents). Returns whether
 * anything was added.
 */
export function merge(local, remote) {
  let added = false;
  const stack = [[local, remote]];
  while (stack.length) {
    const [mine, theirs] = stack.pop();
    mine.next ||= [];
    for (const other of theirs.next || []) {
      const match = mine.next.find((node) => same(node, other));
      if (match) {
        stack.push([match, other]);
        continue;
      }
      mine.next.push(other);
      added = true;
    }
  }
  return added;
}

const encoder = new TextEncoder();

/**
 * `pending` in groups for POST /api/conversations, within the server's
 * max_batch_conversations and max_batch_bytes (a conversation too large for
 * a batch goes alone, as a PUT); each alone when the server names no batch.
 */
export function batches(pending, limits) {
  const most = limits?.max_batch_conversations || 1;
  const room = (limits?.max_batch_bytes || 0) - 16; // {"put":[...]}
  const groups = [];
  let group = [];
  let bytes = 0;
  for (const item of pending) {
    const size = item.bytes + 48; // {"conversation":...,"if_none_match":"*"},
    if (group.length && (group.length >= most || bytes + size > room)) {
      groups.push(group);
      group = [];
      bytes = 0;
    }
    group.push(item);
    bytes += size;
  }
  if (group.length) groups.push(group);
  return groups;
}

/** What a push sends of `c`: its flat form, that form's JSON, and the JSON's sum. */
function outgoing(c) {
  const body = toFlat(c);
  const text = JSON.stringify(body);
  return { body, text, sum: fnv(text) };
}

function loadState(user) {
  try {
    const saved = JSON.parse(localStorage.getItem(SYNC_KEY) || "null");
    if (saved && saved.user === user && saved.known && typeof saved.seq === "number") {
      saved.deletes ||= {};
      saved.files ||= {};
      return saved;
    }
  } catch {}
  // known: {id: {etag, sum}} as last agreed with the server; deletes: {id: etag};
  // files: {image id: 1} the server holds.
  return { user, seq: 0, known: {}, deletes: {}, files: {} };
}

const streaming = (c) => nodes(c).some((m) => m.status === "streaming");

/** The images `c`'s questions name. */
const imagesOf = (c) => nodes(c).flatMap((m) => (m.role === "user" && m.images) || []);

/** A data: URL's bytes (the page's CSP lets fetch reach this origin only). */
function bytesOf(url) {
  const text = atob(url.slice(url.indexOf(",") + 1));
  const bytes = new Uint8Array(text.length);
  for (let k = 0; k < text.length; k++) bytes[k] = text.charCodeAt(k);
  return bytes;
}

/** A Blob as a data: URL, the form the image store keeps. */
const dataUrl = (blob) =>
  new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });

export class Sync {
  constructor(me, { fetcher = fetch.bind(globalThis), render = () => {}, say = () => {} } = {}) {
    this.me = me;
    this.fetch = fetcher;
    this.render = render;
    this.say = say;
    this.state = loadState(me.user);
    this.running = null;
    this.again = false;
    this.failures = 0;
    this.timer = 0;
    this.applying = false;
    this.refused = {}; // id: the sum the server refused (this visit)
    this.refusedImages = new Set(); // image ids the server refused (this visit)
    this.noFiles = false; // the server keeps no images (no FILES bucket)
    this.missing = new Set(); // image ids the server does not hold (this visit)
    this.problem = null;
  }

  headers(extra = {}) {
    const headers = { ...extra };
    const token = localStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    return headers;
  }

  save() {
    localStorage.setItem(SYNC_KEY, JSON.stringify(this.state));
  }

  /** Pull then push; one run at a time (a request during one runs once more after). */
  run() {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        this.problem = null;
        do {
          this.again = false;
          await this.pull();
          await this.push();
        } while (this.again);
        this.failures = 0;
        this.say(this.problem?.what || "synced", this.problem?.limit);
      } catch {
        this.failures++;
        this.say("failed");
        this.later(RETRY_MS[Math.min(this.failures - 1, RETRY_MS.length - 1)]);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  later(ms) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), ms);
  }

  /** `body`: sent as JSON; `bytes`: sent as they are, with `headers` naming their type. */
  async request(method, path, { body, bytes, headers = {} } = {}) {
    const init = { method, headers: this.headers(headers), cache: "no-store" };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    if (bytes !== undefined) init.body = bytes;
    let response;
    try {
      response = await this.fetch(path, init);
    } catch {
      throw new Error("offline");
    }
    if (response.status >= 500 || response.status === 401 || response.status === 429)
      throw new Error(`status ${response.status}`);
    return response;
  }

  async pull() {
    let before = null;
    let top = null;
    do {
      const query = new URLSearchParams({ since: String(this.state.seq), bodies: "1", limit: "50" });
      if (before !== null) query.set("before", String(before));
      const response = await this.request("GET", `/api/conversations?${query}`);
      if (!response.ok) throw new Error(`status ${response.status}`);
      const page = await response.json();
      top ??= page.seq;
      for (const item of page.conversations) this.apply(item);
      before = page.next;
    } while (before !== null);
    this.state.seq = Math.max(this.state.seq, top || 0);
    this.save();
  }

  /** One changed conversation from the server, into the local store. */
  apply(item) {
    const known = this.state.known[item.id];
    if (known?.etag === item.etag) return;
    const local = store.conversations.find((c) => c.id === item.id);
    const changedHere = !!local && (!known || known.sum !== this.sum(local));
    this.applying = true;
    try {
      if (item.deleted) {
        delete this.state.known[item.id];
        delete this.state.deletes[item.id];
        // Changed here since it was last sent: it goes back up, as new.
        if (local && !changedHere) {
          store.conversations = store.conversations.filter((c) => c !== local);
          dropFilesOf(local);
          if (store.currentId === item.id) store.currentId = store.sorted()[0]?.id || null;
        }
      } else {
        const remote = fromFlat(item.conversation);
        if (!local) store.conversations.push(remote);
        else if (changedHere) merge(local, remote);
        else adopt(local, remote);
        // What the server holds: a merge that added to it differs, and is sent.
        this.state.known[item.id] = { etag: item.etag, sum: this.sum(remote) };
        if (!store.currentId) store.currentId = item.id;
      }
      store.save();
    } finally {
      this.applying = false;
    }
    this.save();
    this.render();
  }

  sum(c) {
    return outgoing(c).sum;
  }

  /** An image of the user's that this browser lacks, from the server, as a data: URL; or undefined. */
  async fetchImage(id) {
    if (this.noFiles || this.missing.has(id)) return undefined;
    const response = await this.request("GET", `/api/files/${encodeURIComponent(id)}`);
    if (!response.ok) {
      // A 404: the server does not hold it, as its device could not send it
      // (or it is a document's, which stay where they were attached).
      this.missing.add(id);
      return undefined;
    }
    this.state.files[id] = 1;
    this.save();
    return dataUrl(await response.blob());
  }

  /** `c`'s images the server does not hold yet, sent before `c` names them to it. */
  async upload(c) {
    for (const image of imagesOf(c)) {
      if (this.noFiles || this.state.files[image.id] || this.refusedImages.has(image.id)) continue;
      const url = await keptImage(image.id);
      if (!url) continue; // named here but kept elsewhere: the server has it or never will
      const path = `/api/files/${encodeURIComponent(image.id)}`;
      const response = await this.request("PUT", path, {
        bytes: bytesOf(url),
        headers: { "Content-Type": image.type },
      });
      if (response.ok) {
        this.state.files[image.id] = 1;
        this.save();
      } else if (response.status === 404) {
        this.noFiles = true; // no FILES bucket: images stay in this browser
      } else {
        // Refused for what it is (a limit, its bytes): it stays in this browser.
        const refused = await response.json().catch(() => ({}));
        this.refusedImages.add(image.id);
        this.problem = { what: "imageLimit", limit: refused?.error?.limit || response.status };
      }
    }
  }

  async push() {
    for (const [id, etag] of Object.entries(this.state.deletes)) {
      const response = await this.request("DELETE", `/api/conversations/${encodeURIComponent(id)}`, {
        headers: { "If-Match": etag },
      });
      // 412: it changed elsewhere since, and the next pull brings it back
      // (nothing is lost); 404: deleted already.
      delete this.state.deletes[id];
      if (response.status === 412) this.again = true;
      this.save();
    }
    const pending = [];
    for (const c of [...store.conversations]) {
      if (!c.next?.length || streaming(c)) continue;
      const { body, text, sum } = outgoing(c);
      const known = this.state.known[c.id];
      if (known?.sum === sum || this.refused[c.id] === sum) continue;
      await this.upload(c);
      pending.push({ id: c.id, body, sum, known, bytes: encoder.encode(text).length });
    }
    await state.limitsReady;
    for (const group of batches(pending, state.limits)) {
      if (group.length > 1 && (await this.sendMany(group))) continue;
      for (const item of group) await this.send(item);
    }
  }

  /** One conversation, as a PUT with the version last seen. */
  async send(item) {
    const headers = item.known ? { "If-Match": item.known.etag } : { "If-None-Match": "*" };
    const path = `/api/conversations/${encodeURIComponent(item.id)}`;
    const response = await this.request("PUT", path, { body: item.body, headers });
    const refused = response.ok ? null : await response.json().catch(() => ({}));
    await this.settle(item, response.status, response.headers.get("ETag"), refused?.error);
  }

  /**
   * Several conversations in one POST /api/conversations (a first sync sends
   * hundreds): each answered as its PUT would be. False when the server took
   * none of it (then each goes alone).
   */
  async sendMany(group) {
    const put = group.map(({ body, known }) =>
      known ? { conversation: body, if_match: known.etag } : { conversation: body, if_none_match: "*" },
    );
    const response = await this.request("POST", "/api/conversations", { body: { put } });
    if (!response.ok) return false;
    const { results } = await response.json();
    for (const [k, item] of group.entries()) {
      const result = results[k];
      await this.settle(item, result.status, result.etag ?? null, result.error);
    }
    return true;
  }

  /** What the server said of one conversation sent: kept, merged, or refused. */
  async settle(item, status, etag, error) {
    if (status === 200 || status === 201) {
      this.state.known[item.id] = { etag, sum: item.sum };
      this.save();
      return;
    }
    if (status === 412) {
      // Written elsewhere first: read it, merge, and send the merge.
      const path = `/api/conversations/${encodeURIComponent(item.id)}`;
      const current = await this.request("GET", path);
      if (current.ok)
        this.apply({ id: item.id, etag: current.headers.get("ETag"), conversation: await current.json() });
      else delete this.state.known[item.id];
      this.save();
      this.again = true;
      return;
    }
    // Refused for what it is (a limit, a field): kept here, not sent again
    // until it changes; the page says which limit.
    this.refused[item.id] = item.sum;
    this.problem = { what: "limit", limit: error?.limit || (status === 413 ? "max_conversation_bytes" : "invalid") };
  }

  /** The store's delete, also sent to the server. */
  deleted(id) {
    const known = this.state.known[id];
    if (known) {
      this.state.deletes[id] = known.etag;
      delete this.state.known[id];
      this.save();
    }
    this.soon();
  }

  soon() {
    this.later(QUIET_MS);
  }
}

/** Starts syncing for `me` (GET /api/me of a signed-in user). */
export function start(me, render) {
  // The line under the sidebar says where conversations are kept, in the
  // page's language (app.js calls state.relabel when it changes).
  let kept = { what: "syncing" };
  delete ui.kept.dataset.i18n;
  const sync = new Sync(me, { render, say: (what, limit) => say(what, limit) });
  imagesFrom((id) => sync.fetchImage(id));
  const relabelShare = shareControls(sync);
  const relabelLinks = dialogControls(sync);
  state.relabel = () => {
    ui.kept.textContent = keptText(state.lang, { ...kept, user: me.user });
    relabelShare();
    relabelLinks();
  };
  const say = (what, limit) => {
    kept = { what, limit };
    state.relabel();
    ui.kept.classList.toggle("problem-text", what !== "syncing" && what !== "synced");
  };
  // Every local change is sent a moment later; a delete also as a DELETE.
  const save = store.save.bind(store);
  store.save = () => {
    const saved = save();
    if (!sync.applying) sync.soon();
    return saved;
  };
  const remove = store.remove.bind(store);
  store.remove = (id) => {
    remove(id);
    sync.deleted(id);
  };
  addEventListener("focus", () => sync.run());
  addEventListener("online", () => sync.run());
  document.addEventListener("visibilitychange", () => document.visibilityState === "visible" && sync.run());
  say("syncing");
  sync.run();
  return sync;
}

// The sync's own words, here so the first load does not carry them.
const WORDS = {
  en: {
    syncing: () => "Syncing conversations with the server…",
    share: () => "Share a read-only link",
    myLinks: () => "My links",
    myData: () => "My data",
    knowledge: () => "Knowledge",
    shareDays: () => "Link lives",
    withImages: () => "Include images",
    days: (n) => (n === 1 ? "1 day" : `${n} days`),
    shared: (url) => `Read-only link (anyone who has it can read this copy): ${url}`,
    shareFailed: () => "No link was made: the conversation is not on the server yet. Try again in a moment.",
    shareRefused: (why) => `No link was made: ${why}`,
    synced: (user) => `Conversations are kept on the server for ${user}, and in this browser.`,
    failed: () => "The server cannot be reached: conversations are kept in this browser and sent when it is back.",
    limit: (_, limit) => `Some conversations stay in this browser only: the server refused them (${limit}).`,
    imageLimit: (_, limit) => `Some images stay in this browser only: the server refused them (${limit}).`,
  },
  zh: {
    syncing: () => "正在与服务器同步对话…",
    share: () => "分享只读链接",
    myLinks: () => "我的链接",
    myData: () => "我的数据",
    knowledge: () => "知识库",
    shareDays: () => "链接有效期",
    withImages: () => "包含图片",
    days: (n) => `${n} 天`,
    shared: (url) => `只读链接（拿到链接的人都能阅读此副本）：${url}`,
    shareFailed: () => "未能生成链接：对话尚未保存到服务器，请稍后再试。",
    shareRefused: (why) => `未能生成链接：${why}`,
    synced: (user) => `对话保存在服务器上（${user}），也保存在此浏览器中。`,
    failed: () => "无法连接服务器：对话保存在此浏览器中，恢复连接后会发送。",
    limit: (_, limit) => `部分对话只保存在此浏览器中：服务器拒绝了它们（${limit}）。`,
    imageLimit: (_, limit) => `部分图片只保存在此浏览器中：服务器拒绝了它们（${limit}）。`,
  },
};

const words = (lang) => WORDS[lang] || WORDS.en;

/**
 * "Share": a link to a read-only copy of the conversation on screen
 * (POST /api/shares, after the conversation is sent), living the days chosen.
 */
function shareControls(sync) {
  const row = el("div", "share-row");
  const days = el("select", "share-days");
  const label = el("label", "share-label");
  const go = el("button", "btn btn-small share");
  go.type = "button";
  for (const n of [1, 7, 30, 365]) {
    const option = el("option", "", "");
    option.value = String(n);
    days.append(option);
  }
  days.value = "30";
  label.append(days);
  // Images only when ticked: the link's copies of them are readable by anyone with it.
  const images = el("label", "share-images");
  const withImages = el("input");
  withImages.type = "checkbox";
  const imagesText = el("span");
  images.append(withImages, imagesText);
  row.append(go, label, images);
  const relabel = () => {
    const w = words(state.lang);
    go.textContent = w.share();
    imagesText.textContent = w.withImages();
    days.setAttribute("aria-label", w.shareDays());
    for (const option of days.options) option.textContent = w.days(Number(option.value));
  };
  go.addEventListener("click", async () => {
    const c = store.current;
    if (!c?.next?.length) return;
    const w = words(state.lang);
    await sync.run();
    let link = null;
    let why = null; // the server's reason, when it refused the link for what was asked (a limit)
    try {
      const body = { conversation: c.id, days: Number(days.value) };
      if (withImages.checked) body.images = true;
      const response = await sync.request("POST", "/api/shares", { body });
      if (response.ok) link = await response.json();
      else if (response.status !== 404) why = (await response.json()).error.message;
    } catch {}
    ui.notice.textContent = link
      ? w.shared(new URL(link.url, location.href).href)
      : why
        ? w.shareRefused(why)
        : w.shareFailed();
    ui.notice.classList.toggle("problem-text", !link);
  });
  ui.exportChat.after(row);
  return relabel;
}

/**
 * The buttons of the user's dialogs, each fetched on its first click: "My
 * links" (their share links and revoke, links.js), "My data" (everything
 * the server keeps of theirs, downloaded or deleted, my-data.js) and
 * "Knowledge" (their knowledge bases, and the one a conversation asks, knowledge.js).
 */
function dialogControls(sync) {
  const row = el("div", "share-row");
  const controls = [
    [onDemand("./links.js"), "openLinks", "myLinks"],
    [onDemand("./my-data.js"), "openMyData", "myData"],
    [onDemand("./knowledge.js"), "openKnowledge", "knowledge"],
  ].map(([module, opener, name]) => {
    const open = button("btn btn-small", "", () => module.call(opener)(sync));
    row.append(open);
    return [open, name];
  });
  (ui.exportChat.parentElement.querySelector(".share-row") || ui.exportChat).after(row);
  return () => {
    for (const [open, name] of controls) open.textContent = words(state.lang)[name]();
  };
}

export function keptText(lang, kept) {
  return words(lang)[kept.what](kept.user, kept.limit);
}
