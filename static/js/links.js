// "My links": the signed-in user's share links (GET /api/shares), each with
// when it expires, and a Revoke that deletes the link's copy for good
// (DELETE /api/shares/<id>). Loaded on the first click of the sidebar's
// "My links" (sync.js): nobody pays for it on the first load.

import { statusDialog } from "./dialog.js";
import { button, el } from "./dom.js";
import { state } from "./state.js";

const WORDS = {
  en: {
    title: "My share links",
    close: "Close",
    loading: "Reading your links…",
    none: "You have no share links.",
    count: (n) => (n === 1 ? "1 link" : `${n} links`),
    untitled: "Untitled",
    expires: (date) => `Expires ${date}`,
    expired: (date) => `Expired ${date}`,
    revoke: "Revoke",
    revokeLabel: (title) => `Revoke the link to ${title}`,
    revoked: (title) => `Revoked: the link to ${title} no longer opens.`,
    failed: "The server cannot be reached: nothing was changed. Try again in a moment.",
  },
  zh: {
    title: "我的分享链接",
    close: "关闭",
    loading: "正在读取你的链接…",
    none: "你还没有分享链接。",
    count: (n) => `${n} 个链接`,
    untitled: "未命名",
    expires: (date) => `${date} 到期`,
    expired: (date) => `已于 ${date} 过期`,
    revoke: "撤销",
    revokeLabel: (title) => `撤销“${title}”的链接`,
    revoked: (title) => `已撤销：“${title}”的链接再也打不开了。`,
    failed: "无法连接服务器：没有任何改动。请稍后再试。",
  },
};

const words = () => WORDS[state.lang] || WORDS.en;
const day = (ms) => new Date(ms).toLocaleDateString(state.lang === "zh" ? "zh-CN" : "en", { dateStyle: "medium" });

let dialog = null;

function make() {
  const { box, title, status } = statusDialog("links", "links-dialog");
  const list = el("ul", "links-list");
  const actions = el("div", "dialog-actions");
  const close = button("btn btn-ghost", "", () => box.close());
  actions.append(close);
  box.append(title, status, list, actions);
  document.body.append(box);
  return { box, title, status, list, close };
}

/** Opens the dialog and lists the links, newest first. */
export async function openLinks(sync) {
  dialog ||= make();
  const w = words();
  dialog.title.textContent = w.title;
  dialog.close.textContent = w.close;
  dialog.status.textContent = w.loading;
  dialog.status.classList.remove("problem-text");
  dialog.list.replaceChildren();
  if (!dialog.box.open) dialog.box.showModal();
  let links = null;
  try {
    const response = await sync.request("GET", "/api/shares");
    if (response.ok) links = (await response.json()).shares;
  } catch {}
  if (!links) return problem(w.failed);
  dialog.list.replaceChildren(...links.map((link) => row(sync, link)));
  dialog.status.textContent = links.length ? w.count(links.length) : w.none;
}

function problem(text) {
  dialog.status.textContent = text;
  dialog.status.classList.add("problem-text");
}

function row(sync, link) {
  const w = words();
  const name = link.title || w.untitled;
  const item = el("li", "link-item");
  const open = el("a", "link-title", name);
  open.href = new URL(`/s/${link.id}`, location.href).href;
  open.target = "_blank";
  open.rel = "noopener noreferrer";
  const when = el("span", "link-when", link.expired ? w.expired(day(link.expires)) : w.expires(day(link.expires)));
  if (link.expired) when.classList.add("problem-text");
  const revoke = button(
    "btn btn-small",
    w.revoke,
    async () => {
      revoke.disabled = true;
      let done = false;
      try {
        const response = await sync.request("DELETE", `/api/shares/${encodeURIComponent(link.id)}`);
        // 404: revoked already (another device): gone either way.
        done = response.ok || response.status === 404;
      } catch {}
      if (!done) {
        revoke.disabled = false;
        return problem(w.failed);
      }
      item.remove();
      dialog.status.classList.remove("problem-text");
      dialog.status.textContent = w.revoked(name);
    },
    w.revokeLabel(name),
  );
  item.append(open, when, revoke);
  return item;
}
