// An answer's citations (static/js/sources.js): each [n] that names one of
// its sources becomes a link to that passage; code, links and numbers past
// the sources stay as they are.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Window } from "happy-dom";

const window = new Window();
for (const name of ["localStorage", "document", "NodeFilter"]) {
  Object.defineProperty(globalThis, name, { value: window[name], configurable: true });
}
const { linkCitations } = await import("../../static/js/sources.js");
after(() => window.happyDOM.close());

const SOURCES = [{ n: 1 }, { n: 2 }];

function answer(html) {
  const root = window.document.createElement("div");
  root.innerHTML = html;
  linkCitations(root, SOURCES, "source-7-");
  return root;
}

test("each [n] of a source is a link to its passage", () => {
  const root = answer("<p>Two bar [1], and the valve is left [2][1].</p>");
  const links = [...root.querySelectorAll("a.cite")];
  assert.deepEqual(
    links.map((a) => [a.textContent, a.getAttribute("href")]),
    [
      ["[1]", "#source-7-1"],
      ["[2]", "#source-7-2"],
      ["[1]", "#source-7-1"],
    ],
  );
  assert.equal(root.textContent, "Two bar [1], and the valve is left [2][1].");
});

test("code, links and numbers past the sources are left alone", () => {
  const root = answer('<p>See [3].</p><pre><code>a[1]</code></pre><p><a href="#x">[2]</a> <code>[1]</code></p>');
  assert.equal(root.querySelectorAll("a.cite").length, 0);
  assert.equal(root.textContent, "See [3].a[1][2] [1]");
});
