// Code blocks' colours, by highlight.js (static/vendor/highlight/, built from
// the pinned npm package by scripts/vendor.mjs): the common languages come
// with the renderer, every other one loads when a fence names it, and a
// fence without a language is detected once its block is closed. Output is
// text nodes in tok-* spans (colours by class: the CSP allows no inline style),
// built from highlight.js's token tree, never from its HTML.

import hljs from "../vendor/highlight/common.js";

// The labels shown in a block's head where highlight.js's own name is not the one people use.
const LABELS = {
  html: "HTML",
  xhtml: "HTML",
  svg: "SVG",
  xml: "XML",
  sh: "Bash",
  shell: "Shell",
  console: "Shell",
  plaintext: "text",
  text: "text",
  txt: "text",
  mermaid: "Mermaid",
};

// highlight.js scopes → the page's token kinds (app.css colours each).
const KIND = {
  keyword: "kw",
  doctag: "kw",
  section: "kw",
  "selector-tag": "tag",
  "selector-id": "tag",
  "selector-class": "tag",
  "selector-pseudo": "tag",
  "selector-attr": "attr",
  string: "str",
  regexp: "str",
  char: "str",
  comment: "com",
  quote: "com",
  number: "num",
  literal: "lit",
  symbol: "lit",
  bullet: "lit",
  type: "type",
  built_in: "type",
  "title.class": "type",
  "title.class.inherited": "type",
  "title.function": "fn",
  "title.function.invoke": "fn",
  title: "fn",
  meta: "attr",
  "meta keyword": "kw",
  attr: "attr",
  attribute: "attr",
  property: "attr",
  params: "",
  tag: "tag",
  name: "tag",
  variable: "var",
  "template-variable": "var",
  "variable.language": "lit",
  "variable.constant": "lit",
  subst: "",
  addition: "str",
  deletion: "kw",
  link: "str",
};

// Languages tried, in this order, for a fence without one (a short list: each try costs a pass).
const DETECT = [
  "python",
  "javascript",
  "typescript",
  "bash",
  "json",
  "xml",
  "css",
  "sql",
  "go",
  "rust",
  "java",
  "cpp",
  "c",
  "csharp",
  "php",
  "ruby",
  "yaml",
  "kotlin",
  "swift",
];

/** The highlight.js language a fence names ("py", "c++"…), or null. */
export function language(name) {
  const key = String(name || "").toLowerCase();
  if (!key) return null;
  const def = hljs.getLanguage(key);
  return def ? key : null;
}

export function languageLabel(name) {
  const key = String(name || "").toLowerCase();
  if (Object.hasOwn(LABELS, key)) return LABELS[key];
  const def = key && hljs.getLanguage(key);
  return def ? def.name.split(",")[0] : name || "text";
}

let index = null;
const loading = new Map();

/**
 * Registers the language a fence names when it is not one of the common
 * ones; resolves to whether it is known now.
 */
export function loadLanguage(name) {
  const key = String(name || "").toLowerCase();
  if (!key || hljs.getLanguage(key)) return Promise.resolve(Boolean(key));
  let pending = loading.get(key);
  if (!pending) {
    pending = (async () => {
      try {
        index ??= (await import("../vendor/highlight/index.js")).default;
        const file = Object.hasOwn(index, key) ? index[key] : null;
        if (!file) return false;
        const def = (await import(`../vendor/highlight/${file}.js`)).default;
        if (!hljs.getLanguage(file)) hljs.registerLanguage(file, def);
        return Boolean(hljs.getLanguage(key));
      } catch {
        return false;
      }
    })();
    loading.set(key, pending);
  }
  return pending;
}

/** True when `name` may be a language not loaded yet (worth a loadLanguage). */
export function mayLoad(name) {
  const key = String(name || "").toLowerCase();
  return Boolean(key) && !hljs.getLanguage(key) && /^[\w+#.-]{1,32}$/.test(key) && !loading.has(key);
}

function kindOf(scope) {
  if (!scope) return "";
  if (Object.hasOwn(KIND, scope)) return KIND[scope];
  const head = scope.split(".")[0];
  return Object.hasOwn(KIND, head) ? KIND[head] : "";
}

/** `code` as [kind, text] pieces (kind "" is plain); joined, they are `code`. */
export function highlight(code, lang) {
  return tokens(code, lang).pieces;
}

/**
 * The pieces, and `safe`: the offset after the last line break outside any
 * token (a string, a comment…), where highlighting can start afresh.
 */
function tokens(code, lang) {
  const plain = { pieces: [["", code]], safe: 0 };
  const id = language(lang);
  if (!id || id === "plaintext" || id === "text") return plain;
  let root;
  try {
    root = hljs.highlight(code, { language: id, ignoreIllegals: true })._emitter.rootNode;
  } catch {
    return plain;
  }
  let safe = 0;
  let offset = 0;
  for (const child of root.children || []) {
    if (typeof child === "string") {
      const k = child.lastIndexOf("\n");
      if (k >= 0) safe = offset + k + 1;
      offset += child.length;
    } else offset += text(child).length;
  }
  const out = [];
  const push = (kind, text) => {
    if (!text) return;
    const last = out.at(-1);
    if (last && last[0] === kind) last[1] += text;
    else out.push([kind, text]);
  };
  const walk = (node, inherited) => {
    const own = kindOf(node.scope);
    // JSON's true is a keyword inside a literal: a literal.
    const kind = inherited === "lit" && own === "kw" ? "lit" : own || inherited;
    for (const child of node.children || []) {
      if (typeof child === "string") push(kind, child);
      else walk(child, kind);
    }
  };
  walk(root, "");
  // A tree that lost text would paint something else than the code: never.
  return out.map((p) => p[1]).join("") === code ? { pieces: out, safe } : plain;
}

function text(node) {
  let out = "";
  for (const child of node.children || []) out += typeof child === "string" ? child : text(child);
  return out;
}

/** `pieces` cut at `offset`: [before, after]. */
function split(pieces, offset) {
  const before = [];
  const after = [];
  let at = 0;
  for (const [kind, t] of pieces) {
    if (at + t.length <= offset) before.push([kind, t]);
    else if (at >= offset) after.push([kind, t]);
    else {
      before.push([kind, t.slice(0, offset - at)]);
      after.push([kind, t.slice(offset - at)]);
    }
    at += t.length;
  }
  return [before, after];
}

const growing = new WeakMap(); // code element → {lang, code, done: pieces of code[0, length)}

/**
 * Paints a code block that is still being written: only the text after the
 * last point where highlighting could start afresh is highlighted again, so
 * a long block costs the same per frame at its end as at its start. Once the
 * block is closed it is painted whole (paint), which is what counts.
 */
export function paintGrowing(codeEl, code, lang) {
  let g = growing.get(codeEl);
  if (!g || g.lang !== lang || !code.startsWith(g.code)) g = { lang, code: "", done: [] };
  const rest = tokens(code.slice(g.code.length), lang);
  const [settled] = split(rest.pieces, rest.safe);
  paintPieces(codeEl, [...g.done, ...rest.pieces]);
  growing.set(codeEl, { lang, code: code.slice(0, g.code.length + rest.safe), done: [...g.done, ...settled] });
}

const yieldTask = () => new Promise((resolve) => setTimeout(resolve, 0));

// The longest grammar to compile takes ~35 ms (Java's, measured in Chromium on
// this project's machine: bench/page_render.py's trace), less than the 50 ms
// an idle period lasts when the page has nothing else to do.
const COMPILE_MS = 40;

/** Resolves in an idle period of at least `ms`: none comes while an answer
 * streams (frames are 16 ms apart), so work waiting here never delays one. */
function idlePeriod(ms) {
  if (!globalThis.requestIdleCallback) return yieldTask();
  return new Promise((resolve) => {
    const wait = (deadline) => (deadline.timeRemaining() >= ms ? resolve() : requestIdleCallback(wait));
    requestIdleCallback(wait);
  });
}

/**
 * Compiles the grammars answers use most, one per idle period: highlight.js
 * compiles a language the first time it is used, which would otherwise land
 * in the first frame of the first answer with code.
 */
export async function warm(names = DETECT) {
  for (const id of names) {
    await idlePeriod(COMPILE_MS);
    try {
      hljs.highlight("x", { language: id, ignoreIllegals: true });
    } catch {
      // not one we have
    }
  }
}

/**
 * The language of a fence without one, or null: each candidate is tried on
 * the first lines in a task of its own, so detecting never blocks the page.
 */
export async function detect(code) {
  const sample = code.length > 2000 ? code.slice(0, code.indexOf("\n", 2000) + 1 || 2000) : code;
  if (sample.trim().length < 12) return null;
  let best = null;
  let bestScore = 0;
  for (const id of DETECT) {
    await yieldTask();
    let result;
    try {
      result = hljs.highlight(sample, { language: id, ignoreIllegals: false });
    } catch {
      continue;
    }
    if (result.illegal) continue;
    if (result.relevance > bestScore) {
      best = id;
      bestScore = result.relevance;
    }
  }
  return bestScore >= 3 ? best : null;
}

const painted = new WeakMap(); // code element → {keys, nodes} of its lines

/** The pieces split into lines, each ending in its own plain "\n" piece. */
function lines(pieces) {
  const out = [[]];
  for (const [kind, text] of pieces) {
    const parts = text.split("\n");
    parts.forEach((part, k) => {
      if (part) out.at(-1).push([kind, part]);
      if (k < parts.length - 1) {
        out.at(-1).push(["", "\n"]);
        out.push([]);
      }
    });
  }
  if (!out.at(-1).length && out.length > 1) out.pop();
  return out;
}

/**
 * Fills `codeEl` with `code` highlighted, one block <span class="ln"> per line
 * so only changed lines are laid out. Painting again (a growing block) keeps
 * the unchanged lines and rebuilds from the first changed one.
 */
export function paint(codeEl, code, lang) {
  growing.delete(codeEl);
  paintPieces(codeEl, highlight(code, lang));
}

function paintPieces(codeEl, pieces) {
  const doc = codeEl.ownerDocument;
  const rows = lines(pieces);
  const keys = rows.map((row) => row.map(([kind, text]) => `${kind}\u0000${text}`).join("\u0001"));
  const before = painted.get(codeEl);
  let same = 0;
  if (before && codeEl.childNodes.length === before.nodes.length) {
    const limit = Math.min(keys.length, before.keys.length);
    while (same < limit && keys[same] === before.keys[same]) same++;
    // The line that was last has only gained its line break (the next line began): keep it.
    const k = before.keys.length - 1;
    if (same === k && keys[k] === `${before.keys[k]}${before.keys[k] ? "\u0001" : ""}\u0000\n`) {
      before.nodes[k].append(doc.createTextNode("\n"));
      same++;
    }
    for (const node of before.nodes.slice(same)) node.remove();
  } else codeEl.replaceChildren();
  const kept = before && same ? before.nodes.slice(0, same) : [];
  const added = rows.slice(same).map((row) => {
    const line = doc.createElement("span");
    line.className = "ln";
    line.append(
      ...row.map(([kind, text]) => {
        if (!kind) return doc.createTextNode(text);
        const span = doc.createElement("span");
        span.className = `tok-${kind}`;
        span.textContent = text;
        return span;
      }),
    );
    return line;
  });
  codeEl.append(...added);
  painted.set(codeEl, { keys, nodes: [...kept, ...added] });
}
