// Documents in the composer: read, described by the server (POST
// /api/documents: its rules, its tokens) before they can be sent, shown as
// chips, and sent with the question as OpenAI file parts.

import { button, el } from "./dom.js";
import { state, TOKEN_KEY } from "./state.js";
import { filePart } from "./store.js";

// Extension -> the type the server takes (a browser may give none, e.g. for .md).
const TYPES = {
  pdf: "application/pdf",
  docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  csv: "text/csv",
  html: "text/html",
  htm: "text/html",
  txt: "text/plain",
  md: "text/markdown",
  markdown: "text/markdown",
};

export const DOCUMENT_EXTENSIONS = Object.keys(TYPES).map((x) => `.${x}`);

export const documentType = (file) => TYPES[file.name.split(".").pop().toLowerCase()];

/** `file` as a data: URL of `type`. */
export async function dataUrl(file, type) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let binary = "";
  for (let at = 0; at < bytes.length; at += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(at, at + 0x8000));
  }
  return `data:${type};base64,${btoa(binary)}`;
}

/** `file` read and described by the server: {name, type, size, tokens, url}; throws the refusal. */
export async function readDocument(file) {
  const type = documentType(file);
  const limit = state.limits?.max_document_bytes;
  if (limit && file.size > limit) throw new Error(state.t.docTooLarge(file.name, limit));
  const url = await dataUrl(file, type);
  const headers = { "Content-Type": "application/json", Accept: "application/json" };
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  let res;
  try {
    res = await fetch("/api/documents", { method: "POST", headers, body: JSON.stringify(filePart(file.name, url)) });
  } catch {
    throw new Error(state.t.offline);
  }
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(state.t.docRefused(file.name, data.error?.message || String(res.status)));
  return { name: file.name, type, size: file.size, tokens: data.tokens, url };
}

const kilobytes = (size) => Math.max(1, Math.round(size / 1024));

/** A document's chip: its name, size and tokens; a remove button when `onRemove` is given. */
export function documentChip(doc, onRemove) {
  const { t } = state;
  const chip = el("li", "doc-chip");
  chip.append(el("span", "doc-name", doc.name), el("span", "doc-facts", t.docFacts(kilobytes(doc.size), doc.tokens)));
  if (onRemove) chip.append(button("btn-icon remove", "×", onRemove, t.removeDocument(doc.name)));
  return chip;
}
