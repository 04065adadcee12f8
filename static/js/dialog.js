// The sidebar's dialogs (My links, My data, Knowledge): a <dialog> named by
// its heading, with a status line a screen reader announces. Fetched with
// the first of them (each is loaded on demand).

import { el } from "./dom.js";

/** A dialog `name`-title labels, its status line, and `say(text, problem)` to set it. */
export function statusDialog(name, className) {
  const box = el("dialog", className);
  box.setAttribute("aria-labelledby", `${name}-title`);
  const title = el("h2");
  title.id = `${name}-title`;
  const status = el("p", "links-status");
  status.setAttribute("role", "status");
  const say = (text, problem = false) => {
    status.textContent = text;
    status.classList.toggle("problem-text", problem);
  };
  return { box, title, status, say };
}
