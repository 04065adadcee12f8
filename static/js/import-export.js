// Export and import in the sidebar; the formats are transfer.js's.

import { renderConversation } from "./conversation.js";
import { el, ui } from "./dom.js";
import { renderSidebar } from "./sidebar.js";
import { state, store } from "./state.js";
import { fileName, IMPORT_TEXT, ImportError, MAX_IMPORT_BYTES, parseImport, toJson, toMarkdown } from "./transfer.js";

export function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function notify(text, problem = false) {
  ui.notice.textContent = text;
  ui.notice.classList.toggle("problem-text", problem);
}

export function exportMarkdown() {
  const c = store.current;
  if (!c) return;
  download(
    fileName(c.title, "md"),
    "text/markdown",
    toMarkdown(c, { user: state.t.you, assistant: state.t.assistant }),
  );
}

export function exportJson() {
  const c = store.current;
  if (c) download(fileName(c.title, "json"), "application/json", toJson([c]));
}

export function exportAll() {
  const list = store.sorted().filter((c) => c.next.length);
  download(fileName("conversations", "json"), "application/json", toJson(list));
}

export async function importFile() {
  const file = ui.importFile.files[0];
  ui.importFile.value = "";
  if (!file) return;
  const T = IMPORT_TEXT[state.lang] || IMPORT_TEXT.en;
  try {
    if (file.size > MAX_IMPORT_BYTES) throw new ImportError("size");
    const list = parseImport(await file.text(), MAX_IMPORT_BYTES, state.limits?.max_json_depth);
    if (!store.addAll(list)) throw new ImportError("storage");
    store.select(store.sorted()[0].id);
    renderSidebar();
    renderConversation();
    notify(T.imported(list.length));
  } catch (error) {
    const why = T.refused[error instanceof ImportError ? error.code : "json"] || T.refused.json;
    notify(typeof why === "function" ? why(error.path, error.limit) : why, true);
  }
}
