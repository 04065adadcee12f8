// A small Markdown renderer for answers, building DOM nodes: model text only
// becomes text nodes, never markup. Links are http(s) only; images are never
// loaded (they become links), so an answer cannot make the browser fetch a URL.
// An unclosed code fence runs to the end, for a half-streamed answer.

const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)/;
const HEADING = /^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;
const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
const TABLE_SEP = /^ *\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$/;

import { languageLabel, paint } from "./highlight.js";

let doc = globalThis.document;

/** Absolute http(s) URL, or null (javascript:, data:, relative…). */
export function safeUrl(raw) {
  try {
    const url = new URL(raw);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

function el(tag, className, text) {
  const node = doc.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Markdown source as a DocumentFragment; `labels.copy` names the copy button. */
export function renderMarkdown(source, labels = {}) {
  doc = globalThis.document;
  const frag = doc.createDocumentFragment();
  blocks(source.replace(/\r\n?/g, "\n").split("\n"), frag, labels);
  return frag;
}

function startsBlock(line, next) {
  return (
    FENCE.test(line) ||
    HEADING.test(line) ||
    HR.test(line) ||
    QUOTE.test(line) ||
    ITEM.test(line) ||
    (line.includes("|") && next !== undefined && TABLE_SEP.test(next) && next.includes("-"))
  );
}

function blocks(lines, parent, labels) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    let m = FENCE.exec(line);
    if (m) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length) {
        const close = lines[i].trim();
        if (close.startsWith(fence) && close.replaceAll(fence[0], "") === "") break;
        body.push(lines[i]);
        i++;
      }
      i++;
      parent.append(codeBlock(body.join("\n"), m[2], labels));
      continue;
    }
    m = HEADING.exec(line);
    if (m) {
      const h = el(`h${Math.min(m[1].length + 2, 6)}`);
      inline(m[2], h);
      parent.append(h);
      i++;
      continue;
    }
    if (HR.test(line)) {
      parent.append(el("hr"));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && lines[i].trim() && QUOTE.test(lines[i])) {
        inner.push(lines[i].replace(QUOTE, ""));
        i++;
      }
      const quote = el("blockquote");
      blocks(inner, quote, labels);
      parent.append(quote);
      continue;
    }
    if (ITEM.test(line)) {
      i = list(lines, i, parent, labels);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1])) {
      i = table(lines, i, parent);
      continue;
    }
    const para = [line];
    i++;
    while (i < lines.length && lines[i].trim() && !startsBlock(lines[i], lines[i + 1])) {
      para.push(lines[i]);
      i++;
    }
    const p = el("p");
    inline(para.map((s) => s.trim()).join("\n"), p);
    parent.append(p);
  }
}

function codeBlock(text, lang, labels) {
  const wrap = el("div", "code");
  const head = el("div", "code-head");
  head.append(el("span", "code-lang", languageLabel(lang)));
  const copy = el("button", "copy", labels.copy || "Copy");
  copy.type = "button";
  head.append(copy);
  const pre = el("pre");
  pre.tabIndex = 0; // a block wider than the screen scrolls from the keyboard too
  const code = el("code");
  paint(code, text, lang);
  if (lang) code.dataset.lang = lang;
  pre.append(code);
  wrap.append(head, pre);
  return wrap;
}

function list(lines, i, parent, labels) {
  const first = ITEM.exec(lines[i]);
  const base = first[1].length;
  const ordered = /\d/.test(first[2]);
  const listEl = el(ordered ? "ol" : "ul");
  if (ordered && Number.parseInt(first[2], 10) !== 1) listEl.start = Number.parseInt(first[2], 10);
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length > base + 1 || m[1].length < base || /\d/.test(m[2]) !== ordered) break;
    const indent = base + m[2].length + 1;
    const content = [m[3] || ""];
    let loose = false;
    i++;
    while (i < lines.length) {
      const line = lines[i];
      if (!line.trim()) {
        let j = i + 1;
        while (j < lines.length && !lines[j].trim()) j++;
        if (j < lines.length && lines[j].search(/\S/) >= indent) {
          loose = true;
          content.push(...lines.slice(i, j));
          i = j;
          continue;
        }
        break;
      }
      const lead = line.search(/\S/);
      if (lead >= base + 2) content.push(line.slice(Math.min(lead, indent)));
      else if (ITEM.test(line) || startsBlock(line, lines[i + 1])) break;
      else content.push(line.trim());
      i++;
    }
    const li = el("li");
    blocks(content, li, labels);
    if (!loose) {
      for (const p of [...li.children]) if (p.tagName === "P") p.replaceWith(...p.childNodes);
    }
    listEl.append(li);
    if (i < lines.length && !lines[i].trim()) break;
  }
  parent.append(listEl);
  return i;
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  const out = [];
  let cur = "";
  let inCode = false;
  for (let k = 0; k < s.length; k++) {
    const c = s[k];
    if (c === "\\" && s[k + 1] === "|") {
      cur += "|";
      k++;
    } else if (c === "`") {
      inCode = !inCode;
      cur += c;
    } else if (c === "|" && !inCode) {
      out.push(cur.trim());
      cur = "";
    } else cur += c;
  }
  out.push(cur.trim());
  return out;
}

function table(lines, i, parent) {
  const head = cells(lines[i]);
  const align = cells(lines[i + 1]).map((c) => (c.endsWith(":") ? (c.startsWith(":") ? "center" : "right") : ""));
  const tableEl = el("table");
  const row = (values, tag) => {
    const tr = el("tr");
    head.forEach((_, k) => {
      const cell = el(tag, align[k] ? `al-${align[k]}` : null);
      inline(values[k] || "", cell);
      tr.append(cell);
    });
    return tr;
  };
  const thead = el("thead");
  thead.append(row(head, "th"));
  const tbody = el("tbody");
  i += 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes("|")) {
    tbody.append(row(cells(lines[i]), "td"));
    i++;
  }
  tableEl.append(thead, tbody);
  const wrap = el("div", "table-wrap");
  wrap.append(tableEl);
  parent.append(wrap);
  return i;
}

// Inline syntax, tried at the cursor (sticky regexes).
const ESCAPE = /\\([!-/:-@[-`{-~])/y;
const CODE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/y;
const IMAGE = /!\[([^\]\n]*)\]\(\s*<?([^\s<>()]*)>?(?:\s+"[^"\n]*")?\s*\)/y;
const LINK =
  /\[((?:[^[\]\n]|\[[^\]\n]*\])+)\]\(\s*<?([^\s<>()]*(?:\([^\s<>()]*\)[^\s<>()]*)*)>?(?:\s+"[^"\n]*")?\s*\)/y;
const AUTOLINK = /<(https?:\/\/[^\s<>]+)>/y;
const BARE_URL = /https?:\/\/[^\s<>]*[^\s<>.,;:!?'")\]*_~]/y;
const STRONG = /(\*\*|__)(?=\S)([\s\S]*?\S)\1/y;
const EM = /([*_])(?=[^\s*_])([\s\S]*?[^\s*_])\1(?![*_])/y;
const STRIKE = /~~(?=\S)([\s\S]*?\S)~~/y;

function at(re, text, pos) {
  re.lastIndex = pos;
  return re.exec(text);
}

function link(href, parent, label) {
  const a = el("a");
  a.href = href;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  if (typeof label === "string") a.textContent = label;
  else inline(label.text, a);
  parent.append(a);
}

function inline(text, parent) {
  let plain = "";
  const flush = () => {
    if (!plain) return;
    const parts = plain.split("\n");
    parts.forEach((part, k) => {
      if (k) parent.append(el("br"));
      if (part) parent.append(doc.createTextNode(part));
    });
    plain = "";
  };
  let pos = 0;
  while (pos < text.length) {
    const c = text[pos];
    const prev = pos ? text[pos - 1] : " ";
    let m;
    if (c === "\\" && (m = at(ESCAPE, text, pos))) {
      plain += m[1];
    } else if (c === "`" && (m = at(CODE, text, pos))) {
      flush();
      let code = m[2].replace(/\n/g, " ");
      if (/^ .* $/.test(code) && code.trim()) code = code.slice(1, -1);
      parent.append(el("code", null, code));
    } else if (c === "!" && (m = at(IMAGE, text, pos))) {
      // No remote images: a link instead.
      flush();
      const href = safeUrl(m[2]);
      const label = `🖼 ${m[1] || "image"}`;
      if (href) link(href, parent, label);
      else plain += label;
    } else if (c === "[" && (m = at(LINK, text, pos))) {
      flush();
      const href = safeUrl(m[2]);
      if (href) link(href, parent, { text: m[1] });
      else inline(m[1], parent);
    } else if (c === "<" && (m = at(AUTOLINK, text, pos))) {
      flush();
      const href = safeUrl(m[1]);
      if (href) link(href, parent, m[1]);
      else plain += m[0];
    } else if (c === "h" && !/\w/.test(prev) && (m = at(BARE_URL, text, pos))) {
      flush();
      const href = safeUrl(m[0]);
      if (href) link(href, parent, m[0]);
      else plain += m[0];
    } else if ((c === "*" || c === "_") && (m = at(STRONG, text, pos)) && (c === "*" || !/\w/.test(prev))) {
      flush();
      const strong = el("strong");
      inline(m[2], strong);
      parent.append(strong);
    } else if ((c === "*" || c === "_") && (m = at(EM, text, pos)) && (c === "*" || !/\w/.test(prev))) {
      flush();
      const em = el("em");
      inline(m[2], em);
      parent.append(em);
    } else if (c === "~" && (m = at(STRIKE, text, pos))) {
      flush();
      const del = el("del");
      inline(m[1], del);
      parent.append(del);
    } else {
      plain += c;
      pos++;
      continue;
    }
    pos += m[0].length;
  }
  flush();
}

/**
 * Renders a growing (streamed) source into `host`: closed blocks once, only the
 * open tail again. A cut is made at a whole column-0 line outside a fence that
 * follows a blank line and is no list item, or opens a fence (without "|"):
 * nothing later can join earlier blocks, so the result equals a whole render.
 * An open code block at the end is repainted in place. A source that does not
 * extend the last one starts over.
 */
export class MarkdownStream {
  constructor(host, labels = {}) {
    this.host = host;
    this.labels = labels;
    this.reset();
  }

  reset() {
    this.source = "";
    this.committed = 0; // source[0, committed) is final
    this.scanned = 0; // lines before this offset are classified
    this.fence = null; // the open fence at `scanned`, if any…
    this.fenceStart = -1; // …and where its opening line starts
    this.blank = false; // the last classified line was blank
    this.tail = [];
    this.code = null; // {element, lang} when the tail is one open code block
    this.host.replaceChildren();
  }

  update(raw) {
    const source = raw.replace(/\r\n?/g, "\n");
    if (source === this.source) return;
    if (!source.startsWith(this.source)) this.reset();
    this.source = source;
    let cut = this.committed;
    while (this.scanned < source.length) {
      const end = source.indexOf("\n", this.scanned);
      if (end < 0) break; // the last line is not whole yet
      const start = this.scanned;
      const line = source.slice(start, end);
      this.scanned = end + 1;
      if (this.fence) {
        const close = line.trim();
        if (close.startsWith(this.fence) && close.replaceAll(this.fence[0], "") === "") this.fence = null;
        continue;
      }
      if (!line.trim()) {
        this.blank = true;
        continue;
      }
      const m = FENCE.exec(line);
      const column0 = /^\S/.test(line);
      if (column0 && ((this.blank && !ITEM.test(line)) || (m && !line.includes("|")))) cut = start;
      this.blank = false;
      if (m) {
        this.fence = m[1];
        this.fenceStart = start;
      }
    }
    if (cut > this.committed) {
      for (const node of this.tail) node.remove();
      this.tail = [];
      this.code = null;
      this.host.append(renderMarkdown(source.slice(this.committed, cut), this.labels));
      this.committed = cut;
    }
    const tail = source.slice(this.committed);
    if (this.growCode(tail)) return;
    for (const node of this.tail) node.remove();
    const rendered = renderMarkdown(tail, this.labels);
    this.tail = [...rendered.childNodes];
    this.host.append(rendered);
    const openCode = this.fence && this.fenceStart === this.committed && tail.includes("\n");
    const element = openCode && this.tail.length === 1 ? this.tail[0].querySelector("pre > code") : null;
    this.code = element ? { element, lang: FENCE.exec(tail)[2] } : null;
  }

  /** Paints the tail onto its open code block; false when it is not one now. */
  growCode(tail) {
    if (!this.code || !this.fence || this.fenceStart !== this.committed) return false;
    // A possible closing fence is left to the renderer.
    const last = tail.slice(tail.lastIndexOf("\n") + 1).trim();
    if (last && last.replaceAll(this.fence[0], "") === "") return false;
    paint(this.code.element, tail.slice(tail.indexOf("\n") + 1), this.code.lang);
    return true;
  }
}
