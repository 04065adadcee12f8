// Search across conversations (static/js/search.js): titles and message
// text, every version, case-insensitive, with the ranges to highlight.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { search } from "../../static/js/search.js";
import { addVersion } from "../../static/js/tree.js";

function chat(id, title, updated, ...turns) {
  const c = { id, title, updated, next: [], pick: 0 };
  let at = c;
  turns.forEach((content, k) => {
    at = addVersion(at, { role: k % 2 ? "assistant" : "user", content });
  });
  return c;
}

const marked = (r) => r.marks.map(([a, b]) => r.text.slice(a, b));

describe("search", () => {
  const kyoto = chat(
    "k",
    "Trip to Kyoto",
    3,
    "Plan a trip to Kyoto in spring",
    "Kyoto is lovely in April. Book early.",
  );
  const dumplings = chat("d", "Dumplings", 2, "Recipe for dumplings", "Use a thin wrapper. 饺子 need 面粉 and water.");
  const old = chat("o", "Old", 1, "Where is kyoto station?", "Near the centre.");

  test("a blank query finds nothing", () => {
    assert.deepEqual(search([kyoto], ""), []);
    assert.deepEqual(search([kyoto], "   "), []);
  });

  test("titles first, then messages, newest conversation first; case does not matter", () => {
    const results = search([old, dumplings, kyoto], "KYOTO");
    assert.deepEqual(
      results.map((r) => [r.conversation.id, r.node ? r.node.content.slice(0, 10) : "title"]),
      [
        ["k", "title"],
        ["k", "Plan a tri"],
        ["k", "Kyoto is l"],
        ["o", "Where is k"],
      ],
    );
    assert.deepEqual(marked(results[0]), ["Kyoto"]);
    assert.deepEqual(marked(results[1]), ["Kyoto"]);
    assert.deepEqual(marked(results[3]), ["kyoto"]);
  });

  test("answers, Chinese text, several words and every match in the snippet", () => {
    const [hit] = search([dumplings], "面粉");
    assert.equal(hit.node.role, "assistant");
    assert.deepEqual(marked(hit), ["面粉"]);
    const [spaced] = search([kyoto], "lovely   in");
    assert.deepEqual(marked(spaced), ["lovely in"]);
    const many = chat("m", "", 1, "ab ab ab");
    assert.deepEqual(marked(search([many], "ab")[0]), ["ab", "ab", "ab"]);
  });

  test("regular-expression characters are literal", () => {
    const code = chat("c", "", 1, "call f(x) and a.b*c");
    assert.deepEqual(marked(search([code], "f(x)")[0]), ["f(x)"]);
    assert.deepEqual(search([code], "a.c"), []);
    assert.deepEqual(marked(search([code], "b*c")[0]), ["b*c"]);
  });

  test("at most three messages per conversation", () => {
    const chatty = chat("x", "", 1, "tea 1", "tea 2", "tea 3", "tea 4", "tea 5");
    assert.deepEqual(
      search([chatty], "tea").map((r) => r.node.content),
      ["tea 1", "tea 2", "tea 3"],
    );
  });

  test("earlier versions are searched too", () => {
    const c = chat("v", "", 1, "first wording");
    addVersion(c, { role: "user", content: "second wording" });
    const [hit] = search([c], "first");
    assert.equal(hit.node.content, "first wording");
  });

  test("a long message gives a short snippet around the match, marks in place", () => {
    const long = chat("l", "", 1, `${"lorem ipsum ".repeat(40)}needle ${"dolor sit ".repeat(40)}`);
    const [hit] = search([long], "needle");
    assert.ok(hit.text.length < 140, hit.text);
    assert.ok(hit.text.startsWith("…") && hit.text.endsWith("…"));
    assert.deepEqual(marked(hit), ["needle"]);
  });
});
