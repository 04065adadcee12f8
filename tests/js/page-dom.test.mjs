// The page's elements (static/js/dom.js): `ui.newChat` is #new-chat, looked up
// on first use, so a name the page's modules use must be an id of index.html.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { after, describe, test } from "node:test";
import { Window } from "happy-dom";

const window = new Window({ url: "https://edgechat.example/" });
after(() => window.happyDOM.close());
const read = (path) => readFileSync(new URL(`../../static/${path}`, import.meta.url), "utf8");
const page = new window.DOMParser().parseFromString(read("index.html"), "text/html");

describe("ui", () => {
  test("every ui.<name> in the page's modules is an element of index.html", () => {
    const names = new Set();
    for (const file of readdirSync(new URL("../../static/js/", import.meta.url))) {
      for (const [, name] of read(`js/${file}`).matchAll(/\bui\.([A-Za-z]+)/g)) names.add(name);
    }
    assert.ok(names.size > 30, [...names].join(" "));
    const kebab = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    for (const name of names) assert.ok(page.getElementById(kebab(name)), `ui.${name}: no #${kebab(name)}`);
  });

  test("looks up by id when first used, and keeps what it found", async () => {
    globalThis.document = window.document;
    const { ui } = await import("../../static/js/dom.js");
    // Built after the import: importing looked nothing up.
    window.document.body.innerHTML = '<button id="new-chat">New</button>';
    const first = ui.newChat;
    assert.equal(first.textContent, "New");
    window.document.body.innerHTML = '<button id="new-chat">Other</button>';
    assert.equal(ui.newChat, first);
    assert.equal(ui.noSuchThing, null);
  });
});
