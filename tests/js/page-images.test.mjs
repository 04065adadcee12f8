// Images and moderation on the page, the pure parts: the downscaling
// arithmetic (static/js/store.js), the limits an attachment must keep, the
// content parts a request carries (store.js), Llama Guard's category names
// (i18n.js) and what an export keeps of them (transfer.js).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { categoryNames, strings } from "../../static/js/i18n.js";
import { contentParts, fitCount, fitSize, MAX_SIDE, parseLimits, requestMessages } from "../../static/js/store.js";
import { parseImport, toJson } from "../../static/js/transfer.js";
import { addVersion } from "../../static/js/tree.js";

const LIMITS = {
  max_body_bytes: 65536,
  max_messages: 50,
  max_message_chars: 8000,
  max_total_chars: 32000,
  max_images: 4,
  max_image_bytes: 3 << 20,
};

describe("fitSize", () => {
  test("scales the long side down to 1,568 px, keeping the aspect", () => {
    assert.equal(MAX_SIDE, 1568);
    assert.deepEqual(fitSize(3000, 1000), { width: 1568, height: 523 });
    assert.deepEqual(fitSize(1000, 3000), { width: 523, height: 1568 });
    assert.deepEqual(fitSize(4032, 3024), { width: 1568, height: 1176 });
    assert.deepEqual(fitSize(2000, 2000), { width: 1568, height: 1568 });
  });

  test("never scales up, and never to nothing", () => {
    assert.deepEqual(fitSize(640, 480), { width: 640, height: 480 });
    assert.deepEqual(fitSize(1568, 10), { width: 1568, height: 10 });
    assert.deepEqual(fitSize(100000, 1), { width: 1568, height: 1 });
    assert.deepEqual(fitSize(10, 10, 4), { width: 4, height: 4 });
  });
});

describe("fitCount", () => {
  test("takes what fits beside the pending images", () => {
    assert.equal(fitCount(0, 3, LIMITS), 3);
    assert.equal(fitCount(0, 4, LIMITS), 4);
    assert.equal(fitCount(0, 5, LIMITS), 4);
    assert.equal(fitCount(3, 2, LIMITS), 1);
    assert.equal(fitCount(4, 1, LIMITS), 0);
  });

  test("without limits (they could not be read) takes everything", () => {
    assert.equal(fitCount(9, 9, null), 9);
  });
});

describe("contentParts", () => {
  test("a text part, then the images in order", () => {
    assert.deepEqual(contentParts("What is it?", ["data:image/jpeg;base64,AA==", "data:image/jpeg;base64,AQ=="]), [
      { type: "text", text: "What is it?" },
      { type: "image_url", image_url: { url: "data:image/jpeg;base64,AA==" } },
      { type: "image_url", image_url: { url: "data:image/jpeg;base64,AQ==" } },
    ]);
  });

  test("the text alone without images, and no empty text part with them", () => {
    assert.equal(contentParts("hi", []), "hi");
    assert.deepEqual(contentParts("  ", ["data:x"]), [{ type: "image_url", image_url: { url: "data:x" } }]);
  });
});

describe("requestMessages with images", () => {
  const url = (id) => `data:image/jpeg;base64,${id}`;
  const urls = new Map(["a", "b", "c", "d", "e"].map((id) => [id, url(id)]));
  const asked = (content, ...ids) => ({
    role: "user",
    content,
    images: ids.map((id) => ({ id, width: 1, height: 1 })),
  });
  const answer = (content) => ({ role: "assistant", content, status: "done" });

  test("images earlier in the conversation go again, as parts", () => {
    const out = requestMessages([asked("see", "a"), answer("a cat"), asked("and?")], LIMITS, urls);
    assert.deepEqual(out, [
      { role: "user", content: contentParts("see", [url("a")]) },
      { role: "assistant", content: "a cat" },
      { role: "user", content: "and?" },
    ]);
  });

  test("a question of images only is sent; an image this browser lost is left out", () => {
    assert.deepEqual(requestMessages([asked("", "a", "lost")], LIMITS, urls), [
      { role: "user", content: [{ type: "image_url", image_url: { url: url("a") } }] },
    ]);
    assert.deepEqual(requestMessages([asked("", "lost")], LIMITS, urls), []);
  });

  test("the oldest turns are left out when the conversation holds more than max_images", () => {
    const history = [asked("1", "a", "b"), answer("x"), asked("2", "c", "d"), answer("y"), asked("3", "e")];
    const out = requestMessages(history, LIMITS, urls);
    assert.deepEqual(
      out.map((m) => m.content[0].text ?? m.content),
      ["2", "y", "3"],
    );
    assert.equal(requestMessages(history, { ...LIMITS, max_images: 5 }, urls).length, 5);
  });

  test("image bytes do not count towards max_body_bytes (the server adds them to its cap)", () => {
    const big = new Map([["a", `data:image/jpeg;base64,${"A".repeat(100000)}`]]);
    const history = [asked("one", "a"), answer("x"), asked("two")];
    assert.equal(requestMessages(history, LIMITS, big).length, 3);
  });

  test("parseLimits keeps the image limits when the server sends them", () => {
    assert.deepEqual(parseLimits({ ...LIMITS, default_output_tokens: 1 }), LIMITS);
    const { max_images, max_image_bytes, ...older } = LIMITS;
    assert.deepEqual(parseLimits(older), older);
    assert.deepEqual(parseLimits({ ...LIMITS, max_images: 0 }), { ...older, max_image_bytes: 3 << 20 });
  });
});

describe("moderation", () => {
  test("categories are named in both languages, unknown codes as they are", () => {
    assert.equal(categoryNames(["S2"], strings("en")), "Non-violent crimes (S2)");
    assert.equal(
      categoryNames(["S1", "S10", "S14"], strings("en")),
      "Violent crimes (S1), Hate (S10), Code interpreter abuse (S14)",
    );
    assert.equal(categoryNames(["S2", "S11"], strings("zh")), "非暴力犯罪 (S2)、自杀与自残 (S11)");
    assert.equal(categoryNames(["S15", "x"], strings("en")), "S15, x");
    assert.equal(categoryNames([], strings("en")), "unsafe content");
    assert.equal(categoryNames(undefined, strings("zh")), "不安全内容");
    for (const lang of ["en", "zh"]) assert.equal(strings(lang).categories.length, 14);
  });

  test("an export keeps a verdict and a refusal's categories, and leaves images out", () => {
    const c = { id: "c1", title: "t", updated: 1, next: [], pick: 0 };
    const q = addVersion(c, { role: "user", content: "q", images: [{ id: "a", width: 1, height: 1 }] });
    addVersion(q, { role: "assistant", content: "a", status: "done", moderation: { safe: false, categories: ["S2"] } });
    const r = addVersion(c, { role: "user", content: "bad" });
    addVersion(r, {
      role: "assistant",
      content: "",
      status: "error",
      error: { code: "content_refused", status: 400, categories: ["S1"] },
    });
    const [back] = parseImport(toJson([c]));
    assert.equal(back.next[0].images, undefined);
    assert.deepEqual(back.next[0].next[0].moderation, { safe: false, categories: ["S2"] });
    assert.deepEqual(back.next[1].next[0].error.categories, ["S1"]);
  });

  test("an import refuses a verdict that is not one", () => {
    const file = (moderation) =>
      JSON.stringify({
        format: "edgechat",
        version: 1,
        conversations: [
          {
            id: "c",
            title: "",
            updated: 1,
            next: [{ role: "user", content: "q", next: [{ role: "assistant", content: "a", moderation }] }],
          },
        ],
      });
    assert.throws(() => parseImport(file({ safe: "no", categories: [] })), /moderation\.safe/);
    assert.throws(() => parseImport(file({ safe: false, categories: "S1" })), /moderation\.categories/);
    assert.throws(() => parseImport(file({ safe: true, extra: 1 })), /moderation\.extra/);
    assert.throws(() => parseImport(file({ safe: true })), /moderation\.categories/);
    const verdict = { safe: true, categories: [] };
    assert.deepEqual(parseImport(file(verdict))[0].next[0].next[0].moderation, verdict);
  });
});
