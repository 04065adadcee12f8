// Search in titles and every message version: snippets with match ranges.

import { nodes } from "./tree.js";

const BEFORE = 30;
const AFTER = 90;
const PER_CONVERSATION = 3; // messages shown per conversation

const literal = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function pattern(query) {
  const text = String(query || "").trim();
  return text ? new RegExp(literal(text).replace(/\s+/g, "\\s+"), "giu") : null;
}

function snippet(text, re) {
  re.lastIndex = 0;
  const first = re.exec(text);
  if (!first) return null;
  const flat = text;
  let start = Math.max(0, first.index - BEFORE);
  // Start at a word boundary when one is near.
  const space = flat.lastIndexOf(" ", first.index);
  if (start > 0 && space > start && space < first.index) start = space + 1;
  const end = Math.min(flat.length, first.index + first[0].length + AFTER);
  const body = flat.slice(start, end).replace(/\s/g, " ");
  const marks = [];
  re.lastIndex = 0;
  for (const m of body.matchAll(re)) if (m[0]) marks.push([m.index, m.index + m[0].length]);
  return {
    text: (start > 0 ? "…" : "") + body + (end < flat.length ? "…" : ""),
    marks: marks.map(([a, b]) => (start > 0 ? [a + 1, b + 1] : [a, b])),
  };
}

/**
 * Matches of `query`: titles, then messages, newest first within each:
 * {conversation, node (null for a title), text, marks: [[start, end]]}.
 */
export function search(conversations, query, limit = 30) {
  const re = pattern(query);
  if (!re) return [];
  const byDate = [...conversations].sort((a, b) => b.updated - a.updated);
  const titles = [];
  const messages = [];
  for (const conversation of byDate) {
    const title = snippet(conversation.title || "", re);
    if (title) titles.push({ conversation, node: null, ...title });
    let hits = 0;
    for (const node of nodes(conversation)) {
      const hit = snippet(node.content || "", re);
      if (!hit) continue;
      messages.push({ conversation, node, ...hit });
      if (++hits === PER_CONVERSATION) break;
    }
  }
  return [...titles, ...messages].slice(0, limit);
}
