// The chat page: conversations in the sidebar, a streamed answer per turn.
// Model and user text reach the DOM as text only, never as markup.
// Every listener on the page's own elements is added here, once.

import { saveToken, stopActive } from "./answer.js";
import {
  attach,
  dragImages,
  fillModels,
  loadLimits,
  loadModels,
  pasteImages,
  renderTray,
  resizeInput,
  send,
  sendOnEnter,
} from "./composer.js";
import { copyCode, followScroll, renderConversation, renderFooters } from "./conversation.js";
import { ui } from "./dom.js";
import { applyStrings, saveLang, strings } from "./i18n.js";
import { loadRenderer } from "./markdown.js";
import { onDemand } from "./on-demand.js";
import { loadPresets } from "./presets.js";
import { closeSidebar, newChat, renderSidebar, toggleSidebar } from "./sidebar.js";
import { MODEL_KEY, state, store, THINK_KEY, TOKEN_KEY } from "./state.js";
import { nodes } from "./tree.js";

// What the empty page does not need comes with its first use (on-demand.js).
const dictation = onDemand("./dictation.js");
const transfer = onDemand("./import-export.js");
const searching = onDemand("./search-dialog.js");
const openSearch = searching.call("openSearch");
const comparing = onDemand("./compare.js");

function applyLang() {
  const { lang } = state;
  state.t = strings(lang);
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  applyStrings(document, state.t);
  const other = lang === "zh" ? "English" : "中文";
  ui.lang.textContent = other;
  ui.lang.lang = lang === "zh" ? "en" : "zh";
  ui.lang.setAttribute("aria-label", other);
  fillModels();
  renderSidebar();
  renderConversation();
  renderTray();
  dictation.loaded?.renderMic();
  comparing.loaded?.renderBar();
  state.relabel?.();
  if (ui.searchDialog.open) searching.loaded?.runSearch();
}

// A signed-in user's conversations follow them (sync.js, fetched only then);
// anyone else's stay in this browser, as the sidebar says.
async function startSync() {
  const token = localStorage.getItem(TOKEN_KEY);
  const me = await fetch("/api/me", { headers: token ? { Authorization: `Bearer ${token}` } : {} })
    .then((r) => (r.ok ? r.json() : null))
    .catch(() => null);
  if (!me || me.via === "anonymous") return;
  const { start } = await import("./sync.js");
  state.sync = start(me, () => {
    renderSidebar();
    if (!state.active) renderConversation();
  });
  // Their 👍/👎 follow them too.
  const { pull } = await import("./feedback.js");
  await pull(me.user);
}

function pageKey(e) {
  if ((e.ctrlKey || e.metaKey) && !e.altKey && !e.shiftKey && e.key.toLowerCase() === "k") {
    e.preventDefault();
    openSearch();
    return;
  }
  if (e.key === "Escape" && state.active && !ui.tokenDialog.open && !ui.searchDialog.open) {
    e.preventDefault();
    stopActive();
  }
}

state.limitsReady = loadLimits();

ui.tokenForm.addEventListener("submit", saveToken);
ui.tokenCancel.addEventListener("click", () => ui.tokenDialog.close());

ui.composer.addEventListener("submit", (e) => {
  e.preventDefault();
  send(ui.input.value);
});
ui.input.addEventListener("keydown", sendOnEnter);
ui.input.addEventListener("input", resizeInput);
ui.stop.addEventListener("click", () => {
  stopActive();
  ui.input.focus();
});
document.addEventListener("keydown", pageKey);
ui.messages.addEventListener("scroll", followScroll);
ui.messages.addEventListener("click", copyCode);
ui.newChat.addEventListener("click", newChat);
ui.model.addEventListener("change", () => {
  localStorage.setItem(MODEL_KEY, ui.model.value);
  renderTray();
});
ui.reasoning.addEventListener("change", () => localStorage.setItem(THINK_KEY, ui.reasoning.checked ? "1" : "0"));
ui.lang.addEventListener("click", () => {
  state.lang = state.lang === "zh" ? "en" : "zh";
  saveLang(state.lang);
  applyLang();
});
ui.menu.addEventListener("click", toggleSidebar);
ui.backdrop.addEventListener("click", closeSidebar);

ui.attach.addEventListener("click", () => ui.attachFile.click());
ui.mic.addEventListener("click", dictation.call("toggleDictation"));
ui.compareToggle.addEventListener("click", comparing.call("toggleCompare"));
ui.attachFile.addEventListener("change", () => {
  attach(ui.attachFile.files);
  ui.attachFile.value = "";
});
ui.composer.addEventListener("paste", pasteImages);
document.addEventListener("dragover", dragImages);
document.addEventListener("drop", dragImages);

ui.searchInput.addEventListener("input", searching.call("runSearch"));
ui.searchInput.addEventListener("keydown", searching.call("searchKey"));
ui.searchDialog.addEventListener("close", () => ui.input.focus());
ui.searchOpen.addEventListener("click", openSearch);
ui.searchClose.addEventListener("click", () => ui.searchDialog.close());
ui.searchDialog.addEventListener("click", searching.call("closeOnBackdrop"));
if (/Mac|iPhone|iPad/.test(navigator.platform || "")) ui.searchKey.textContent = "⌘ K";

ui.exportMd.addEventListener("click", transfer.call("exportMarkdown"));
ui.exportJson.addEventListener("click", transfer.call("exportJson"));
ui.exportAll.addEventListener("click", transfer.call("exportAll"));
ui.import.addEventListener("click", () => ui.importFile.click());
ui.importFile.addEventListener("change", transfer.call("importFile"));

// --- start

ui.reasoning.checked = localStorage.getItem(THINK_KEY) !== "0";
// A conversation left streaming by a reload was cut off.
for (const c of store.conversations) {
  for (const m of nodes(c)) if (m.status === "streaming") m.status = "interrupted";
}
if (!store.current && store.conversations.length) store.select(store.sorted()[0].id);
applyLang();
loadModels().then(renderFooters).then(loadPresets);
startSync();
ui.input.focus();
// The answer renderer and its libraries are not part of the first load: they
// come once the page has painted (or at once, for a conversation on screen).
requestAnimationFrame(() => setTimeout(loadRenderer, 0));
