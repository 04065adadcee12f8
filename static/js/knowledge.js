// "Knowledge": a signed-in user's knowledge bases (/api/knowledge). Make a
// base, add documents to it and watch each one's ingestion, and choose the
// base a conversation asks: its answers then cite passages ([1]), kept in
// the answer's stats.sources and shown by sources.js. Loaded on the first
// click of the sidebar's "Knowledge" (sync.js).

import { statusDialog } from "./dialog.js";
import { DOCUMENT_EXTENSIONS, dataUrl, documentType } from "./documents.js";
import { button, el, ui } from "./dom.js";
import { state, store } from "./state.js";
import { filePart } from "./store.js";

const WORDS = {
  en: {
    title: "Knowledge",
    about:
      "Ask your own documents: make a base, add PDF, Word, Excel, CSV, HTML, Markdown or text files, " +
      "then use it in this conversation. Answers cite the passages they used.",
    name: "New base's name",
    create: "Make a base",
    add: "Add a document…",
    use: "Use in this conversation",
    using: "In use",
    remove: "Delete",
    close: "Close",
    none: "No knowledge base yet.",
    shared: "shared",
    asking: (name) => `Answers read the knowledge base “${name}”.`,
    stop: "Stop using it",
    failed: "The server cannot be reached. Try again in a moment.",
    states: {
      pending: "waiting",
      converting: "reading",
      embedding: (d) => `indexing ${d.embedded}/${d.chunks}`,
      ready: (d) => `ready, ${d.chunks} passages`,
      failed: (d) => `failed: ${d.error}`,
    },
  },
  zh: {
    title: "知识库",
    about:
      "用你自己的文档提问：建一个知识库，加入 PDF、Word、Excel、CSV、HTML、Markdown 或文本文件，然后在此对话中使用它。回答会引用用到的段落。",
    name: "新知识库的名称",
    create: "新建知识库",
    add: "加入文档…",
    use: "在此对话中使用",
    using: "使用中",
    remove: "删除",
    close: "关闭",
    none: "还没有知识库。",
    shared: "共享",
    asking: (name) => `回答会参考知识库“${name}”。`,
    stop: "停止使用",
    failed: "无法连接服务器，请稍后再试。",
    states: {
      pending: "等待中",
      converting: "读取中",
      embedding: (d) => `索引中 ${d.embedded}/${d.chunks}`,
      ready: (d) => `就绪，${d.chunks} 段`,
      failed: (d) => `失败：${d.error}`,
    },
  },
};

const words = () => WORDS[state.lang] || WORDS.en;

// The base each conversation asks (by conversation id; "" for the next new one).
const chosen = new Map();
let dialog = null;
let note = null;

function choiceOf(conversation) {
  if (!conversation) return chosen.get("");
  if (!chosen.has(conversation.id) && chosen.has("")) {
    chosen.set(conversation.id, chosen.get(""));
    chosen.delete("");
  }
  return chosen.get(conversation.id);
}

function renderNote() {
  const base = choiceOf(store.current);
  if (!note) {
    note = el("p", "preset-note knowledge-note");
    note.id = "knowledge-note";
    ui.composer.before(note);
  }
  note.hidden = !base;
  if (!base) return;
  const stop = button("btn btn-small", words().stop, () => {
    chosen.delete(store.current?.id ?? "");
    renderNote();
    dialog?.();
  });
  note.replaceChildren(el("span", null, `${words().asking(base.name)} `), stop);
}

// --- the dialog -------------------------------------------------------------------

function make(sync) {
  const { box, title, status, say } = statusDialog("knowledge", "my-data-dialog knowledge-dialog");
  const about = el("p");
  const list = el("ul", "link-list knowledge-list");
  const form = el("form", "dialog-actions");
  const label = el("label", "field");
  const caption = el("span");
  const input = el("input");
  input.id = "knowledge-name";
  input.maxLength = 100;
  input.required = true;
  label.append(caption, input);
  const create = el("button", "btn btn-small");
  create.type = "submit";
  form.append(label, create);
  const actions = el("div", "dialog-actions");
  const close = button("btn btn-ghost", "", () => box.close());
  actions.append(close);
  box.append(title, about, status, list, form, actions);
  document.body.append(box);
  let timer = 0;

  const call = async (method, path, body) => {
    try {
      const response = await sync.request(method, path, body === undefined ? {} : { body });
      const data = response.status === 204 ? {} : await response.json();
      if (!response.ok) say(data.error?.message || words().failed, true);
      return response.ok ? data : null;
    } catch {
      say(words().failed, true);
      return null;
    }
  };

  const upload = async (base, file) => {
    const url = await dataUrl(file, documentType(file) || file.type);
    say("");
    if (await call("POST", `/api/knowledge/${base.id}/documents`, filePart(file.name, url))) refresh();
  };

  const documentRow = (base, doc) => {
    const row = el("li", "knowledge-doc");
    const st = words().states[doc.state];
    const text = typeof st === "function" ? st(doc) : st;
    const progress = el("span", "link-when", `${doc.name}: ${text}`);
    row.append(progress);
    if (base.mine) {
      const del = button("btn btn-small", words().remove, async () => {
        if (await call("DELETE", `/api/knowledge/${base.id}/documents/${doc.id}`)) refresh();
      });
      del.setAttribute("aria-label", `${words().remove} ${doc.name}`);
      row.append(del);
    }
    return row;
  };

  const baseRow = async (base) => {
    const row = el("li", "knowledge-base");
    const head = el("div", "knowledge-head");
    head.append(el("strong", null, base.name));
    if (base.shared) head.append(el("span", "tag", words().shared));
    const current = choiceOf(store.current)?.id === base.id;
    const use = button("btn btn-small", current ? words().using : words().use, () => {
      chosen.set(store.current?.id ?? "", { id: base.id, name: base.name });
      renderNote();
      refresh();
    });
    use.setAttribute("aria-pressed", String(current));
    head.append(use);
    const docs = (await call("GET", `/api/knowledge/${base.id}/documents`))?.documents || [];
    const rows = el("ul", "knowledge-docs");
    rows.append(...docs.map((doc) => documentRow(base, doc)));
    row.append(head, rows);
    if (base.mine) {
      const file = el("input");
      file.type = "file";
      file.accept = DOCUMENT_EXTENSIONS.join(",");
      file.hidden = true;
      file.addEventListener("change", () => {
        if (file.files[0]) upload(base, file.files[0]);
      });
      const add = button("btn btn-small", words().add, () => file.click());
      add.setAttribute("aria-label", `${words().add} ${base.name}`);
      const del = button("btn btn-small btn-danger", words().remove, async () => {
        if (await call("DELETE", `/api/knowledge/${base.id}`)) {
          for (const [key, value] of chosen) if (value.id === base.id) chosen.delete(key);
          renderNote();
          refresh();
        }
      });
      del.setAttribute("aria-label", `${words().remove} ${base.name}`);
      row.append(file, add, del);
    }
    return [row, docs.some((doc) => doc.state !== "ready" && doc.state !== "failed")];
  };

  // Reads the bases again; while a document is being ingested, every second
  // (each look also lets the server take up an ingestion that stopped).
  const refresh = async () => {
    clearTimeout(timer);
    const bases = (await call("GET", "/api/knowledge"))?.bases;
    if (!bases) return;
    const rows = await Promise.all(bases.map(baseRow));
    list.replaceChildren(...(rows.length ? rows.map(([row]) => row) : [el("li", "links-empty", words().none)]));
    if (box.open && rows.some(([, busy]) => busy)) timer = setTimeout(refresh, 1000);
  };

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const name = input.value.trim();
    if (!name) return;
    if (await call("POST", "/api/knowledge", { name })) {
      input.value = "";
      refresh();
    }
  });
  box.addEventListener("close", () => clearTimeout(timer));

  return () => {
    const w = words();
    title.textContent = w.title;
    about.textContent = w.about;
    caption.textContent = w.name;
    create.textContent = w.create;
    close.textContent = w.close;
    say("");
    refresh();
    return box;
  };
}

/** Opens the dialog; from then on a conversation may ask a base. */
export function openKnowledge(sync) {
  if (!dialog) {
    dialog = make(sync);
    state.knowledgeFor = (conversation) => choiceOf(conversation)?.id;
    // Another conversation on screen: the note says which base it asks.
    new MutationObserver(renderNote).observe(ui.messages, { childList: true });
  }
  const box = dialog();
  if (!box.open) box.showModal();
}
