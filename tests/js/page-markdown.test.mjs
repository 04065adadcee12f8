// The page's Markdown renderer (static/js/render.js, markdown-it underneath)
// and its streaming (static/js/markdown.js) on a DOM from npm (happy-dom):
// model text never becomes markup, links are http(s) or mailto only, no image
// is loaded, the syntax builds the expected elements, math is marked and
// typeset once its block is closed, and a streamed answer renders as a whole one.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Window } from "happy-dom";
import { loadRenderer, MarkdownStream } from "../../static/js/markdown.js";

const window = new Window({ url: "https://edgechat.example/" });
// The renderer builds nodes with globalThis.document, as in the page.
globalThis.document = window.document;
// The page has a doctype (KaTeX refuses quirks mode); happy-dom has no compatMode.
Object.defineProperty(window.document, "compatMode", { value: "CSS1Compat" });
after(() => window.happyDOM.close());
const { renderMarkdown, safeUrl } = await loadRenderer();

/** Renders `source` into a detached <div> and returns it. */
function render(source, labels) {
  const host = window.document.createElement("div");
  host.append(renderMarkdown(source, labels));
  return host;
}

// Everything the renderer may create, and the attributes it may set.
const TAGS = new Set([
  ...["p", "br", "h3", "h4", "h5", "h6", "hr", "blockquote", "ul", "ol", "li", "a", "strong", "em", "del", "code"],
  ...["div", "span", "button", "pre", "table", "thead", "tbody", "tr", "th", "td"],
]);
const ATTRIBUTES = new Set([
  ...["class", "href", "rel", "target", "type", "data-lang", "start", "tabindex", "title"],
  ...["role", "aria-label", "data-tex"],
]);

/** Fails unless every element under `host` is one the renderer may build, with safe attributes. */
function assertInert(host, source) {
  for (const node of host.querySelectorAll("*")) {
    const tag = node.tagName.toLowerCase();
    assert.ok(TAGS.has(tag), `<${tag}> from ${JSON.stringify(source)}`);
    for (const { name, value } of node.attributes) {
      assert.ok(ATTRIBUTES.has(name), `${name}= on <${tag}> from ${JSON.stringify(source)}`);
      if (name === "href")
        assert.match(value, /^(https?:\/\/|mailto:)/, `href ${value} from ${JSON.stringify(source)}`);
      if (name === "type") assert.equal(value, "button");
    }
    if (tag === "a") {
      assert.equal(node.getAttribute("rel"), "noopener noreferrer");
      assert.equal(node.getAttribute("target"), "_blank");
    }
  }
}

const HOSTILE = [
  "<img src=x onerror=alert(1)>",
  "<script>alert(1)</script>",
  '<a href="javascript:alert(1)">x</a>',
  "<svg onload=alert(1)><circle/></svg>",
  '<iframe src="https://evil.example"></iframe>',
  "<style>body{display:none}</style>",
  '"><img src=x onerror=alert(1)>',
  "&lt;img src=x&gt; &amp; &#60;b&#62;",
  "<!-- comment --><b>bold?</b>",
  "<textarea></textarea><input autofocus onfocus=alert(1)>",
];

describe("model text never becomes markup", () => {
  for (const payload of HOSTILE) {
    test(`as a paragraph: ${payload}`, () => {
      const host = render(payload);
      assertInert(host, payload);
      // Entities are characters, as the spec says: text all the same.
      const text = payload.startsWith("&lt;") ? "<img src=x> & <b>" : payload;
      assert.equal(host.textContent, text);
    });
  }

  test("inside every block and inline syntax", () => {
    const wraps = [
      (s) => `# ${s}`,
      (s) => `> ${s}`,
      (s) => `- ${s}\n  - ${s}`,
      (s) => `1. ${s}`,
      (s) => `**${s}** _${s}_ ~~${s}~~`,
      (s) => `\`${s}\``,
      (s) => `\`\`\`${s}\n${s}\n\`\`\``,
      (s) => `[${s}](https://example.com/)`,
      (s) => `![${s}](https://example.com/i.png)`,
      (s) => `| ${s} | b |\n|---|---|\n| ${s} | ${s} |`,
    ];
    for (const payload of HOSTILE) {
      for (const wrap of wraps) {
        const source = wrap(payload);
        const host = render(source);
        assertInert(host, source);
        assert.equal(host.querySelectorAll("img, script, iframe, svg, style, input").length, 0);
      }
    }
  });

  test("arbitrary mixes of Markdown and HTML fragments stay inert", () => {
    const parts = [
      "<img src=x onerror=alert(1)>",
      "<script>",
      "</p>",
      "[",
      "](",
      ")",
      "javascript:alert(1)",
      "https://example.com/x",
      "data:text/html,<b>x</b>",
      "**",
      "_",
      "~~",
      "`",
      "```",
      "\n",
      "\n\n",
      "# ",
      "> ",
      "- ",
      "1. ",
      "|",
      "|---|",
      "\\",
      "<",
      ">",
      "!",
      " ",
      "word",
      "\r\n",
    ];
    // A fixed-seed generator: the same cases on every run.
    let seed = 0x2545f491;
    const next = () => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) / 2 ** 32;
    };
    for (let n = 0; n < 500; n++) {
      let source = "";
      const length = 1 + Math.floor(next() * 20);
      for (let k = 0; k < length; k++) source += parts[Math.floor(next() * parts.length)];
      assertInert(render(source), source);
    }
  });
});

describe("links and images", () => {
  test("safeUrl keeps absolute http(s) and mailto only", () => {
    assert.equal(safeUrl("https://example.com/a b"), "https://example.com/a%20b");
    assert.equal(safeUrl("http://example.com"), "http://example.com/");
    assert.equal(safeUrl("mailto:ann@example.com"), "mailto:ann@example.com");
    for (const bad of [
      "javascript:alert(1)",
      "JAVASCRIPT:alert(1)",
      "data:text/html,x",
      "/relative",
      "//host/x",
      "",
      "vbscript:x",
      "file:///etc/passwd",
    ]) {
      assert.equal(safeUrl(bad), null, bad);
    }
  });

  test("a link with a safe URL opens in a new tab without referrer", () => {
    const a = render("[the docs](https://example.com/docs)").querySelector("a");
    assert.equal(a.getAttribute("href"), "https://example.com/docs");
    assert.equal(a.textContent, "the docs");
  });

  test("a link with an unsafe URL keeps its text and loses the link", () => {
    const host = render("[click](javascript:alert(1)) and [rel](/path)");
    assert.equal(host.querySelectorAll("a").length, 0);
    assert.equal(host.textContent, "click and rel");
  });

  test("an image becomes a link to it, never an <img>", () => {
    const host = render("![a cat](https://example.com/cat.png)");
    assert.equal(host.querySelectorAll("img").length, 0);
    const a = host.querySelector("a");
    assert.equal(a.getAttribute("href"), "https://example.com/cat.png");
    assert.equal(a.textContent, "🖼 a cat");
    const unsafe = render("![x](javascript:void) ![y](javascript:alert(1))");
    assert.equal(unsafe.querySelectorAll("a").length, 0);
    assert.equal(unsafe.textContent, "🖼 x 🖼 y");
  });

  test("bare and angle-bracket URLs become links; trailing punctuation stays text", () => {
    const host = render("See https://example.com/a. Or <https://example.com/b>!");
    const hrefs = [...host.querySelectorAll("a")].map((a) => a.getAttribute("href"));
    assert.deepEqual(hrefs, ["https://example.com/a", "https://example.com/b"]);
    assert.equal(host.textContent, "See https://example.com/a. Or https://example.com/b!");
  });
});

describe("syntax", () => {
  const html = (source, labels) => render(source, labels).innerHTML;

  test("headings start at h3, paragraphs keep single newlines as <br>", () => {
    assert.equal(html("# Title\n###### Small"), "<h3>Title</h3><h6>Small</h6>");
    assert.equal(html("one\ntwo\n\nthree"), "<p>one<br>two</p><p>three</p>");
    assert.equal(html("a\r\nb\rc"), "<p>a<br>b<br>c</p>");
  });

  test("inline emphasis, code and escapes", () => {
    assert.equal(
      html("**b** *i* _j_ ~~s~~ `a <b>` \\*not\\*"),
      "<p><strong>b</strong> <em>i</em> <em>j</em> <del>s</del> <code>a &lt;b&gt;</code> *not*</p>",
    );
    assert.equal(html("snake_case_name"), "<p>snake_case_name</p>");
  });

  test("fenced code keeps its text, names its language and labels the copy button", () => {
    const host = render("```python\nprint('<b>')\n```", { copy: "复制" });
    const code = host.querySelector("pre > code");
    assert.equal(code.textContent, "print('<b>')");
    assert.equal(code.dataset.lang, "python");
    assert.equal(host.querySelector(".code-lang").textContent, "Python");
    assert.equal(host.querySelector("pre .tok-str").textContent, "'<b>'");
    assert.equal(host.querySelector("button.copy").textContent, "复制");
  });

  test("an unclosed fence runs to the end (a half-streamed answer)", () => {
    const host = render("text\n```\nline 1\nline 2");
    assert.equal(host.querySelector("code").textContent, "line 1\nline 2");
    assert.equal(host.querySelector(".code-lang").textContent, "text");
  });

  test("lists: nested, ordered with start, tight items without <p>", () => {
    assert.equal(html("- a\n  - b\n- c"), "<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>");
    const ol = render("3. x\n4. y").querySelector("ol");
    assert.equal(ol.start, 3);
    assert.deepEqual(
      [...ol.children].map((li) => li.textContent),
      ["x", "y"],
    );
  });

  test("blockquote, rule and table with alignment", () => {
    assert.equal(html("> quoted\n\n---"), "<blockquote><p>quoted</p></blockquote><hr>");
    // As GitHub does: a | splits cells even in code, unless it is escaped.
    const host = render("| a | b | c |\n|:-:|--:|---|\n| 1 | 2 \\| 3 | `x\\|y` |");
    assert.deepEqual(
      [...host.querySelectorAll("th")].map((th) => th.className),
      ["al-center", "al-right", ""],
    );
    assert.deepEqual(
      [...host.querySelectorAll("td")].map((td) => td.textContent),
      ["1", "2 | 3", "x|y"],
    );
  });

  test("empty input renders nothing", () => {
    assert.equal(html(""), "");
    assert.equal(html("\n\n  \n"), "");
  });
});

describe("MarkdownStream (incremental rendering of a streamed answer)", () => {
  const SOURCES = [
    "# Title\n\nA paragraph\non two lines.\n\n- a\n- b\n\n  still b\n\n- c\n\n1. one\n2. two\n\n```py\nx = 1\n\n\ny = 2\n```\n\n| a | b |\n|---|:-:|\n| 1 | 2 |\n\n> quoted\n> more\n\n---\n\nThe **end** with `code`.",
    "text\n\n```\nunclosed fence\n\nrunning on",
    "Right after a line:\n```js\nconst a = `x`; // c\n\n```\n| a | b |\n|---|---|\n| 1 | 2 |\n```\n- list\n```py\ndef f():\n    return '''\n\n'''\n```\n~~~\n``` not closing\n~~~",
    "- item\n\n      indented code in a list\n\nafter\r\n\r\nwindows lines\r\n\r\n~~~js\nconst a = 1;\n~~~\n",
  ];
  const full = (source) => {
    const host = window.document.createElement("div");
    host.append(renderMarkdown(source));
    return host.innerHTML;
  };

  test("at every cut of the source, the page shows what rendering it whole shows", () => {
    for (const source of SOURCES) {
      const host = window.document.createElement("div");
      const stream = new MarkdownStream(host);
      for (let n = 0; n <= source.length; n++) {
        stream.update(source.slice(0, n));
        assert.equal(host.innerHTML, full(source.slice(0, n)), `${JSON.stringify(source.slice(0, n))}`);
      }
    }
  });

  test("blocks that are closed are rendered once and kept, not rebuilt", () => {
    const host = window.document.createElement("div");
    const stream = new MarkdownStream(host);
    stream.update("# Title\n\nfirst paragraph\n\nsecond");
    const heading = host.querySelector("h3");
    // "first paragraph" is closed once a whole line follows its blank line.
    stream.update("# Title\n\nfirst paragraph\n\nsecond paragraph\n");
    const first = host.querySelector("p");
    stream.update("# Title\n\nfirst paragraph\n\nsecond paragraph\ngoes on\n\nthird");
    assert.ok(host.querySelector("h3") === heading, "the heading was rebuilt");
    assert.ok(host.querySelector("p") === first, "the first paragraph was rebuilt");
    assert.equal(host.querySelectorAll("p").length, 3);
  });

  test("an open code block grows on the same element, its earlier pieces kept", () => {
    const host = window.document.createElement("div");
    const stream = new MarkdownStream(host);
    stream.update("Code:\n\n```python\ndef f(x):\n");
    const code = host.querySelector("pre > code");
    const keyword = code.querySelector(".tok-kw");
    stream.update("Code:\n\n```python\ndef f(x):\n    return x  # done\n");
    assert.ok(host.querySelector("pre > code") === code, "the code block was rebuilt");
    assert.ok(code.querySelector(".tok-kw") === keyword, "the first keyword was rebuilt");
    assert.equal(code.textContent, "def f(x):\n    return x  # done");
    const whole = "Code:\n\n```python\ndef f(x):\n    return x  # done\n```\n\nAfter.";
    stream.update(whole);
    assert.equal(host.innerHTML, full(whole));
  });

  test("a source that does not extend the last one is rendered again from the start", () => {
    const host = window.document.createElement("div");
    const stream = new MarkdownStream(host);
    stream.update("one\n\ntwo\n\nthree");
    stream.update("other\n\nx");
    assert.equal(host.innerHTML, full("other\n\nx"));
    stream.update("");
    assert.equal(host.innerHTML, "");
  });

  test("hostile text stays text when rendered in pieces", () => {
    const host = window.document.createElement("div");
    const stream = new MarkdownStream(host);
    const source =
      "<img src=x onerror=alert(1)>\n\n```html\n<script>alert(2)</script>\n```\n\n[x](javascript:alert(3))";
    for (let n = 0; n <= source.length; n += 3) stream.update(source.slice(0, n));
    stream.update(source);
    assertInert(host, source);
    assert.equal(host.querySelectorAll("img, script").length, 0);
  });
});

describe("math, task lists and references", () => {
  const html = (source) => render(source).innerHTML;
  const maths = (source) => [...render(source).querySelectorAll(".math")].map((m) => [m.className, m.dataset.tex]);

  test("the four delimiters models use are math, kept as LaTeX until typeset", () => {
    assert.deepEqual(maths("$E = mc^2$ and $$\\int_0^1 x\\,dx = \\frac12$$"), [
      ["math", "E = mc^2"],
      ["math math-display", "\\int_0^1 x\\,dx = \\frac12"],
    ]);
    assert.deepEqual(maths("\\(a^2\\) then \\[b\\]"), [
      ["math", "a^2"],
      ["math math-display", "b"],
    ]);
    // A display block on lines of its own, either way; \, is not an escape there.
    assert.deepEqual(maths("$$\n\\sum_k k\\, dk\n$$"), [["math math-display", "\n\\sum_k k\\, dk\n"]]);
    assert.deepEqual(maths("\\[\nx^2\n\\]"), [["math math-display", "\nx^2\n"]]);
    assert.equal(render("$x$").querySelector(".math").textContent, "$x$");
  });

  test("money and other dollars stay text", () => {
    for (const text of ["It costs $5 and $10.", "$5-$10", "from $ 5 to $ 10", "a \\$x\\$ b", "`$x$`", "$ x$"])
      assert.deepEqual(maths(text), [], text);
    assert.equal(render("It costs $5 and $10.").textContent, "It costs $5 and $10.");
  });

  test("a display block never spans a blank line: there it is text", () => {
    assert.deepEqual(maths("$$\nx\n\ny\n$$"), []);
  });

  test("task list items show a labelled box", () => {
    const host = render("- [ ] open\n- [x] done\n- [y] no");
    const boxes = [...host.querySelectorAll(".task-box")];
    assert.deepEqual(
      boxes.map((b) => [b.textContent, b.getAttribute("aria-label")]),
      [
        ["☐", "to do"],
        ["☑", "done"],
      ],
    );
    assert.equal(host.querySelectorAll("li")[2].textContent, "[y] no");
  });

  test("reference links, setext headings, loose lists, entities", () => {
    assert.equal(
      html("[the docs][d]\n\n[d]: https://example.com/docs"),
      '<p><a href="https://example.com/docs" rel="noopener noreferrer" target="_blank">the docs</a></p>',
    );
    assert.equal(html("Title\n---"), "<h4>Title</h4>");
    assert.equal(html("- a\n\n- b"), "<ul><li><p>a</p></li><li><p>b</p></li></ul>");
    assert.equal(html("&copy; ~~gone~~"), "<p>© <del>gone</del></p>");
    assert.equal(
      html("www.example.com and main.rs"),
      '<p><a href="http://www.example.com" rel="noopener noreferrer" target="_blank">www.example.com</a> and main.rs</p>',
    );
  });
});

describe("MarkdownStream: closing blocks, references, the renderer's arrival", () => {
  test("a definition that arrives after its use renders the earlier blocks again, with the link", () => {
    const host = window.document.createElement("div");
    const stream = new MarkdownStream(host);
    stream.update("See [the docs].\n\nMore text.\n\n");
    assert.equal(host.querySelectorAll("a").length, 0);
    // Once the definition's block is closed (a line follows it).
    stream.update("See [the docs].\n\nMore text.\n\n[the docs]: https://example.com/d\n\nEnd\n");
    assert.equal(host.querySelector("a")?.getAttribute("href"), "https://example.com/d");
    assert.equal(
      host.innerHTML,
      render("See [the docs].\n\nMore text.\n\n[the docs]: https://example.com/d\n\nEnd\n").innerHTML,
    );
  });

  test("math is typeset when its block closes, not while it is open", async () => {
    const host = window.document.createElement("div");
    window.document.body.append(host);
    const stream = new MarkdownStream(host);
    stream.update("So $E = mc^2$ holds");
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(host.querySelector(".math").dataset.typeset, undefined, "typeset while open");
    stream.update("So $E = mc^2$ holds", true);
    const { typeset } = await import("../../static/js/math.js");
    await typeset(host);
    const math = host.querySelector(".math");
    assert.equal(math.dataset.typeset, "ok");
    assert.ok(math.querySelector(".katex"), math.innerHTML.slice(0, 200));
    assert.equal(math.querySelector("annotation").textContent, "E = mc^2");
    host.remove();
  });

  test("a formula KaTeX cannot read stays as written, marked", async () => {
    const host = window.document.createElement("div");
    window.document.body.append(host);
    new MarkdownStream(host).update("Broken $\\frac{1$ here", true);
    const { typeset } = await import("../../static/js/math.js");
    await typeset(host);
    const math = host.querySelector(".math");
    assert.equal(math.dataset.typeset, "error");
    assert.equal(math.textContent, "$\\frac{1$");
    host.remove();
  });

  test("before the renderer is loaded, the text shows as it is, then renders", async () => {
    const cold = await import("../../static/js/markdown.js?cold");
    const host = window.document.createElement("div");
    const stream = new cold.MarkdownStream(host);
    stream.update("**bold** <b>x</b>");
    assert.equal(host.innerHTML, '<p class="plain">**bold** &lt;b&gt;x&lt;/b&gt;</p>');
    await cold.loadRenderer();
    assert.equal(host.innerHTML, "<p><strong>bold</strong> &lt;b&gt;x&lt;/b&gt;</p>");
  });
});
