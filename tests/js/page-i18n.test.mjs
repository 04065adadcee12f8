// The page's strings (static/js/i18n.js): both languages say the same things,
// and every string static/index.html asks for exists.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, describe, test } from "node:test";
import { Window } from "happy-dom";
import { applyStrings, strings } from "../../static/js/i18n.js";

const window = new Window({ url: "https://edgechat.example/" });
after(() => window.happyDOM.close());

/** The shape of a strings table: each key with the type of its value, nested for objects. */
function shape(table) {
  return Object.fromEntries(
    Object.entries(table)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([key, value]) => [key, typeof value === "object" ? shape(value) : typeof value]),
  );
}

describe("strings", () => {
  test("English and Chinese have the same keys, with the same kinds of values", () => {
    assert.deepEqual(shape(strings("zh")), shape(strings("en")));
  });

  test("an unknown language falls back to English", () => {
    assert.equal(strings("fr"), strings("en"));
    assert.equal(strings(undefined), strings("en"));
  });

  test("messages with values fill them in", () => {
    for (const lang of ["en", "zh"]) {
      const t = strings(lang);
      assert.match(t.waitSeconds(30), /30/);
      assert.match(t.waitSeconds(600), /10/);
      const fallback = t.fallback("kimi", "glm");
      assert.ok(fallback.includes("kimi") && fallback.includes("glm"), fallback);
    }
  });
});

describe("applyStrings on the page", () => {
  const page = readFileSync(new URL("../../static/index.html", import.meta.url), "utf8");

  for (const lang of ["en", "zh"]) {
    test(`fills every marked element of index.html in ${lang}`, () => {
      const document = new window.DOMParser().parseFromString(page, "text/html");
      const marked = document.querySelectorAll("[data-i18n], [data-i18n-label], [data-i18n-placeholder]");
      assert.ok(marked.length > 0, "index.html marks no strings");
      const t = strings(lang);
      applyStrings(document, t);
      for (const node of document.querySelectorAll("[data-i18n]")) {
        assert.equal(typeof t[node.dataset.i18n], "string", node.dataset.i18n);
        assert.equal(node.textContent, t[node.dataset.i18n]);
      }
      for (const node of document.querySelectorAll("[data-i18n-label]")) {
        assert.equal(typeof t[node.dataset.i18nLabel], "string", node.dataset.i18nLabel);
        assert.equal(node.getAttribute("aria-label"), t[node.dataset.i18nLabel]);
      }
      for (const node of document.querySelectorAll("[data-i18n-placeholder]")) {
        assert.equal(typeof t[node.dataset.i18nPlaceholder], "string", node.dataset.i18nPlaceholder);
        assert.equal(node.placeholder, t[node.dataset.i18nPlaceholder]);
      }
    });
  }
});
