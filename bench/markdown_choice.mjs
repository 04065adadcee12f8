// markdown-it or marked for the page's answers (issue 20): each parser's own
// HTML for the CommonMark 0.31.2 examples and the GFM extension examples,
// compared with the spec's through the conformance test's normaliser
// (tests/js/spec-examples.mjs), raw HTML off or escaped (the examples that
// depend on raw HTML are left out, as in the test); the time to render a
// 4,000-token answer; and the size each adds to the page, minified and gzipped.
//
//   node bench/markdown_choice.mjs [--runs 30]
//
// The versions are the pinned devDependencies. The page uses markdown-it
// (static/js/render.js); this is the measurement behind that choice.

import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { Window } from "happy-dom";
import MarkdownIt from "markdown-it";
import { Marked } from "marked";
import { COMMONMARK, canonical, GFM_EXTENSIONS, isRawHtml, parse } from "../tests/js/spec-examples.mjs";

const runs = Number(process.argv[process.argv.indexOf("--runs") + 1]) || 30;
const window = new Window({ url: "https://edgechat.example/" });
const document = window.document;

const escapeHtml = (s) => s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");

const parsers = {
  "markdown-it": {
    version: (await import("markdown-it/package.json", { with: { type: "json" } })).default.version,
    commonmark: new MarkdownIt("commonmark", { html: false }),
    gfm: new MarkdownIt("default", { html: false, linkify: true }),
    render(md, text) {
      return md.render(text);
    },
    entry: 'export { default } from "markdown-it";',
  },
  marked: {
    version: (await import("marked/package.json", { with: { type: "json" } })).default.version,
    // Raw HTML as text, the way the page needs it.
    commonmark: new Marked({ gfm: false, renderer: { html: ({ text }) => escapeHtml(text) } }),
    gfm: new Marked({ gfm: true, renderer: { html: ({ text }) => escapeHtml(text) } }),
    render(md, text) {
      return md.parse(text, { async: false });
    },
    entry: 'export { Marked } from "marked";',
  },
};

function conformance(parser, mode, examples) {
  let passed = 0;
  let compared = 0;
  const missed = [];
  for (const example of examples) {
    if (isRawHtml(MarkdownIt, example)) continue;
    compared++;
    let html;
    try {
      html = parser.render(parser[mode], example.markdown);
    } catch {
      html = "(threw)";
    }
    const want = canonical(parse(document, example.html));
    const host = parse(document, html);
    // markdown-it aligns table cells with a style attribute, the spec with align: the same look.
    for (const cell of host.querySelectorAll("[style]")) {
      const align = /text-align:\s*(\w+)/.exec(cell.getAttribute("style"));
      cell.removeAttribute("style");
      if (align) cell.setAttribute("align", align[1]);
    }
    const got = canonical(host);
    if (want === got) passed++;
    else missed.push(example.id);
  }
  return { passed, compared, missed };
}

const SECTION = `## Part {n}: reading a stream

Each answer arrives **token by token**, and the page has to keep up with
\`fetch()\` and a \`ReadableStream\` while the reader scrolls. See
[the spec](https://html.spec.whatwg.org/multipage/server-sent-events.html).

- parse the bytes as they come
- render only what changed
  - the last block
  - nothing before it
- keep every task short

\`\`\`python
def tokens(stream, size=4096):
    buffer = ""
    for chunk in stream.iter_text(size):
        buffer += chunk
        while "\\n\\n" in buffer:
            event, buffer = buffer.split("\\n\\n", 1)
            yield event  # one event at a time
    return len(buffer) > 0
\`\`\`

| step | cost | note |
|:-----|-----:|------|
| parse | 0.1 ms | per read |
| render | 0.5 ms | per frame |

> A quote, so every kind of block is on the page.

`;

function answer(tokens) {
  let text = "";
  for (let n = 1; text.split(/\s+/).length < tokens; n++) text += SECTION.replaceAll("{n}", String(n));
  return text;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function size(entry) {
  const out = await build({
    stdin: { contents: entry, resolveDir: process.cwd(), sourcefile: "entry.js" },
    bundle: true,
    minify: true,
    format: "esm",
    write: false,
    legalComments: "none",
    logLevel: "silent",
  });
  const code = out.outputFiles[0].contents;
  return { raw: code.length, gzipped: gzipSync(code, { level: 9 }).length };
}

const text = answer(4000);
console.log(
  `CommonMark ${COMMONMARK.length} examples, GFM extensions ${GFM_EXTENSIONS.length}; ` +
    `a ${text.split(/\s+/).length}-token answer of ${text.length.toLocaleString()} characters, ${runs} runs`,
);
for (const [name, parser] of Object.entries(parsers)) {
  const cm = conformance(parser, "commonmark", COMMONMARK);
  const gfm = conformance(parser, "gfm", GFM_EXTENSIONS);
  for (let k = 0; k < 5; k++) parser.render(parser.gfm, text); // warm up
  const times = [];
  for (let k = 0; k < runs; k++) {
    const start = performance.now();
    parser.render(parser.gfm, text);
    times.push(performance.now() - start);
  }
  const bytes = await size(parser.entry);
  console.log(
    `${name} ${parser.version}: CommonMark ${cm.passed}/${cm.compared} (${((cm.passed / cm.compared) * 100).toFixed(1)} %), ` +
      `GFM extensions ${gfm.passed}/${gfm.compared}; ${median(times).toFixed(2)} ms per answer (median); ` +
      `${(bytes.gzipped / 1024).toFixed(1)} KB gzipped (${(bytes.raw / 1024).toFixed(0)} KB minified)`,
  );
  console.log(`  missed: ${[...cm.missed, ...gfm.missed].join(", ") || "none"}`);
}
window.happyDOM.close();
