// "My data": what the server keeps of a signed-in user, downloaded as one
// JSON file (GET /api/my-data, which "Import chats" reads back) or deleted
// for good (DELETE /api/my-data: conversations, their images, share links,
// votes and ratings; this browser's ratings are forgotten with them).
// A delete leaves tombstones, so this browser and the user's other devices
// delete their copies as they sync. Loaded on the first click of the
// sidebar's "My data" (sync.js).

import { statusDialog } from "./dialog.js";
import { button, el } from "./dom.js";
import { forgetRatings } from "./feedback.js";
import { download } from "./import-export.js";
import { state } from "./state.js";
import { fileName } from "./transfer.js";

const WORDS = {
  en: {
    title: "My data on the server",
    about:
      "The server keeps your conversations, their images and your share links. " +
      "The download is one JSON file that “Import chats” reads back (images are not in it).",
    download: "Download my data",
    erase: "Delete everything…",
    confirm:
      "This deletes every conversation, image and share link of yours on the server, for good. " +
      "This browser and your other devices delete their copies when they next sync.",
    eraseNow: "Delete everything",
    cancel: "Cancel",
    close: "Close",
    reading: "Reading your data…",
    downloaded: "Downloaded.",
    erasing: "Deleting…",
    erased: "Deleted: the server keeps nothing of yours now.",
    failed: "The server cannot be reached: nothing was changed. Try again in a moment.",
  },
  zh: {
    title: "我在服务器上的数据",
    about: "服务器保存着你的对话、其中的图片和你的分享链接。下载的是一个 JSON 文件，“导入对话”可以读回（不含图片）。",
    download: "下载我的数据",
    erase: "全部删除…",
    confirm: "这会永久删除你在服务器上的所有对话、图片和分享链接。此浏览器和你的其他设备会在下次同步时删除它们的副本。",
    eraseNow: "全部删除",
    cancel: "取消",
    close: "关闭",
    reading: "正在读取你的数据…",
    downloaded: "已下载。",
    erasing: "正在删除…",
    erased: "已删除：服务器上不再保存你的任何数据。",
    failed: "无法连接服务器：没有任何改动。请稍后再试。",
  },
};

const words = () => WORDS[state.lang] || WORDS.en;

let dialog = null;

function make(sync) {
  const { box, title, status, say } = statusDialog("my-data", "my-data-dialog");
  const about = el("p");
  const confirm = el("p", "problem-text");
  const actions = el("div", "dialog-actions");
  const sure = el("div", "dialog-actions");
  const get = button("btn btn-small", "", async () => {
    say(words().reading);
    let text = null;
    try {
      const response = await sync.request("GET", "/api/my-data");
      if (response.ok) text = await response.text();
    } catch {}
    if (text === null) return say(words().failed, true);
    download(fileName("my-data", "json"), "application/json", text);
    say(words().downloaded);
  });
  const ask = (asking) => {
    confirm.hidden = sure.hidden = !asking;
    actions.hidden = asking;
  };
  const erase = button("btn btn-small", "", () => ask(true));
  const cancel = button("btn btn-ghost", "", () => ask(false));
  const eraseNow = button("btn btn-small btn-danger", "", async () => {
    say(words().erasing);
    let done = false;
    try {
      const response = await sync.request("DELETE", "/api/my-data", { headers: { "If-Match": "*" } });
      done = response.ok;
    } catch {}
    ask(false);
    if (!done) return say(words().failed, true);
    say(words().erased);
    forgetRatings(); // the server's copies went with the rest
    sync.run(); // the tombstones delete this browser's copies
  });
  const close = button("btn btn-ghost", "", () => box.close());
  actions.append(get, erase, close);
  sure.append(cancel, eraseNow);
  box.append(title, about, status, confirm, actions, sure);
  document.body.append(box);
  ask(false);
  return () => {
    const w = words();
    title.textContent = w.title;
    about.textContent = w.about;
    get.textContent = w.download;
    erase.textContent = w.erase;
    confirm.textContent = w.confirm;
    eraseNow.textContent = w.eraseNow;
    cancel.textContent = w.cancel;
    close.textContent = w.close;
    say("");
    return box;
  };
}

/** Opens the dialog. */
export function openMyData(sync) {
  dialog ||= make(sync);
  const box = dialog();
  if (!box.open) box.showModal();
}
