// The page's code highlighter (static/js/highlight.js, highlight.js from npm
// underneath): the common languages colour their keywords, strings, comments
// and numbers; the pieces always join back to the code; other languages load
// on demand; a fence without a language is detected; painting builds only
// spans of text.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Window } from "happy-dom";
import {
  detect,
  highlight,
  language,
  languageLabel,
  loadLanguage,
  paint,
  paintGrowing,
} from "../../static/js/highlight.js";

const window = new Window({ url: "https://edgechat.example/" });
after(() => window.happyDOM.close());

/** The highlighted pieces of `code` as "kind:text", plain text left out. */
const kinds = (code, lang) =>
  highlight(code, lang)
    .filter(([kind]) => kind)
    .map(([kind, text]) => `${kind}:${text}`);

const SAMPLES = {
  python: [
    'def area(r: float) -> float:\n    """Circle."""\n    return 3.14 * r ** 2  # pi r²\n',
    [
      "kw:def",
      "fn:area",
      "type:float",
      "type:float",
      'str:"""Circle."""',
      "kw:return",
      "num:3.14",
      "num:2",
      "com:# pi r²",
    ],
  ],
  javascript: [
    'const n = 42; // answer\nlet s = `a\n b`;\nif (ok) run("x");',
    ["kw:const", "num:42", "com:// answer", "kw:let", "str:`a\n b`", "kw:if", "fn:run", 'str:"x"'],
  ],
  typescript: [
    "interface User { name: string; age?: number }\nexport type Id = string;",
    [
      "kw:interface",
      "type:User",
      "attr:name",
      "type:string",
      "attr:age",
      "type:number",
      "kw:export",
      "kw:type",
      "type:Id",
      "type:string",
    ],
  ],
  json: [
    '{"name": "edge", "n": -1.5e3, "ok": true, "x": null}',
    ['attr:"name"', 'str:"edge"', 'attr:"n"', "num:-1.5e3", 'attr:"ok"', "lit:true", 'attr:"x"', "lit:null"],
  ],
  bash: [
    'for f in *.txt; do echo "$f" --verbose; done # loop',
    ["kw:for", "kw:in", "kw:do", "type:echo", 'str:"', "var:$f", 'str:"', "kw:done", "com:# loop"],
  ],
  html: [
    '<a href="/x" hidden>Tom &amp; Jerry</a><!-- note -->',
    [
      "tag:<a ",
      "attr:href",
      "tag:=",
      'str:"/x"',
      "tag: ",
      "attr:hidden",
      "tag:>",
      "lit:&amp;",
      "tag:</a>",
      "com:<!-- note -->",
    ],
  ],
  css: [
    ".card { color: #c2410c; margin: 0 4px; } /* box */ @media print {}",
    ["tag:.card", "attr:color", "num:#c2410c", "attr:margin", "num:0", "num:4px", "com:/* box */", "kw:@media"],
  ],
  sql: [
    "select id, count(*) from users where name = 'Ann' -- who",
    ["kw:select", "type:count", "kw:from", "kw:where", "str:'Ann'", "com:-- who"],
  ],
  go: [
    'func main() {\n\tfmt.Println("hi", 7) // out\n\tvar e error = nil\n}',
    ["kw:func", "fn:main", 'str:"hi"', "num:7", "com:// out", "kw:var", "type:error", "lit:nil"],
  ],
  rust: [
    'fn main() { let v: Vec<u8> = vec![1]; println!("{}", v.len()); }',
    [
      "kw:fn",
      "fn:main",
      "kw:let",
      "var:v",
      "type:Vec",
      "type:u8",
      "type:vec!",
      "num:1",
      "type:println!",
      'str:"{}"',
      "fn:len",
    ],
  ],
  java: [
    'public class Hi { public static void main(String[] a) { System.out.println("x"); } }',
    ["kw:public", "kw:class", "type:Hi", "kw:public", "kw:static", "type:void", "fn:main", 'str:"x"'],
  ],
  c: [
    '#include <stdio.h>\nint main(void) { printf("%d\\n", 1); return 0; }',
    [
      "attr:#",
      "kw:include",
      "attr: ",
      "str:<stdio.h>",
      "type:int",
      "fn:main",
      "type:void",
      "type:printf",
      'str:"%d\\n"',
      "num:1",
      "kw:return",
      "num:0",
    ],
  ],
  cpp: ["std::vector<int> v; auto p = nullptr; // c++", ["type:int", "kw:auto", "lit:nullptr", "com:// c++"]],
};

describe("highlight", () => {
  for (const [lang, [code, expected]] of Object.entries(SAMPLES)) {
    test(`${lang}: keywords, strings, comments and numbers`, () => {
      assert.deepEqual(kinds(code, lang), expected);
      assert.equal(
        highlight(code, lang)
          .map(([, text]) => text)
          .join(""),
        code,
      );
    });
  }

  test("fence names and aliases, and the label shown on the block", () => {
    for (const alias of ["py", "JS", "tsx", "sh", "shell", "golang", "rs", "c++", "h", "xml", "html", "yml", "kt"]) {
      assert.ok(language(alias), alias);
    }
    for (const unknown of ["brainfuck", "__proto__", "constructor", "", "toString"])
      assert.equal(language(unknown), null);
    assert.equal(languageLabel("cpp"), "C++");
    assert.equal(languageLabel("ts"), "TypeScript");
    assert.equal(languageLabel("html"), "HTML");
    assert.equal(languageLabel("py"), "Python");
    assert.equal(languageLabel("brainfuck"), "brainfuck");
    assert.equal(languageLabel(""), "text");
  });

  test("an unknown language is one plain piece", () => {
    assert.deepEqual(highlight("a <b> c", "nope"), [["", "a <b> c"]]);
    assert.deepEqual(highlight("a <b> c", "plaintext"), [["", "a <b> c"]]);
  });

  test("unclosed strings and comments (a half-streamed block) still join back", () => {
    for (const [code, lang] of [
      ['x = "open\ny = 1', "python"],
      ["a /* open\nstill", "c"],
      ['s = """doc\nmore', "python"],
    ]) {
      assert.equal(
        highlight(code, lang)
          .map(([, t]) => t)
          .join(""),
        code,
      );
    }
    assert.deepEqual(kinds("a /* open\nstill", "c"), ["com:/* open\nstill"]);
  });

  test("every piece joins back to the code, for any text in any language", () => {
    const alphabet = [..."a1 \n\"'`#/*<>=-{}!@\\é中", "$"];
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (const lang of Object.keys(SAMPLES)) {
      for (let n = 0; n < 100; n++) {
        const code = Array.from(
          { length: 1 + Math.floor(random() * 40) },
          () => alphabet[Math.floor(random() * alphabet.length)],
        ).join("");
        const pieces = highlight(code, lang);
        assert.equal(pieces.map(([, text]) => text).join(""), code, `${lang}: ${JSON.stringify(code)}`);
      }
    }
  });

  test("a language that is not bundled loads on demand, by its name or an alias", async () => {
    assert.equal(language("haskell"), null);
    assert.equal(await loadLanguage("hs"), true);
    assert.equal(language("haskell"), "haskell");
    assert.equal(languageLabel("hs"), "Haskell");
    assert.deepEqual(kinds('main = putStrLn "hi" -- say', "haskell").slice(-2), ['str:"hi"', "com:-- say"]);
    assert.equal(await loadLanguage("no-such-language"), false);
    assert.equal(await loadLanguage("../../../etc/passwd"), false);
  });

  test("a fence without a language is detected from its code", async () => {
    const python = "def tokens(stream):\n    for chunk in stream:\n        yield chunk.decode('utf-8')\n";
    assert.equal(await detect(python), "python");
    assert.equal(await detect('{\n  "name": "edge",\n  "ok": true,\n  "n": [1, 2]\n}'), "json");
    assert.equal(await detect("SELECT id, name FROM users WHERE id = 1 ORDER BY name;"), "sql");
    assert.equal(await detect("hello"), null);
  });

  test("paint builds spans of text with tok-* classes only, never markup", () => {
    const code = window.document.createElement("code");
    paint(code, '<img src=x onerror="alert(1)"> <script>alert(2)</script>', "html");
    assert.equal(code.textContent, '<img src=x onerror="alert(1)"> <script>alert(2)</script>');
    for (const node of code.querySelectorAll("*")) {
      assert.equal(node.tagName, "SPAN");
      assert.match(node.className, /^(ln|tok-(kw|str|com|num|lit|type|fn|attr|tag|var))$/);
      assert.equal(node.attributes.length, 1);
    }
    assert.equal(code.querySelectorAll("img, script").length, 0);
    assert.ok(code.querySelector(".tok-tag"));
    // One block per line, each keeping its line break; a token across lines is split between them.
    paint(code, "a = '''x\ny'''\n\nb", "python");
    assert.deepEqual(
      [...code.children].map((line) => line.textContent),
      ["a = '''x\n", "y'''\n", "\n", "b"],
    );
    assert.equal(code.children[1].firstChild.className, "tok-str");
    assert.equal(code.textContent, "a = '''x\ny'''\n\nb");
  });

  test("painting the same element again keeps the unchanged pieces and ends as a fresh paint", () => {
    const code = window.document.createElement("code");
    paint(code, "def f(x):\n    return 'op", "python");
    const first = code.firstChild;
    paint(code, "def f(x):\n    return 'open string'\n# done", "python");
    assert.ok(code.firstChild === first, "the first piece was rebuilt");
    const fresh = window.document.createElement("code");
    paint(fresh, "def f(x):\n    return 'open string'\n# done", "python");
    assert.equal(code.innerHTML, fresh.innerHTML);
    // Another language, or text that is no extension, still ends right.
    paint(code, "SELECT 1", "sql");
    paint(fresh, "SELECT 1", "sql");
    assert.equal(code.innerHTML, fresh.innerHTML);
  });

  test("a growing block is highlighted from its last fresh start, and ends as a whole paint", () => {
    const code = window.document.createElement("code");
    const fresh = window.document.createElement("code");
    const source =
      'def run(items):\n    """Sum them.\n\n    Twice."""\n' +
      "    total = 0  # start\n".repeat(3) +
      "    for item in items:\n        total += compute(item, 'x')\n".repeat(20) +
      "    return total\n";
    for (let n = 1; n <= source.length; n += 7) {
      paintGrowing(code, source.slice(0, n), "python");
      paint(fresh, source.slice(0, n), "python");
      assert.equal(code.textContent, source.slice(0, n));
      assert.equal(code.innerHTML, fresh.innerHTML, JSON.stringify(source.slice(0, n)));
    }
  });
});
