// Read aloud's pieces: paragraphs, long ones by sentence, a code block whole.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Window } from "happy-dom";

const window = new Window();
Object.defineProperty(globalThis, "localStorage", { value: window.localStorage, configurable: true });
Object.defineProperty(globalThis, "document", { value: window.document, configurable: true });
const { pieces } = await import("../../static/js/speech.js");
after(() => window.happyDOM.close());

test("paragraphs are pieces; a fenced block stays whole, blank lines and all", () => {
  const text = "One.\nStill one.\n\nTwo.\n\n```py\nx = 1\n\ny = 2\n```\n\nThree.";
  assert.deepEqual(pieces(text), ["One.\nStill one.", "Two.", "```py\nx = 1\n\ny = 2\n```", "Three."]);
});

test("a long paragraph is cut between sentences, none over the limit", () => {
  const long = "Short one. ".repeat(10) + "这是一句话。".repeat(5);
  const out = pieces(long, 40);
  assert.equal(out.join(""), long);
  for (const piece of out) assert.ok(piece.length <= 40, piece);
  assert.ok(out.length > 3);
});

test("nothing to read is no piece", () => {
  assert.deepEqual(pieces("\n\n  \n"), []);
});
