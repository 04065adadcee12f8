// ui.newChat is #new-chat, looked up when first used: importing has no side effects.

const id = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
export const ui = new Proxy({}, { get: (found, name) => (found[name] ??= document.getElementById(id(name))) });

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export function button(className, text, onClick, label) {
  const b = el("button", className, text);
  b.type = "button";
  b.addEventListener("click", onClick);
  if (label) b.setAttribute("aria-label", label);
  return b;
}

/** The page's stylesheet at `path` (from static/js/), added once: the styles of code loaded on demand. */
export function stylesheet(path) {
  const href = new URL(path, import.meta.url).href;
  if ([...document.styleSheets].some((sheet) => sheet.href === href)) return;
  const link = el("link");
  link.rel = "stylesheet";
  link.href = href;
  document.head.append(link);
}
