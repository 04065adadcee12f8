// Syntax highlighter for answers' code blocks: per language, token rules in one
// regexp. Output is text nodes in tok-* spans (colours by class: the CSP allows
// no inline style). Unclosed strings/comments run to the end, for streaming.

const KINDS = new Set(["kw", "str", "com", "num", "lit", "type", "fn", "attr", "tag", "var"]);

const words = (s) => new Set(s.split(" "));

// Shared token sources (no capturing groups).
const DQ = String.raw`"(?:\\[\s\S]|[^"\\\n])*"?`;
const SQ = String.raw`'(?:\\[\s\S]|[^'\\\n])*'?`;
const BACKTICK = String.raw`\x60(?:\\[\s\S]|[^\x60\\])*\x60?`;
const SLASH_COMMENT = String.raw`\/\/.*`;
const BLOCK_COMMENT = String.raw`\/\*[\s\S]*?(?:\*\/|$)`;
const HASH_COMMENT = "#.*";
const NUMBER = String.raw`\b(?:0[xX][\da-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?)[a-zA-Z]*`;
const IDENT = String.raw`[A-Za-z_$][\w$]*`;

const JS_KW =
  "async await break case catch class const continue debugger default delete do else export extends finally for " +
  "function if import in instanceof let new of return static super switch this throw try typeof var void while " +
  "with yield from as get set";
const TS_KW =
  " interface type enum implements namespace declare abstract private protected public readonly keyof infer is " +
  "satisfies";
const C_KW =
  "auto break case const continue default do else enum extern for goto if inline register restrict return sizeof " +
  "static struct switch typedef union volatile while";
const CPP_KW =
  " class namespace template typename public private protected virtual override new delete this using try catch " +
  "throw operator friend constexpr noexcept static_cast dynamic_cast reinterpret_cast const_cast explicit mutable";
const C_TYPES =
  "void char short int long float double signed unsigned bool size_t int8_t int16_t int32_t int64_t uint8_t " +
  "uint16_t uint32_t uint64_t";

/** C-family rules, `extra` ones tried first. */
const cLike = (
  extra = [],
  strings = [
    ["str", DQ],
    ["str", SQ],
  ],
) => [["com", SLASH_COMMENT], ["com", BLOCK_COMMENT], ...extra, ...strings, ["num", NUMBER], ["id", IDENT]];

const LANGS = {
  python: {
    name: "Python",
    rules: [
      ["com", HASH_COMMENT],
      ["str", String.raw`[rRbBuUfF]{0,2}(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$))`],
      ["str", `[rRbBuUfF]{0,2}(?:${DQ}|${SQ})`],
      ["fn", String.raw`@[\w.]+`],
      ["num", NUMBER],
      ["id", IDENT],
    ],
    kw: words(
      "and as assert async await break class continue def del elif else except finally for from global if import " +
        "in is lambda nonlocal not or pass raise return try while with yield match case",
    ),
    lit: words("True False None self cls"),
    type: words("int str float bool list dict set tuple bytes object"),
    caps: true,
  },
  javascript: {
    name: "JavaScript",
    rules: cLike(
      [],
      [
        ["str", DQ],
        ["str", SQ],
        ["str", BACKTICK],
      ],
    ),
    kw: words(JS_KW),
    lit: words("true false null undefined NaN Infinity"),
    type: words(""),
    caps: true,
  },
  typescript: {
    name: "TypeScript",
    rules: cLike(
      [],
      [
        ["str", DQ],
        ["str", SQ],
        ["str", BACKTICK],
      ],
    ),
    kw: words(JS_KW + TS_KW),
    lit: words("true false null undefined NaN Infinity"),
    type: words("string number boolean any unknown never object bigint symbol"),
    caps: true,
  },
  json: {
    name: "JSON",
    rules: [
      ["com", SLASH_COMMENT],
      ["com", BLOCK_COMMENT],
      ["attr", String.raw`"(?:\\[\s\S]|[^"\\\n])*"(?=\s*:)`],
      ["str", DQ],
      ["num", String.raw`-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?`],
      ["id", IDENT],
    ],
    kw: words(""),
    lit: words("true false null"),
    type: words(""),
  },
  bash: {
    name: "Bash",
    rules: [
      ["com", String.raw`(?<![^\s;|&(])#.*`],
      ["str", DQ],
      ["str", "'[^']*'?"],
      ["var", String.raw`\$(?:\{[^}\n]*\}?|[\w@#?$!*-]+)`],
      ["attr", String.raw`(?<=\s)--?[A-Za-z][\w-]*`],
      ["num", String.raw`\b\d+\b`],
      ["id", String.raw`[A-Za-z_][\w-]*`],
    ],
    kw: words(
      "if then else elif fi for while until do done case esac in function select return local export readonly " +
        "declare unset shift break continue exit time",
    ),
    lit: words("true false"),
    type: words(""),
    fn: words("echo printf cd read source set trap eval exec test sudo"),
  },
  sql: {
    name: "SQL",
    rules: [
      ["com", "--.*"],
      ["com", BLOCK_COMMENT],
      ["str", SQ],
      ["str", DQ],
      ["num", NUMBER],
      ["id", IDENT],
    ],
    kw: words(
      "select from where and or not insert into values update set delete create table drop alter add index primary " +
        "key foreign references join inner left right outer full cross on group by order having limit offset as " +
        "distinct union all case when then else end is like ilike in between exists with returning default unique " +
        "check view if begin commit rollback transaction asc desc over partition",
    ),
    lit: words("null true false"),
    type: words(
      "int integer bigint smallint text varchar char boolean date time timestamp serial real float numeric decimal " +
        "json jsonb blob uuid",
    ),
    nocase: true,
  },
  go: {
    name: "Go",
    rules: cLike(
      [],
      [
        ["str", DQ],
        ["str", SQ],
        ["str", String.raw`\x60[^\x60]*\x60?`],
      ],
    ),
    kw: words(
      "break case chan const continue default defer else fallthrough for func go goto if import interface map " +
        "package range return select struct switch type var",
    ),
    lit: words("true false nil iota"),
    type: words(
      "bool byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string uint uint8 " +
        "uint16 uint32 uint64 uintptr any",
    ),
    caps: true,
  },
  rust: {
    name: "Rust",
    rules: cLike(
      [
        ["attr", String.raw`#!?\[[^\]\n]*\]?`],
        ["fn", String.raw`[A-Za-z_]\w*!`],
        ["str", String.raw`b?'(?:\\[^\n]+?|[^'\\\n])'`],
        ["kw", String.raw`'[A-Za-z_]\w*`],
      ],
      [["str", `b?${DQ}`]],
    ),
    kw: words(
      "as async await break const continue crate dyn else enum extern fn for if impl in let loop match mod move mut " +
        "pub ref return self Self static struct super trait type unsafe use where while",
    ),
    lit: words("true false None Some Ok Err"),
    type: words("i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize f32 f64 bool char str"),
    caps: true,
  },
  java: {
    name: "Java",
    rules: cLike([["attr", String.raw`@\w+`]]),
    kw: words(
      "abstract assert break case catch class continue default do else enum extends final finally for if implements " +
        "import instanceof interface native new package private protected public return static super switch " +
        "synchronized this throw throws transient try void volatile while var record yield",
    ),
    lit: words("true false null"),
    type: words("boolean byte char double float int long short"),
    caps: true,
  },
  c: {
    name: "C",
    rules: cLike([
      ["kw", String.raw`#\s*[a-z]+`],
      ["str", String.raw`(?<=#\s*include\s*)<[^>\n]*>?`],
    ]),
    kw: words(C_KW),
    lit: words("true false NULL"),
    type: words(C_TYPES),
  },
  cpp: {
    name: "C++",
    rules: cLike([
      ["kw", String.raw`#\s*[a-z]+`],
      ["str", String.raw`(?<=#\s*include\s*)<[^>\n]*>?`],
    ]),
    kw: words(C_KW + CPP_KW),
    lit: words("true false NULL nullptr"),
    type: words(`${C_TYPES} std string vector map`),
    caps: true,
  },
  css: {
    name: "CSS",
    rules: [
      ["com", BLOCK_COMMENT],
      ["str", DQ],
      ["str", SQ],
      ["kw", String.raw`@[\w-]+|!important`],
      ["num", String.raw`#[\da-fA-F]{3,8}\b|-?(?:\d*\.)?\d+(?:%|[a-zA-Z]+)?`],
      ["attr", String.raw`(?<![\w-])-{0,2}[A-Za-z][\w-]*(?=\s*:\s*[^;{}\n]*(?:[;})]|$))`],
      ["tag", String.raw`[.#][A-Za-z_][\w-]*`],
    ],
    kw: words(""),
    lit: words(""),
    type: words(""),
  },
  html: { name: "HTML", markup: true },
};

const ALIASES = {
  py: "python",
  python3: "python",
  py3: "python",
  js: "javascript",
  jsx: "javascript",
  mjs: "javascript",
  cjs: "javascript",
  node: "javascript",
  ts: "typescript",
  tsx: "typescript",
  mts: "typescript",
  jsonc: "json",
  json5: "json",
  sh: "bash",
  shell: "bash",
  zsh: "bash",
  console: "bash",
  shellscript: "bash",
  postgres: "sql",
  postgresql: "sql",
  mysql: "sql",
  sqlite: "sql",
  golang: "go",
  rs: "rust",
  h: "c",
  "c++": "cpp",
  cc: "cpp",
  cxx: "cpp",
  hpp: "cpp",
  hh: "cpp",
  scss: "css",
  less: "css",
  xml: "html",
  svg: "html",
  xhtml: "html",
  vue: "html",
};

/** The language a fence names ("py", "c++"…), or null. */
export function language(name) {
  const key = String(name || "").toLowerCase();
  const id = Object.hasOwn(ALIASES, key) ? ALIASES[key] : key;
  return Object.hasOwn(LANGS, id) ? id : null;
}

export function languageLabel(name) {
  const id = language(name);
  return id ? LANGS[id].name : name || "text";
}

const compiled = new Map();

function compile(id) {
  let c = compiled.get(id);
  if (!c) {
    const def = LANGS[id];
    c = {
      re: new RegExp(def.rules.map(([, source]) => `(${source})`).join("|"), "g"),
      kinds: def.rules.map((r) => r[0]),
    };
    compiled.set(id, c);
  }
  return c;
}

function identifier(def, word, after) {
  const key = def.nocase ? word.toLowerCase() : word;
  if (def.kw.has(key)) return "kw";
  if (def.lit.has(key)) return "lit";
  if (def.type.has(key)) return "type";
  if (def.fn?.has(key) || after === "(") return "fn";
  if (def.caps && /^[A-Z][a-z]/.test(word)) return "type";
  return "";
}

/** `code` as [kind, text] pieces (kind "" is plain); joined, they are `code`. */
export function highlight(code, lang) {
  const id = language(lang);
  if (!id) return [["", code]];
  if (LANGS[id].markup) return markup(code);
  const def = LANGS[id];
  const { re, kinds } = compile(id);
  const out = [];
  const push = (kind, text) => {
    const last = out.at(-1);
    if (last && last[0] === kind) last[1] += text;
    else out.push([kind, text]);
  };
  let pos = 0;
  for (const m of code.matchAll(re)) {
    if (!m[0]) continue;
    if (m.index > pos) push("", code.slice(pos, m.index));
    let k = 1;
    while (m[k] === undefined) k++;
    pos = m.index + m[0].length;
    let kind = kinds[k - 1];
    if (kind === "id") kind = identifier(def, m[0], code[pos]);
    push(kind, m[0]);
  }
  if (pos < code.length) push("", code.slice(pos));
  return out;
}

// HTML and XML.
const MARKUP = /<!--[\s\S]*?(?:-->|$)|<\/?[A-Za-z][\w:.-]*|&[#\w]+;/g;
const IN_TAG = /\s*(?:(\/?>)|([^\s=/>]+)|(=)\s*("[^"]*"?|'[^']*'?|[^\s>]+)?|(\S))/y;

function markup(code) {
  const out = [];
  let pos = 0;
  for (;;) {
    MARKUP.lastIndex = pos;
    const m = MARKUP.exec(code);
    if (!m) break;
    if (m.index > pos) out.push(["", code.slice(pos, m.index)]);
    const token = m[0];
    pos = MARKUP.lastIndex;
    if (token.startsWith("<!--")) out.push(["com", token]);
    else if (token[0] === "&") out.push(["num", token]);
    else {
      out.push(["tag", token]);
      for (;;) {
        IN_TAG.lastIndex = pos;
        const a = IN_TAG.exec(code);
        if (!a?.[0]) break;
        const space = a[0].match(/^\s*/)[0];
        if (space) out.push(["", space]);
        const rest = a[0].slice(space.length);
        pos = IN_TAG.lastIndex;
        if (a[1]) {
          out.push(["tag", rest]);
          break;
        }
        if (a[2]) out.push(["attr", rest]);
        else if (a[3]) {
          const value = a[4] || "";
          out.push(["", rest.slice(0, rest.length - value.length)]);
          if (value) out.push(["str", value]);
        } else out.push(["", rest]);
      }
    }
  }
  if (pos < code.length) out.push(["", code.slice(pos)]);
  return out;
}

const painted = new WeakMap(); // code element → {keys, nodes} of its lines

/** The pieces split into lines, each keeping its "\n". */
function lines(pieces) {
  const out = [[]];
  for (const [kind, text] of pieces) {
    const parts = text.split("\n");
    parts.forEach((part, k) => {
      const last = k === parts.length - 1;
      const piece = last ? part : `${part}\n`;
      if (piece) out.at(-1).push([kind, piece]);
      if (!last) out.push([]);
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
  const doc = codeEl.ownerDocument;
  const rows = lines(highlight(code, lang));
  const keys = rows.map((row) => row.map(([kind, text]) => `${kind}\u0000${text}`).join("\u0001"));
  const before = painted.get(codeEl);
  let same = 0;
  if (before && codeEl.childNodes.length === before.nodes.length) {
    const limit = Math.min(keys.length, before.keys.length);
    while (same < limit && keys[same] === before.keys[same]) same++;
    for (const node of before.nodes.slice(same)) node.remove();
  } else codeEl.replaceChildren();
  const kept = before && same ? before.nodes.slice(0, same) : [];
  const added = rows.slice(same).map((row) => {
    const line = doc.createElement("span");
    line.className = "ln";
    line.append(
      ...row.map(([kind, text]) => {
        if (!kind || !KINDS.has(kind)) return doc.createTextNode(text);
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
