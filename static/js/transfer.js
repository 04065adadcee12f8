// Export and import: {"format": "edgechat", "version": 1, "exported", "conversations"}
// holding the page's trees. An import is checked whole before anything is
// applied: any unknown key, wrong type, role out of turn, too deep a tree or
// nesting refuses the file with the path of the first problem. The server's
// export of a signed-in user's data (GET /api/my-data, "edgechat-server":
// flat conversations) is read too, each made a tree and held to the same rules.

import { fromFlat, thread } from "./tree.js";

export const FORMAT = "edgechat";
export const SERVER_FORMAT = "edgechat-server";
export const VERSION = 1;
export const MAX_IMPORT_BYTES = 5 * 1024 * 1024;
const MAX_NODES = 20000;
const MAX_DEPTH = 2000;
export const MAX_JSON_DEPTH = 32; // unless GET /api/limits says max_json_depth

const STATUSES = new Set(["done", "stopped", "interrupted", "error"]);
// An answer's knowledge sources (stats.sources): conversations.py's MAX_SOURCES and MAX_SOURCE_TEXT.
const MAX_SOURCES = 50;
const MAX_SOURCE_TEXT = 8000;
const SOURCE = ["n", "base", "document", "name", "chunk", "id", "score", "text"];

/** A message as exported; images are left out (megabytes each). */
function exportNode(node) {
  const out = { role: node.role, content: node.content || "" };
  if (node.reasoning) out.reasoning = node.reasoning;
  if (node.status) out.status = node.status === "streaming" ? "interrupted" : node.status;
  if (node.stats) out.stats = node.stats;
  if (node.error) out.error = node.error;
  if (node.moderation) out.moderation = node.moderation;
  out.pick = node.pick || 0;
  out.next = (node.next || []).map(exportNode);
  return out;
}

function exportConversation(c) {
  return {
    id: c.id,
    title: c.title || "",
    updated: c.updated,
    pick: c.pick || 0,
    ...(c.preset ? { preset: c.preset } : {}),
    next: (c.next || []).map(exportNode),
  };
}

export function toJson(conversations, now = new Date()) {
  const data = {
    format: FORMAT,
    version: VERSION,
    exported: now.toISOString(),
    conversations: conversations.map(exportConversation),
  };
  return `${JSON.stringify(data, null, 2)}\n`;
}

/** The thread on screen as Markdown; `names` head the two roles. */
export function toMarkdown(conversation, names = { user: "You", assistant: "Assistant" }) {
  const parts = [`# ${oneLine(conversation.title) || "edgechat"}`];
  for (const m of thread(conversation)) {
    parts.push(`## ${m.role === "user" ? names.user : names.assistant}`);
    parts.push((m.content || "").trim() || "…");
  }
  return `${parts.join("\n\n")}\n`;
}

const oneLine = (s) =>
  String(s || "")
    .replace(/\s+/g, " ")
    .trim();

/** edgechat-<title>-<date>.<ext> */
export function fileName(title, ext, now = new Date()) {
  const slug = oneLine(title)
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40);
  return `edgechat-${slug ? `${slug}-` : ""}${now.toISOString().slice(0, 10)}.${ext}`;
}

// The words of an import, by the page's language (import-export.js shows them):
// one for each ImportError code.
export const IMPORT_TEXT = {
  en: {
    imported: (n) => (n === 1 ? "Imported 1 conversation." : `Imported ${n} conversations.`),
    refused: {
      size: "Not imported: the file is larger than 5 MB.",
      json: "Not imported: the file is not valid JSON.",
      format: "Not imported: this is not an edgechat export.",
      depth: (path, n) => `Not imported: the data nests more than ${n} levels deep at ${path}.`,
      field: (path) => `Not imported: unexpected or invalid data at ${path}.`,
      storage: "Not imported: this browser's storage is full.",
    },
  },
  zh: {
    imported: (n) => `已导入 ${n} 个对话。`,
    refused: {
      size: "未导入：文件超过 5 MB。",
      json: "未导入：文件不是有效的 JSON。",
      format: "未导入：这不是 edgechat 导出的文件。",
      depth: (path, n) => `未导入：${path} 处的数据嵌套超过 ${n} 层。`,
      field: (path) => `未导入：${path} 处的数据不符合格式。`,
      storage: "未导入：浏览器存储空间已满。",
    },
  },
};

export class ImportError extends Error {
  constructor(code, path = "", limit = undefined) {
    // The path holds the file's keys: kept short.
    const where = path.length > 120 ? `${path.slice(0, 119)}…` : path;
    super(where ? `${code} at ${where}` : code);
    this.code = code; // "size" | "json" | "format" | "depth" | "field" | "storage"
    this.path = where;
    this.limit = limit;
  }
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const isNumber = (v) => typeof v === "number" && Number.isFinite(v);

function fields(value, path, required, optional) {
  if (!isObject(value)) throw new ImportError("field", path);
  const keys = Object.keys(value);
  for (const key of keys) {
    if (!required.includes(key) && !optional.includes(key)) throw new ImportError("field", `${path}.${key}`);
  }
  for (const key of required) if (!Object.hasOwn(value, key)) throw new ImportError("field", `${path}.${key}`);
}

function string(value, path, max) {
  if (typeof value !== "string" || value.length > max) throw new ImportError("field", path);
  return value;
}

function optionalNumber(value, path) {
  if (value === null || value === undefined) return undefined;
  if (!isNumber(value) || value < 0) throw new ImportError("field", path);
  return value;
}

function optionalString(value, path, max = 200) {
  if (value === null || value === undefined) return undefined;
  return string(value, path, max);
}

function checkPick(value, count, path) {
  if (value === undefined) return 0;
  if (!Number.isInteger(value) || value < 0 || (count ? value >= count : value !== 0))
    throw new ImportError("field", path);
  return value;
}

function checkStats(value, path) {
  fields(
    value,
    path,
    [],
    ["model", "ttft_ms", "usage", "cost_usd", "fallback_from", "tps", "route", "similar", "sources", "comparison"],
  );
  const out = {};
  const model = optionalString(value.model, `${path}.model`);
  if (model !== undefined) out.model = model;
  const from = optionalString(value.fallback_from, `${path}.fallback_from`);
  if (from !== undefined) out.fallback_from = from;
  for (const key of ["ttft_ms", "cost_usd", "tps"]) {
    const n = optionalNumber(value[key], `${path}.${key}`);
    if (n !== undefined) out[key] = n;
  }
  if (value.route !== undefined && value.route !== null) {
    fields(value.route, `${path}.route`, ["model", "reason"], []);
    const { model, reason } = value.route;
    out.route = {
      model: string(model, `${path}.route.model`, 200),
      reason: string(reason, `${path}.route.reason`, 200),
    };
  }
  if (value.similar !== undefined && value.similar !== null) {
    fields(value.similar, `${path}.similar`, ["score", "question"], []);
    const { score, question } = value.similar;
    if (typeof score !== "number" || !(score >= -1 && score <= 1))
      throw new ImportError("field", `${path}.similar.score`);
    out.similar = { score, question: string(question, `${path}.similar.question`, 1000) };
  }
  if (value.sources !== undefined && value.sources !== null)
    out.sources = checkSources(value.sources, `${path}.sources`);
  // A comparison's answer: the server's id, the slot, blind (compare.js offers its vote after a reload).
  if (value.comparison !== undefined && value.comparison !== null) {
    const where = `${path}.comparison`;
    fields(value.comparison, where, ["id", "slot", "blind"], []);
    const { id, slot, blind } = value.comparison;
    if (typeof id !== "string" || !/^[A-Za-z0-9_-]{24}$/.test(id)) throw new ImportError("field", `${where}.id`);
    if (!Number.isInteger(slot) || slot < 0 || slot > 2) throw new ImportError("field", `${where}.slot`);
    if (typeof blind !== "boolean") throw new ImportError("field", `${where}.blind`);
    out.comparison = { id, slot, blind };
  }
  if (value.usage !== undefined && value.usage !== null) {
    const names = ["prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens"];
    fields(value.usage, `${path}.usage`, [], names);
    out.usage = {};
    for (const key of names) {
      const n = value.usage[key];
      if (n === undefined) continue;
      if (!Number.isInteger(n) || n < 0) throw new ImportError("field", `${path}.usage.${key}`);
      out.usage[key] = n;
    }
  }
  return out;
}

/** A kept answer's knowledge sources: done.sources, numbered from 1 in order. */
function checkSources(value, path) {
  if (!Array.isArray(value) || value.length > MAX_SOURCES) throw new ImportError("field", path);
  return value.map((source, k) => {
    const at = `${path}[${k}]`;
    fields(source, at, SOURCE, []);
    if (source.n !== k + 1) throw new ImportError("field", `${at}.n`);
    if (!Number.isInteger(source.chunk) || source.chunk < 0) throw new ImportError("field", `${at}.chunk`);
    if (typeof source.score !== "number" || !(source.score >= -1 && source.score <= 1))
      throw new ImportError("field", `${at}.score`);
    for (const key of ["base", "document", "name", "id"]) string(source[key], `${at}.${key}`, 200);
    string(source.text, `${at}.text`, MAX_SOURCE_TEXT);
    return Object.fromEntries(SOURCE.map((key) => [key, source[key]]));
  });
}

function checkError(value, path) {
  fields(value, path, [], ["code", "status", "message", "retryAfter", "retryable", "offline", "categories"]);
  const out = {};
  const code = optionalString(value.code, `${path}.code`, 100);
  if (code !== undefined) out.code = code;
  const message = optionalString(value.message, `${path}.message`, 1000);
  if (message !== undefined) out.message = message;
  for (const key of ["status", "retryAfter"]) {
    const n = value[key];
    if (n === undefined || n === null) continue;
    if (!Number.isInteger(n) || n < 0) throw new ImportError("field", `${path}.${key}`);
    out[key] = n;
  }
  if (value.categories !== undefined) out.categories = checkCategories(value.categories, `${path}.categories`);
  for (const key of ["retryable", "offline"]) {
    if (value[key] === undefined || value[key] === null) continue;
    if (typeof value[key] !== "boolean") throw new ImportError("field", `${path}.${key}`);
    out[key] = value[key];
  }
  return out;
}

/** Llama Guard's categories ("S2", …). */
function checkCategories(value, path) {
  if (!Array.isArray(value) || value.length > 20) throw new ImportError("field", path);
  return value.map((code, k) => string(code, `${path}[${k}]`, 10));
}

/**
 * Where `data` first nests deeper than `max`, or "". Versions (a node's `next`)
 * are no level: a tree has MAX_DEPTH and is walked without recursion; this
 * bounds what any recursive walk may meet, so it must come before one.
 */
function tooDeep(data, max) {
  const nested = (v) => v !== null && typeof v === "object";
  // [value, depth, path, "node" (a conversation or message) | "list" ($.conversations) | ""]
  const stack = nested(data) ? [[data, 1, "$", ""]] : [];
  while (stack.length) {
    const [value, depth, path, kind] = stack.pop();
    if (depth > max) return path;
    for (const [key, child] of Object.entries(value)) {
      if (!nested(child)) continue;
      const at = Array.isArray(value) ? `${path}[${key}]` : `${path}.${key}`;
      if (kind === "node" && key === "next" && Array.isArray(child)) {
        for (const [j, node] of child.entries()) if (nested(node)) stack.push([node, depth, `${at}[${j}]`, "node"]);
      } else {
        const next = kind === "list" ? "node" : path === "$" && key === "conversations" ? "list" : "";
        stack.push([child, depth + 1, at, next]);
      }
    }
  }
  return "";
}

/**
 * The server's export as this page's: each flat conversation a tree, without
 * what the page's export leaves out (an image's bytes are not in either).
 */
function fromServer(data) {
  // The votes, ratings and knowledge bases kept with them are the server's record: the chats come back, they do not.
  fields(
    data,
    "$",
    ["format", "version", "user", "conversations"],
    ["shares", "files", "feedback", "comparisons", "knowledge"],
  );
  if (!Array.isArray(data.conversations)) throw new ImportError("field", "$.conversations");
  const conversations = data.conversations.map((c, k) => {
    const path = `$.conversations[${k}]`;
    fields(c, path, ["id", "title", "updated", "nodes"], ["pick", "preset", "etag"]);
    if (!Array.isArray(c.nodes)) throw new ImportError("field", `${path}.nodes`);
    const nodes = c.nodes.map((node, j) => {
      if (!isObject(node)) throw new ImportError("field", `${path}.nodes[${j}]`);
      const { images, ...kept } = node;
      return kept;
    });
    try {
      return fromFlat({ ...c, nodes });
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      throw new ImportError("field", `${path}.nodes[${error.message}].parent`);
    }
  });
  return { format: FORMAT, version: VERSION, conversations };
}

/** An export's conversations as fresh copies of the known fields, or throws an ImportError. */
export function parseImport(text, maxBytes = MAX_IMPORT_BYTES, maxDepth = MAX_JSON_DEPTH) {
  if (typeof text !== "string" || new TextEncoder().encode(text).length > maxBytes) throw new ImportError("size");
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    throw new ImportError("json");
  }
  const deep = tooDeep(data, maxDepth);
  if (deep) throw new ImportError("depth", deep, maxDepth);
  if (isObject(data) && data.format === SERVER_FORMAT && data.version === VERSION) data = fromServer(data);
  if (!isObject(data) || data.format !== FORMAT || data.version !== VERSION) throw new ImportError("format");
  fields(data, "$", ["format", "version", "conversations"], ["exported"]);
  if (data.exported !== undefined) string(data.exported, "$.exported", 100);
  if (!Array.isArray(data.conversations) || !data.conversations.length)
    throw new ImportError("field", "$.conversations");
  let count = 0;
  const ids = new Set();
  return data.conversations.map((c, k) => {
    const path = `$.conversations[${k}]`;
    fields(c, path, ["id", "title", "updated", "next"], ["pick", "preset"]);
    const id = string(c.id, `${path}.id`, 100);
    if (!id || ids.has(id)) throw new ImportError("field", `${path}.id`);
    ids.add(id);
    const conversation = {
      id,
      title: string(c.title, `${path}.title`, 200),
      updated: c.updated,
      next: [],
      pick: 0,
    };
    if (!isNumber(c.updated) || c.updated < 0) throw new ImportError("field", `${path}.updated`);
    if (c.preset !== undefined) conversation.preset = string(c.preset, `${path}.preset`, 32);
    // Without recursion: [source, copy, path, depth, role of its children].
    const stack = [[c, conversation, path, 0, "user"]];
    while (stack.length) {
      const [source, copy, at, depth, childRole] = stack.pop();
      if (!Array.isArray(source.next)) throw new ImportError("field", `${at}.next`);
      copy.pick = checkPick(source.pick, source.next.length, `${at}.pick`);
      if (depth >= MAX_DEPTH && source.next.length) throw new ImportError("field", `${at}.next`);
      source.next.forEach((node, j) => {
        const where = `${at}.next[${j}]`;
        if (++count > MAX_NODES) throw new ImportError("field", where);
        fields(
          node,
          where,
          ["role", "content"],
          ["reasoning", "status", "stats", "error", "moderation", "pick", "next"],
        );
        if (node.role !== childRole) throw new ImportError("field", `${where}.role`);
        const message = {
          role: node.role,
          content: string(node.content, `${where}.content`, 1_000_000),
          next: [],
          pick: 0,
        };
        const reasoning = optionalString(node.reasoning, `${where}.reasoning`, 1_000_000);
        if (reasoning) message.reasoning = reasoning;
        if (node.status !== undefined && node.status !== null) {
          if (!STATUSES.has(node.status)) throw new ImportError("field", `${where}.status`);
          message.status = node.status;
        }
        if (node.stats !== undefined && node.stats !== null) message.stats = checkStats(node.stats, `${where}.stats`);
        if (node.error !== undefined && node.error !== null) message.error = checkError(node.error, `${where}.error`);
        if (node.moderation) {
          const at = `${where}.moderation`;
          fields(node.moderation, at, ["safe", "categories"], []);
          if (typeof node.moderation.safe !== "boolean") throw new ImportError("field", `${at}.safe`);
          message.moderation = {
            safe: node.moderation.safe,
            categories: checkCategories(node.moderation.categories, `${at}.categories`),
          };
        }
        copy.next.push(message);
        const grandchildren = node.next === undefined ? { ...node, next: [] } : node;
        stack.push([grandchildren, message, where, depth + 1, node.role === "user" ? "assistant" : "user"]);
      });
    }
    return conversation;
  });
}
