// The page's code highlighter (static/js/highlight.js): every language of
// issue 12 colours its keywords, strings, comments and numbers; the pieces
// always join back to the code; painting builds only spans of text.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Window } from "happy-dom";
import { highlight, language, languageLabel, paint } from "../../static/js/highlight.js";

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
    "const n = 42; // answer\nlet s = `a\n b`;\nif (ok) run('x');",
    ["kw:const", "num:42", "com:// answer", "kw:let", "str:`a\n b`", "kw:if", "fn:run", "str:'x'"],
  ],
  typescript: [
    "interface User { name: string; age?: number }\nexport type Id = string;",
    ["kw:interface", "type:User", "type:string", "type:number", "kw:export", "kw:type", "type:Id", "type:string"],
  ],
  json: [
    '{"name": "edge", "n": -1.5e3, "ok": true, "x": null}',
    ['attr:"name"', 'str:"edge"', 'attr:"n"', "num:-1.5e3", 'attr:"ok"', "lit:true", 'attr:"x"', "lit:null"],
  ],
  bash: [
    'for f in *.txt; do echo "$f" --verbose; done # loop',
    ["kw:for", "kw:in", "kw:do", "fn:echo", 'str:"$f"', "attr:--verbose", "kw:done", "com:# loop"],
  ],
  html: [
    '<a href="/x" hidden>Tom &amp; Jerry</a><!-- note -->',
    ["tag:<a", "attr:href", 'str:"/x"', "attr:hidden", "tag:>", "num:&amp;", "tag:</a", "tag:>", "com:<!-- note -->"],
  ],
  css: [
    ".card { color: #c2410c; margin: 0 4px; } /* box */ @media print {}",
    ["tag:.card", "attr:color", "num:#c2410c", "attr:margin", "num:0", "num:4px", "com:/* box */", "kw:@media"],
  ],
  sql: [
    "select id, count(*) from users where name = 'Ann' -- who",
    ["kw:select", "fn:count", "kw:from", "kw:where", "str:'Ann'", "com:-- who"],
  ],
  go: [
    'func main() {\n\tfmt.Println("hi", 7) // out\n\tvar e error = nil\n}',
    ["kw:func", "fn:main", "fn:Println", 'str:"hi"', "num:7", "com:// out", "kw:var", "type:error", "lit:nil"],
  ],
  rust: [
    'fn main() { let v: Vec<u8> = vec![1]; println!("{}", v.len()); }',
    ["kw:fn", "fn:main", "kw:let", "type:Vec", "type:u8", "fn:vec!", "num:1", "fn:println!", 'str:"{}"', "fn:len"],
  ],
  java: [
    'public class Hi { public static void main(String[] a) { System.out.println("x"); } }',
    [
      "kw:public",
      "kw:class",
      "type:Hi",
      "kw:public",
      "kw:static",
      "kw:void",
      "fn:main",
      "type:String",
      "type:System",
      "fn:println",
      'str:"x"',
    ],
  ],
  c: [
    '#include <stdio.h>\nint main(void) { printf("%d\\n", 1); return 0; }',
    [
      "kw:#include",
      "str:<stdio.h>",
      "type:int",
      "fn:main",
      "type:void",
      "fn:printf",
      'str:"%d\\n"',
      "num:1",
      "kw:return",
      "num:0",
    ],
  ],
  cpp: [
    "std::vector<int> v; auto p = nullptr; // c++",
    ["type:std", "type:vector", "type:int", "kw:auto", "lit:nullptr", "com:// c++"],
  ],
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
    for (const [alias, id] of [
      ["py", "python"],
      ["JS", "javascript"],
      ["tsx", "typescript"],
      ["sh", "bash"],
      ["shell", "bash"],
      ["golang", "go"],
      ["rs", "rust"],
      ["c++", "cpp"],
      ["h", "c"],
      ["xml", "html"],
      ["postgresql", "sql"],
    ]) {
      assert.equal(language(alias), id, alias);
    }
    assert.equal(language("brainfuck"), null);
    assert.equal(language("__proto__"), null);
    assert.equal(language("constructor"), null);
    assert.equal(languageLabel("cpp"), "C++");
    assert.equal(languageLabel("ts"), "TypeScript");
    assert.equal(languageLabel("brainfuck"), "brainfuck");
    assert.equal(languageLabel(""), "text");
  });

  test("an unknown language is one plain piece", () => {
    assert.deepEqual(highlight("a <b> c", "nope"), [["", "a <b> c"]]);
  });

  test("unclosed strings and comments (a half-streamed block) end the line or the block", () => {
    assert.deepEqual(kinds('x = "open\ny = 1', "python"), ['str:"open', "num:1"]);
    assert.deepEqual(kinds("a /* open\nstill", "c"), ["com:/* open\nstill"]);
    assert.deepEqual(kinds('s = """doc\nmore', "python"), ['str:"""doc\nmore']);
  });

  test("every piece joins back to the code, for any text in any language", () => {
    const alphabet = [
      "a",
      "1",
      " ",
      "\n",
      '"',
      "'",
      "`",
      "#",
      "/",
      "*",
      "<",
      ">",
      "=",
      "-",
      "$",
      "{",
      "}",
      "!",
      "@",
      "\\",
      "é",
      "中",
    ];
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (const lang of Object.keys(SAMPLES)) {
      for (let n = 0; n < 200; n++) {
        const code = Array.from(
          { length: 1 + Math.floor(random() * 40) },
          () => alphabet[Math.floor(random() * alphabet.length)],
        ).join("");
        const pieces = highlight(code, lang);
        assert.equal(pieces.map(([, text]) => text).join(""), code, `${lang}: ${JSON.stringify(code)}`);
      }
    }
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
});
