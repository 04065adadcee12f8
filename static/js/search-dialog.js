// The search dialog (Ctrl+K) around search.js.

import { stopActive } from "./answer.js";
import { renderConversation, viewOf } from "./conversation.js";
import { el, ui } from "./dom.js";
import { search } from "./search.js";
import { closeSidebar, renderSidebar } from "./sidebar.js";
import { state, store } from "./state.js";
import { reveal } from "./tree.js";

// What the dialog says of its results (the rest of its words are i18n.js's, in index.html).
const TEXT = {
  en: {
    noResults: "No conversation matches.",
    results: (n) => (n === 1 ? "1 result" : `${n} results`),
  },
  zh: {
    noResults: "没有匹配的对话。",
    results: (n) => `${n} 条结果`,
  },
};

export function openSearch() {
  if (ui.tokenDialog.open) return;
  closeSidebar();
  if (!ui.searchDialog.open) ui.searchDialog.showModal();
  ui.searchInput.select();
  runSearch();
}

export function runSearch() {
  const { t } = state;
  const T = TEXT[state.lang] || TEXT.en;
  const query = ui.searchInput.value;
  const found = search(store.conversations, query);
  state.found = found;
  state.chosen = found.length ? 0 : -1;
  ui.searchResults.replaceChildren(
    ...found.map((r, k) => {
      const li = el("li", "result");
      li.id = `result-${k}`;
      li.setAttribute("role", "option");
      const title = el("span", "result-title");
      if (r.node) title.textContent = r.conversation.title || t.untitled;
      else marked(title, r.text, r.marks);
      li.append(title);
      if (r.node) {
        const text = el("span", "result-text");
        marked(text, r.text, r.marks);
        li.append(text);
      }
      li.addEventListener("click", () => openResult(k));
      return li;
    }),
  );
  ui.searchInput.setAttribute("aria-expanded", String(found.length > 0));
  ui.searchStatus.textContent = query.trim() ? (found.length ? T.results(found.length) : T.noResults) : "";
  markChosen();
}

/** `text` into `node`, `marks` ranges in <mark>: text nodes only. */
function marked(node, text, marks) {
  let at = 0;
  for (const [start, end] of marks) {
    if (start > at) node.append(text.slice(at, start));
    node.append(el("mark", null, text.slice(start, end)));
    at = end;
  }
  if (at < text.length) node.append(text.slice(at));
}

function markChosen() {
  const { chosen } = state;
  ui.searchResults.querySelectorAll("[role=option]").forEach((li, k) => {
    li.setAttribute("aria-selected", String(k === chosen));
    if (k === chosen) li.scrollIntoView({ block: "nearest" });
  });
  if (chosen >= 0) ui.searchInput.setAttribute("aria-activedescendant", `result-${chosen}`);
  else ui.searchInput.removeAttribute("aria-activedescendant");
}

function openResult(k) {
  const r = state.found[k];
  if (!r) return;
  if (state.active && state.active.conversation !== r.conversation) stopActive();
  if (r.node) reveal(r.conversation, r.node);
  store.select(r.conversation.id);
  ui.searchDialog.close();
  renderSidebar();
  renderConversation();
  const article = r.node ? viewOf(r.node)?.root : null;
  if (article) {
    state.stick = false;
    article.scrollIntoView({ block: "center" });
    article.classList.add("found");
  }
  ui.input.focus();
}

export function searchKey(e) {
  const { found } = state;
  if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    e.preventDefault();
    if (!found.length) return;
    state.chosen = (state.chosen + (e.key === "ArrowDown" ? 1 : -1) + found.length) % found.length;
    markChosen();
  } else if (e.key === "Enter") {
    e.preventDefault();
    openResult(state.chosen);
  } else if (e.key === "Escape") {
    // Escape closes the search, not just clears the field.
    e.preventDefault();
    ui.searchDialog.close();
  }
}

export function closeOnBackdrop(e) {
  if (e.target === ui.searchDialog) ui.searchDialog.close(); // the backdrop
}
