// An answer's knowledge sources (its stats.sources, kept with the conversation,
// so synced, exported and imported with it): each [n] of the answer becomes a
// link to its passage, listed under the answer. Loaded by conversation.js with
// the first answer on screen that has sources.

import { el, ui } from "./dom.js";
import { loadRenderer } from "./markdown.js";
import { state } from "./state.js";

const WORDS = {
  en: { sources: "Sources", passage: (n) => `passage ${n + 1}` },
  zh: { sources: "来源", passage: (n) => `第 ${n + 1} 段` },
};

const CITE = /\[(\d{1,2})\]/g;

/** Each `[n]` of `root`'s text (not in code or a link) that names a source, as a link to its passage. */
export function linkCitations(root, sources, prefix) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) =>
      node.parentElement?.closest("pre, code, a") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  const texts = [];
  while (walker.nextNode()) if (/\[\d{1,2}\]/.test(walker.currentNode.data)) texts.push(walker.currentNode);
  for (const node of texts) {
    const parts = [];
    let last = 0;
    for (const match of node.data.matchAll(CITE)) {
      const n = Number(match[1]);
      if (n < 1 || n > sources.length) continue;
      parts.push(node.data.slice(last, match.index));
      const link = el("a", "cite", match[0]);
      link.href = `#${prefix}${n}`;
      parts.push(link);
      last = match.index + match[0].length;
    }
    if (!parts.length) continue;
    parts.push(node.data.slice(last));
    node.replaceWith(...parts);
  }
}

let cited = 0;
let listening = false;

/** Shows an answer's sources under it, and its [n] as links to them. */
export async function cite(view) {
  // Until the Markdown renderer is here the answer is plain text, drawn anew
  // when it arrives (markdown.js): the links are made in what stays.
  await loadRenderer().catch(() => {});
  const sources = view.message.stats?.sources;
  if (!sources?.length || !view.footer) return;
  if (!listening) {
    listening = true;
    ui.messages.addEventListener("click", openSource);
  }
  const words = WORDS[state.lang] || WORDS.en;
  view.citePrefix ||= `source-${++cited}-`;
  const prefix = view.citePrefix;
  linkCitations(view.answer, sources, prefix);
  const list = el("div", "sources");
  list.append(el("h3", null, words.sources));
  for (const source of sources) {
    const item = el("details", "source");
    item.id = `${prefix}${source.n}`;
    const summary = el("summary", null, `[${source.n}] ${source.name} · ${words.passage(source.chunk)}`);
    item.append(summary, el("p", "source-text", source.text));
    list.append(item);
  }
  view.footer.querySelector(".sources")?.remove();
  view.footer.append(list);
}

function openSource(e) {
  const link = e.target.closest?.("a.cite");
  if (!link) return;
  const target = document.getElementById(link.getAttribute("href").slice(1));
  if (!target) return;
  e.preventDefault();
  target.open = true;
  target.scrollIntoView({ block: "nearest" });
  target.querySelector("summary").focus();
}
