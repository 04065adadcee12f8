// Names for a message that every device holding its conversation agrees on,
// from its role and text: a rating's `node` (feedback.js), the same answer
// found again after a sync (compare.js), whether a text changed (sync.js).
// Not in the first load: only those modules, each on demand, need it.

/** FNV-1a of a string, with its length: a short sum that says whether a text changed. */
export function fnv(text) {
  let h = 0x811c9dc5;
  for (let k = 0; k < text.length; k++) {
    h ^= text.charCodeAt(k);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(36) + text.length.toString(36);
}

/**
 * A message's id for the server's feedback (`node`): from its role and text,
 * so every device that holds the conversation names it alike (sync.js takes
 * two messages with the same role and text for the same one).
 */
export const nodeKey = (node) => `n${fnv(`${node.role}\n${node.content || ""}`)}`;
