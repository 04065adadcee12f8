// The sidebar: conversations to open, rename or delete.

import { stopActive } from "./answer.js";
import { renderConversation } from "./conversation.js";
import { button, el, ui } from "./dom.js";
import { state, store } from "./state.js";
import { dropFilesOf } from "./store.js";

export function renderSidebar() {
  const { t } = state;
  const items = store.sorted().map((c) => {
    const li = el("li", "conv");
    const title = c.title || t.untitled;
    const open = button("conv-open", title, () => {
      store.select(c.id);
      closeSidebar();
      renderSidebar();
      renderConversation();
      ui.input.focus();
    });
    if (c.id === store.currentId) {
      open.setAttribute("aria-current", "true");
      li.classList.add("current");
    }
    const rename = button("btn-icon conv-action", "✎", () => startRename(li, c), `${t.rename}: ${title}`);
    rename.title = t.rename;
    const remove = button(
      "btn-icon conv-action",
      "×",
      () => {
        if (state.active && state.active.conversation === c) stopActive();
        dropFilesOf(c);
        store.remove(c.id);
        renderSidebar();
        renderConversation();
      },
      `${t.delete}: ${title}`,
    );
    remove.title = t.delete;
    li.append(open, rename, remove);
    return li;
  });
  ui.convList.replaceChildren(...items);
  const empty = !store.current?.next.length;
  ui.exportMd.disabled = empty;
  ui.exportJson.disabled = empty;
  ui.exportAll.disabled = !store.conversations.some((c) => c.next.length);
}

function startRename(li, conversation) {
  const input = el("input", "conv-rename");
  input.value = conversation.title || "";
  input.setAttribute("aria-label", state.t.renameTo);
  input.maxLength = 100;
  let done = false;
  const finish = (keep) => {
    if (done) return;
    done = true;
    if (keep && input.value.trim()) store.rename(conversation.id, input.value);
    renderSidebar();
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      finish(true);
    } else if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      finish(false);
    }
  });
  input.addEventListener("blur", () => finish(true));
  li.replaceChildren(input);
  input.focus();
  input.select();
}

export function newChat() {
  const current = store.current;
  if (!current || current.next.length) store.create();
  closeSidebar();
  renderSidebar();
  renderConversation();
  ui.input.focus();
}

export function openSidebar() {
  ui.shell.classList.add("nav-open");
  ui.backdrop.hidden = false;
  ui.menu.setAttribute("aria-expanded", "true");
}

export function closeSidebar() {
  ui.shell.classList.remove("nav-open");
  ui.backdrop.hidden = true;
  ui.menu.setAttribute("aria-expanded", "false");
}

export const toggleSidebar = () => (ui.shell.classList.contains("nav-open") ? closeSidebar() : openSidebar());
