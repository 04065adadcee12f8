// The emulator's `toMarkdown`: small, honest converters for the formats
// edgechat's tests build themselves (a PDF with a text layer, DOCX, XLSX,
// CSV, HTML). They read the documents' own bytes, so a test proves the bytes
// arrived; they are no general converters.
//
// The real method (https://developers.cloudflare.com/workers-ai/features/markdown-conversion/):
// takes one {name, blob} or a list of them and answers one ConversionResult
// or a list, in order: {name, mimeType, format: "markdown", tokens, data} or
// {name, mimeType, format: "error", error}. A file it cannot read is an
// "error" result, not a thrown error; the format comes from the name's
// extension (the changelog example sends every blob as
// application/octet-stream). Supported formats:
// https://developers.cloudflare.com/workers-ai/features/markdown-conversion/supported-formats/
//
// Web APIs only (DecompressionStream, TextDecoder), so it runs in Node and workerd.

const decoder = new TextDecoder();
const fatal = new TextDecoder("utf-8", { fatal: true });

/** Extension -> mimeType, for the formats this emulator converts. */
export const FORMATS = Object.freeze({
  pdf: "application/pdf",
  docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  csv: "text/csv",
  html: "text/html",
  htm: "text/html",
});

// Past this many bytes out of one zip entry or PDF stream, inflating stops:
// the emulator refuses a bomb whatever its headers claim.
export const MAX_INFLATED = 16 << 20;

class Unreadable extends Error {}

async function inflate(bytes, format, limit = MAX_INFLATED) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream(format));
  const reader = stream.getReader();
  const parts = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > limit) {
        await reader.cancel();
        throw new Unreadable(`unpacks to more than ${limit} bytes`);
      }
      parts.push(value);
    }
  } catch (err) {
    if (err instanceof Unreadable) throw err;
    throw new Unreadable("a compressed stream is broken");
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

// --- zip (APPNOTE.TXT 4.3: the central directory, then each local header) ---

const u16 = (b, at) => b[at] | (b[at + 1] << 8);
const u32 = (b, at) => (u16(b, at) | (u16(b, at + 2) << 16)) >>> 0;

function zipDirectory(bytes) {
  let end = -1;
  for (let at = bytes.length - 22; at >= Math.max(0, bytes.length - 22 - 0xffff); at--) {
    if (u32(bytes, at) === 0x06054b50) {
      end = at;
      break;
    }
  }
  if (end < 0) throw new Unreadable("no zip central directory");
  const count = u16(bytes, end + 10);
  let at = u32(bytes, end + 16);
  const entries = new Map();
  for (let i = 0; i < count; i++) {
    if (u32(bytes, at) !== 0x02014b50) throw new Unreadable("a broken zip central directory");
    const nameLength = u16(bytes, at + 28);
    const name = decoder.decode(bytes.subarray(at + 46, at + 46 + nameLength));
    entries.set(name, { method: u16(bytes, at + 10), size: u32(bytes, at + 20), offset: u32(bytes, at + 42) });
    at += 46 + nameLength + u16(bytes, at + 30) + u16(bytes, at + 32);
  }
  return entries;
}

async function zipText(bytes, entries, name) {
  const entry = entries.get(name);
  if (!entry) return null;
  const at = entry.offset;
  if (u32(bytes, at) !== 0x04034b50) throw new Unreadable("a broken zip entry");
  const start = at + 30 + u16(bytes, at + 26) + u16(bytes, at + 28);
  const end = start + u32(bytes, at + 18);
  const data = bytes.subarray(start, end);
  if (entry.method === 0) return decoder.decode(data);
  if (entry.method !== 8) throw new Unreadable("an unknown zip compression");
  return decoder.decode(await inflate(data, "deflate-raw"));
}

// --- XML text -------------------------------------------------------------

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

function unescapeXml(text) {
  return text.replace(/&(#x[0-9a-f]+|#\d+|\w+);/gi, (all, name) => {
    if (name[0] === "#") {
      const code = name[1] === "x" || name[1] === "X" ? Number.parseInt(name.slice(2), 16) : Number(name.slice(1));
      return Number.isFinite(code) ? String.fromCodePoint(code) : all;
    }
    return ENTITIES[name.toLowerCase()] ?? all;
  });
}

const runs = (xml, tag) =>
  [...xml.matchAll(new RegExp(`<${tag}(?:\\s[^>]*)?>([^<]*)</${tag}>`, "g"))].map((m) => unescapeXml(m[1]));

// ECMA-376 part 1, 17.3: a body of paragraphs (w:p) whose runs hold text (w:t).
async function docx(bytes) {
  const entries = zipDirectory(bytes);
  const xml = await zipText(bytes, entries, "word/document.xml");
  if (xml === null) throw new Unreadable("no word/document.xml");
  const paragraphs = [...xml.matchAll(/<w:p[\s>][\s\S]*?<\/w:p>/g)].map((m) => runs(m[0], "w:t").join(""));
  return paragraphs.filter((p) => p.trim()).join("\n\n");
}

function table(rows) {
  if (!rows.length) return "";
  const width = Math.max(...rows.map((r) => r.length));
  const cell = (v) =>
    String(v ?? "")
      .replace(/\|/g, "\\|")
      .replace(/\n/g, " ");
  const line = (r) => `| ${Array.from({ length: width }, (_, i) => cell(r[i])).join(" | ")} |`;
  return [line(rows[0]), `| ${Array(width).fill("---").join(" | ")} |`, ...rows.slice(1).map(line)].join("\n");
}

const column = (ref) => [...ref.replace(/\d+$/, "")].reduce((n, c) => n * 26 + c.charCodeAt(0) - 64, 0) - 1;

// ECMA-376 part 1, 18.3 (worksheets: rows of cells, t="s" indexes the
// shared strings of 18.4, t="inlineStr" holds its own) and 18.2 (workbook: sheet names).
async function xlsx(bytes) {
  const entries = zipDirectory(bytes);
  const workbook = await zipText(bytes, entries, "xl/workbook.xml");
  if (workbook === null) throw new Unreadable("no xl/workbook.xml");
  const shared = await zipText(bytes, entries, "xl/sharedStrings.xml");
  const strings = shared ? [...shared.matchAll(/<si>([\s\S]*?)<\/si>/g)].map((m) => runs(m[1], "t").join("")) : [];
  const names = [...workbook.matchAll(/<sheet\s[^>]*name="([^"]*)"/g)].map((m) => unescapeXml(m[1]));
  const sheets = [];
  for (let i = 0; i < names.length; i++) {
    const xml = await zipText(bytes, entries, `xl/worksheets/sheet${i + 1}.xml`);
    if (xml === null) continue;
    const rows = [...xml.matchAll(/<row[\s>][\s\S]*?<\/row>/g)].map((row) => {
      const cells = [];
      for (const c of row[0].matchAll(/<c\s([^>]*?)(?:\/>|>([\s\S]*?)<\/c>)/g)) {
        const ref = /r="([A-Z]+\d+)"/.exec(c[1])?.[1];
        const type = /t="(\w+)"/.exec(c[1])?.[1];
        const inner = c[2] ?? "";
        const value = type === "inlineStr" ? runs(inner, "t").join("") : (runs(inner, "v")[0] ?? "");
        cells[ref ? column(ref) : cells.length] = type === "s" ? (strings[Number(value)] ?? "") : value;
      }
      return cells;
    });
    sheets.push(`## ${names[i]}\n\n${table(rows)}`);
  }
  return sheets.join("\n\n");
}

// RFC 4180: fields split by commas, quoted with "", "" inside a quoted field.
function csv(bytes) {
  const text = fatal.decode(bytes).replace(/^\ufeff/, "");
  const rows = [];
  let row = [];
  let field = "";
  let quoted = false;
  const endRow = () => {
    row.push(field);
    rows.push(row);
    row = [];
    field = "";
  };
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted && ch === '"' && text[i + 1] === '"') {
      field += '"';
      i++;
    } else if (ch === '"') {
      quoted = !quoted;
    } else if (quoted) {
      field += ch;
    } else if (ch === ",") {
      row.push(field);
      field = "";
    } else if (ch === "\n" || ch === "\r") {
      if (ch === "\r" && text[i + 1] === "\n") i++;
      endRow();
    } else {
      field += ch;
    }
  }
  if (field || row.length) rows.push([...row, field]);
  return table(rows.filter((r) => r.some((f) => f !== "")));
}

function html(bytes) {
  const text = fatal
    .decode(bytes)
    .replace(/<(script|style)[\s\S]*?<\/\1>/gi, "")
    .replace(/<h([1-6])[^>]*>/gi, (_, n) => `\n\n${"#".repeat(Number(n))} `)
    .replace(/<\/(p|div|h[1-6]|li|tr)>|<br\s*\/?>/gi, "\n\n")
    .replace(/<li[^>]*>/gi, "- ")
    .replace(/<[^>]*>/g, "");
  return unescapeXml(text)
    .split("\n")
    .map((l) => l.trim())
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

// --- PDF (ISO 32000-1: 7.3.8 streams, 9.4 text objects) ---------------------

function pdfString(raw) {
  return raw.replace(/\\([nrtbf()\\]|[0-7]{1,3})/g, (_, e) => {
    const simple = { n: "\n", r: "\r", t: "\t", b: "\b", f: "\f" };
    if (simple[e]) return simple[e];
    if (/^[0-7]/.test(e)) return String.fromCharCode(Number.parseInt(e, 8));
    return e;
  });
}

// The text a content stream shows: each Tj string, each TJ array's strings,
// a new line at each text-positioning operator and at the end of a text object.
function shownText(content) {
  const out = [];
  const ops = /\((?:\\.|[^\\)])*\)\s*(?:Tj|')|\[((?:\\.|[^\]])*)\]\s*TJ|(?<![\w*])(?:T\*|Td|TD|ET)(?![\w*])/g;
  for (const m of content.matchAll(ops)) {
    if (m[0].startsWith("(")) out.push(pdfString(m[0].slice(1, m[0].lastIndexOf(")"))));
    else if (m[1] !== undefined)
      out.push(...[...m[1].matchAll(/\((?:\\.|[^\\)])*\)/g)].map((s) => pdfString(s[0].slice(1, -1))));
    else out.push("\n");
  }
  return out
    .join("")
    .replace(/[ \t]*\n[ \t]*/g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

async function pdf(bytes) {
  const text = decoder.decode(bytes.subarray(0, 8));
  if (!text.startsWith("%PDF-")) throw new Unreadable("not a PDF");
  const latin = new TextDecoder("latin1").decode(bytes);
  if (latin.includes("/Encrypt")) throw new Unreadable("the PDF is encrypted");
  const pages = [];
  for (const m of latin.matchAll(/<<([\s\S]*?)>>\s*stream\r?\n/g)) {
    const start = m.index + m[0].length;
    const end = latin.indexOf("endstream", start);
    if (end < 0) throw new Unreadable("a PDF stream is cut short");
    // 7.3.8.1: /Length counts the stream's bytes, without the end-of-line
    // before "endstream" (an indirect length, "5 0 R", is not followed here).
    const length = /\/Length\s+(\d+)(?!\s+\d+\s+R)/.exec(m[1]);
    const stop = length ? Math.min(start + Number(length[1]), end) : end;
    let data = bytes.subarray(start, stop);
    if (/\/FlateDecode/.test(m[1])) data = await inflate(data, "deflate");
    else if (/\/Filter/.test(m[1])) continue; // images and fonts: no text of their own
    const shown = shownText(new TextDecoder("latin1").decode(data));
    if (shown) pages.push(shown);
  }
  return pages.map((page, i) => `## Page ${i + 1}\n\n${page}`).join("\n\n");
}

const CONVERTERS = { pdf, docx, xlsx, csv, html, htm: html };

/** One ConversionResult for one {name, bytes}, as the real method answers it. */
export async function convertDocument(name, bytes, countTokens) {
  const extension = String(name).split(".").pop().toLowerCase();
  const mimeType = FORMATS[extension] ?? "application/octet-stream";
  const converter = CONVERTERS[extension];
  if (!converter) return { name, mimeType, format: "error", error: `Unsupported file type: .${extension}` };
  try {
    const data = await converter(bytes);
    return { name, mimeType, format: "markdown", tokens: countTokens(data), data };
  } catch (err) {
    const why = err instanceof Unreadable ? err.message : "the file could not be read";
    return { name, mimeType, format: "error", error: `Conversion failed: ${why}` };
  }
}
