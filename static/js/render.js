// The answer renderer, loaded after the first paint (markdown.js): Markdown by
// the CommonMark spec and GitHub's extensions through markdown-it (pinned from
// npm, static/vendor/), built into DOM nodes from its tokens. markdown-it runs
// with raw HTML off, so HTML in an answer is text; the tokens become elements
// from a fixed list, model text only ever text nodes or attribute values, and
// links only http(s) or mailto. Images are never loaded: each is a link to it.
// Math ($…$, $$…$$, \(…\), \[…\]) and Mermaid blocks are marked here and
// drawn by math.js and diagram.js once their block is closed (enhance()).

import MarkdownIt from "../vendor/markdown-it.js";
import {
  detect,
  language,
  languageLabel,
  loadLanguage,
  mayLoad,
  paint as paintCode,
  paintGrowing,
  warm as warmHighlight,
} from "./highlight.js";

/** Paints an open code block as it grows (markdown.js). */
export function paint(codeEl, text, lang) {
  paintGrowing(codeEl, text, language(lang) ? lang : "");
}

const md = new MarkdownIt("default", { html: false, linkify: true, typographer: false });
// "www.example.com" too (filtered below: never a bare domain).
md.linkify.set({ fuzzyLink: true });
// Every destination parses as a link; the DOM builder keeps only http(s) and
// mailto ones as links, the others as their text (so "[x](javascript:…)" shows "x").
md.validateLink = () => true;

// --- math ------------------------------------------------------------------------

const isSpace = (c) => c === undefined || /\s/.test(c);

function mathInline(state, silent) {
  const { src, pos, posMax: max } = state;
  const c = src[pos];
  let open;
  let close;
  let display;
  if (c === "\\") {
    const next = src[pos + 1];
    if (next !== "(" && next !== "[") return false;
    open = `\\${next}`;
    close = next === "(" ? "\\)" : "\\]";
    display = next === "[";
  } else if (c === "$") {
    display = src[pos + 1] === "$";
    open = close = display ? "$$" : "$";
  } else return false;
  const from = pos + open.length;
  let end = from;
  for (;;) {
    end = src.indexOf(close, end);
    if (end < 0 || end + close.length > max) return false;
    if (open === "$") {
      // Pandoc's rule, so that "$5 and $10" stay money: the opening $ is not
      // followed by a space, the closing one not preceded by one nor followed by a digit.
      if (end === from || isSpace(src[from])) return false;
      if (src[end - 1] === "\\" || isSpace(src[end - 1]) || /\d/.test(src[end + 1] || "")) {
        end++;
        continue;
      }
    }
    break;
  }
  const tex = src.slice(from, end);
  // "\[\\\]" is three escapes, not math: math has more than backslashes.
  if (!/[^\s\\]/.test(tex)) return false;
  if (!silent) {
    const token = state.push("math_inline", "", 0);
    token.content = tex;
    token.markup = open;
    token.info = close;
    token.meta = { display };
  }
  state.pos = end + close.length;
  return true;
}

// A display block: a line opening with $$ or \[ up to the line that ends with
// $$ or \]. Never across a blank line (there the text stays text), so a closed
// paragraph can never be reopened by a stray $$ later in a streamed answer.
function mathBlock(state, startLine, endLine, silent) {
  const line = (n) => state.src.slice(state.bMarks[n] + state.tShift[n], state.eMarks[n]);
  if (state.sCount[startLine] - state.blkIndent >= 4) return false;
  const first = line(startLine);
  let open;
  if (first.startsWith("$$")) open = "$$";
  else if (first.startsWith("\\[")) open = "\\[";
  else return false;
  const close = open === "$$" ? "$$" : "\\]";
  const rest = first.slice(2);
  let last = startLine;
  const parts = [];
  const trimmed = rest.trimEnd();
  if (trimmed.length >= 2 && trimmed.endsWith(close) && trimmed.slice(0, -2).trim()) {
    if (trimmed.slice(0, -2).includes(close)) return false; // $$a$$ b$$: inline
    parts.push(trimmed.slice(0, -2));
  } else {
    if (rest.includes(close)) return false; // "$$a$$ and more": a paragraph's
    parts.push(rest);
    for (;;) {
      last++;
      if (last >= endLine || state.isEmpty(last) || state.sCount[last] < state.blkIndent) return false;
      const text = line(last).trimEnd();
      if (text.endsWith(close)) {
        const body = text.slice(0, -2);
        if (body.includes(close)) return false;
        parts.push(body);
        break;
      }
      if (text.includes(close)) return false;
      parts.push(text);
    }
  }
  const tex = parts.join("\n");
  if (!tex.trim()) return false;
  if (silent) return true;
  const token = state.push("math_block", "div", 0);
  token.block = true;
  token.content = tex;
  token.markup = open;
  token.info = close;
  token.map = [startLine, last + 1];
  state.line = last + 1;
  return true;
}

md.inline.ruler.before("escape", "math_inline", mathInline);

// GFM: a run of three or more ~ is text, never strikethrough.
md.inline.ruler.before("strikethrough", "tilde_run", (state, silent) => {
  let end = state.pos;
  while (state.src[end] === "~") end++;
  if (end - state.pos < 3) return false;
  if (!silent) state.push("text", "", 0).content = state.src.slice(state.pos, end);
  state.pos = end;
  return true;
});
md.block.ruler.before("fence", "math_block", mathBlock, { alt: ["paragraph", "reference", "blockquote", "list"] });

// --- GFM task lists: "- [ ] a" / "- [x] b" ------------------------------------------

const TASK = /^\[([ xX])\](?=[ \t]|$)/;

md.core.ruler.push("task_lists", (state) => {
  const tokens = state.tokens;
  for (let i = 2; i < tokens.length; i++) {
    const inline = tokens[i];
    if (inline.type !== "inline" || tokens[i - 1].type !== "paragraph_open") continue;
    if (tokens[i - 2].type !== "list_item_open") continue;
    const m = TASK.exec(inline.content);
    const head = inline.children[0];
    if (!m || !head || head.type !== "text" || !head.content.startsWith(m[0])) continue;
    head.content = head.content.slice(3);
    tokens[i - 2].meta = { ...tokens[i - 2].meta, task: m[1] !== " " };
  }
});

// --- links ---------------------------------------------------------------------------

/** An absolute http(s) or mailto: URL, or null (javascript:, data:, relative…). */
export function safeUrl(raw) {
  try {
    const url = new URL(raw);
    return url.protocol === "http:" || url.protocol === "https:" || url.protocol === "mailto:" ? url.href : null;
  } catch {
    return null;
  }
}

/** The href as markdown-it normalised it, when it is a safe absolute URL. */
function href(raw) {
  return /^(?:https?:\/\/|mailto:)/i.test(raw) && safeUrl(raw) ? raw : null;
}

// Bare text becomes a link the way GitHub does it: with a scheme, after
// "www.", or an e-mail address; never a bare domain ("main.rs", "setup.sh").
const LINKIFIED = /^(?:https?:\/\/|www\.|mailto:)|^[^\s@]+@[^\s@]+$/i;

// --- tokens → DOM ------------------------------------------------------------------

let doc = globalThis.document;

function el(tag, className, text) {
  const node = doc.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

const BLOCK_TAGS = new Set(["p", "blockquote", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td"]);

function blockElement(token) {
  const { tag } = token;
  if (/^h[1-6]$/.test(tag)) return el(`h${Math.min(Number(tag[1]) + 2, 6)}`);
  if (tag === "table") {
    const wrap = el("div", "table-wrap");
    const table = el("table");
    wrap.append(table);
    return { outer: wrap, inner: table };
  }
  if (!BLOCK_TAGS.has(tag)) return el("div");
  const node = el(tag);
  if (tag === "ol") {
    const start = Number.parseInt(String(token.attrGet("start") ?? 1), 10);
    if (start !== 1 && Number.isFinite(start)) node.setAttribute("start", String(start));
  }
  if (tag === "th" || tag === "td") {
    const align = /text-align:(left|center|right)/.exec(token.attrGet("style") || "");
    if (align) node.className = `al-${align[1]}`;
  }
  if (tag === "li" && token.meta && "task" in token.meta) {
    node.className = "task";
    const box = el("span", token.meta.task ? "task-box done" : "task-box", token.meta.task ? "☑" : "☐");
    box.setAttribute("role", "img");
    box.setAttribute("aria-label", token.meta.task ? "done" : "to do");
    node.append(box);
  }
  return node;
}

function build(tokens, host, labels) {
  const stack = [host];
  const top = () => stack.at(-1);
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i];
    if (token.nesting === 1) {
      if (token.hidden) {
        stack.push(top()); // a tight list's paragraph: its text goes in the item
        continue;
      }
      const made = blockElement(token);
      const { outer, inner } = made.outer ? made : { outer: made, inner: made };
      // An item's task box comes before its text.
      top().append(outer);
      stack.push(inner);
    } else if (token.nesting === -1) {
      stack.pop();
    } else if (token.type === "inline") {
      inline(token.children, top());
    } else if (token.type === "fence" || token.type === "code_block") {
      const info = token.type === "fence" ? md.utils.unescapeAll(token.info).trim().split(/\s+/)[0] : "";
      top().append(codeBlock(token.content.replace(/\n$/, ""), info, labels));
    } else if (token.type === "hr") {
      top().append(el("hr"));
    } else if (token.type === "math_block") {
      top().append(math(token, true));
    } else if (token.content) {
      // html_block cannot happen with html: false; anything else unknown stays text.
      top().append(el("p", null, token.content));
    }
  }
}

let sawMath = false;

function math(token, block) {
  sawMath = true;
  const display = block || token.meta?.display;
  const node = el(block ? "div" : "span", display ? "math math-display" : "math");
  node.dataset.tex = token.content;
  node.textContent = block
    ? `${token.markup}\n${token.content.trim()}\n${token.info}`
    : token.markup + token.content + token.info;
  return node;
}

function inline(children, host) {
  const stack = [host];
  const top = () => stack.at(-1);
  for (const token of children || []) {
    switch (token.type) {
      case "text":
        if (token.content) top().append(doc.createTextNode(token.content));
        break;
      case "softbreak":
      case "hardbreak":
        top().append(el("br"));
        break;
      case "code_inline":
        top().append(el("code", null, token.content));
        break;
      case "em_open":
      case "strong_open":
      case "s_open": {
        const node = el(token.type === "em_open" ? "em" : token.type === "strong_open" ? "strong" : "del");
        top().append(node);
        stack.push(node);
        break;
      }
      case "link_open": {
        const url = href(token.attrGet("href") || "");
        const auto = token.markup === "linkify";
        const text = auto ? (children[children.indexOf(token) + 1]?.content ?? "") : "";
        if (url && (!auto || LINKIFIED.test(text))) {
          const a = el("a");
          a.setAttribute("href", url);
          const title = token.attrGet("title");
          if (title) a.title = title;
          a.rel = "noopener noreferrer";
          a.target = "_blank";
          top().append(a);
          stack.push(a);
        } else stack.push(top()); // not a link we follow: its text stays
        break;
      }
      case "em_close":
      case "strong_close":
      case "s_close":
      case "link_close":
        stack.pop();
        break;
      case "image": {
        // No remote images: a link to it instead, named by its description.
        const url = href(token.attrGet("src") || "");
        const label = `🖼 ${plainText(token.children) || "image"}`;
        if (url) {
          const a = el("a", null, label);
          a.setAttribute("href", url);
          a.rel = "noopener noreferrer";
          a.target = "_blank";
          top().append(a);
        } else top().append(doc.createTextNode(label));
        break;
      }
      case "math_inline":
        top().append(math(token, false));
        break;
      default:
        // text_special, html_inline (raw HTML is off, so never) and the like: their text.
        if (token.content) top().append(doc.createTextNode(token.content));
    }
  }
}

/** An image's description as text, the way the spec writes it into alt. */
function plainText(children) {
  let out = "";
  for (const token of children || []) {
    if (token.type === "image") out += plainText(token.children);
    else if (token.type === "softbreak" || token.type === "hardbreak") out += "\n";
    else if (token.type === "text" || token.type === "code_inline" || token.type === "text_special")
      out += token.content;
    else if (token.type === "math_inline") out += token.markup + token.content + token.info;
  }
  return out;
}

function codeBlock(text, info, labels) {
  const lang = info.toLowerCase();
  const diagram = lang === "mermaid";
  const wrap = el("div", diagram ? "code diagram" : "code");
  const head = el("div", "code-head");
  const name = el("span", "code-lang", languageLabel(info || "text"));
  head.append(name);
  const copy = el("button", "copy", labels.copy || "Copy");
  copy.type = "button";
  head.append(copy);
  const pre = el("pre");
  pre.tabIndex = 0; // a block wider than the screen scrolls from the keyboard too
  const code = el("code");
  if (info) code.dataset.lang = info;
  if (diagram) code.textContent = text;
  else paintCode(code, text, language(info) ? info : "");
  pre.append(code);
  wrap.append(head, pre);
  return wrap;
}

// --- the renderer's API (markdown.js) ---------------------------------------------

/**
 * Markdown source as a DocumentFragment. `env.references` carries link
 * reference definitions between the pieces of one answer (markdown-it adds
 * those of this piece to it).
 */
export function renderMarkdown(source, labels = {}, env = {}) {
  doc = globalThis.document;
  const frag = doc.createDocumentFragment();
  sawMath = false;
  build(md.parse(source.replace(/\r\n?/g, "\n"), env), frag, labels);
  // KaTeX and its stylesheet come while the math is still being written.
  if (sawMath) import("./math.js").then((m) => m.load());
  return frag;
}

/** The text of `source` when it is one fenced code block and nothing else, or null. */
export function openFenceText(source) {
  const parsed = md.parse(source, {});
  if (parsed.length !== 1 || parsed[0].type !== "fence") return null;
  return parsed[0].content.replace(/\n$/, "");
}

/**
 * Runs the renderer once over a small answer, then compiles the common
 * grammars, each in a task of its own: the first real answer then pays no
 * first-use costs (the engine's lazy compilation, highlight.js's grammars).
 */
export async function warm() {
  const idle = () => new Promise((resolve) => (globalThis.requestIdleCallback || setTimeout)(resolve));
  for (const sample of [
    "# a\n\nb *c* **d** `e`",
    "- [f](https://example.com)\n- g",
    "| h | i |\n|---|---|\n| 1 | 2 |",
    "> j",
  ]) {
    await idle();
    renderMarkdown(sample);
  }
  await warmHighlight();
}

const detected = new Map(); // code text → language, for blocks rendered again

/**
 * What a closed block still needs once it is on the page: a language that is
 * not loaded yet, one detected for a fence without any, math typeset,
 * diagrams drawn. Each runs later, in tasks of its own.
 */
export function enhance(nodes, labels = {}) {
  for (const node of nodes) {
    if (node.nodeType !== 1) continue;
    const blocks = node.matches(".code") ? [node] : [...node.querySelectorAll(".code")];
    for (const block of blocks) {
      const code = block.querySelector("pre > code");
      if (block.classList.contains("diagram")) {
        import("./diagram.js").then((m) => m.draw(block, labels));
        continue;
      }
      const info = code.dataset.lang || "";
      if (info && mayLoad(info)) {
        loadLanguage(info).then((known) => {
          if (!known || !code.isConnected) return;
          paintCode(code, code.textContent, info);
          block.querySelector(".code-lang").textContent = languageLabel(info);
        });
      } else if (!info) {
        const text = code.textContent;
        const known = detected.get(text);
        const apply = (lang) => {
          detected.set(text, lang);
          if (!lang || !code.isConnected) return;
          paintCode(code, text, lang);
          code.dataset.detected = lang;
          block.querySelector(".code-lang").textContent = languageLabel(lang);
        };
        if (known !== undefined) apply(known);
        else detect(text).then(apply);
      }
    }
    if (node.matches(".math") || node.querySelector(".math")) import("./math.js").then((m) => m.typeset(node));
  }
}
