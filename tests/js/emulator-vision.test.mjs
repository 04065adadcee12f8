// Vision models: they say honestly what they were sent (how many images, the
// type and size each one's own bytes declare); other models refuse images.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ai, IMAGE_TILE_PX, MODELS, countTokens, imageTokens } from "../../tools/emulator/ai.mjs";
import { GLM, KIMI, LLAMA, decodeAll, memoryIo, readChunks, sseParsed } from "./helpers.mjs";
import { dataUrl, gif, imagePart, jpeg, png, webpVp8, webpVp8l, webpVp8x } from "./image-fixtures.mjs";

const GLM_FLASH = "@cf/zai-org/glm-5.3-flash";
const LLAMA_VISION = "@cf/meta/llama-3.2-11b-vision-instruct";
const PARTS_MODELS = Object.keys(MODELS).filter((m) => MODELS[m].vision === "parts");

const withImages = (text, ...parts) => ({
  messages: [{ role: "user", content: [{ type: "text", text }, ...parts] }],
  chat_template_kwargs: { enable_thinking: false },
});

test("the catalog marks Kimi K2.6 and GLM 5.3 Flash as taking image parts, Llama 3.2 Vision a top-level image", () => {
  assert.deepEqual(PARTS_MODELS.sort(), [GLM_FLASH, KIMI].sort());
  assert.equal(MODELS[LLAMA_VISION].vision, "image");
  assert.equal(MODELS[LLAMA_VISION].format, "native");
  for (const m of [GLM, LLAMA, "@cf/zai-org/glm-5.3", "@cf/moonshotai/kimi-k2.7-code"]) {
    assert.equal(MODELS[m].vision, undefined, m);
  }
});

for (const model of PARTS_MODELS) {
  test(`${model}: the default answer names each image's type and size, read from its bytes`, async () => {
    const ai = new Ai(memoryIo());
    const inputs = withImages("what is this?", imagePart("image/png", png(640, 480)), imagePart("image/jpeg", jpeg(1568, 1176)));
    const r = await ai.run(model, inputs);
    assert.equal(
      r.choices[0].message.content,
      `This is the edgechat local Workers AI emulator, not a real model (${model}). ` +
        "I see 2 images: image/png 640×480, image/jpeg 1568×1176. You asked: «what is this?»",
    );
    // The stream says the same.
    const evs = sseParsed(decodeAll((await readChunks(await ai.run(model, { ...inputs, stream: true }))).map((c) => c.bytes)));
    const streamed = evs
      .filter((e) => e.choices?.[0]?.delta?.content !== undefined)
      .map((e) => e.choices[0].delta.content)
      .join("");
    assert.equal(streamed, r.choices[0].message.content);
  });
}

test("the type comes from the bytes, not from the data URL; WebP (three kinds) and GIF too; one image is singular", async () => {
  const ai = new Ai(memoryIo());
  const lying = { type: "image_url", image_url: { url: dataUrl("image/png", jpeg(30, 20)) } };
  const r = await ai.run(
    KIMI,
    withImages("x", lying, imagePart("image/webp", webpVp8(800, 600)), imagePart("image/webp", webpVp8l(5, 7)),
      imagePart("image/webp", webpVp8x(4000, 3000)), imagePart("image/gif", gif(1, 1))),
  );
  assert.match(
    r.choices[0].message.content,
    / I see 5 images: image\/jpeg 30×20, image\/webp 800×600, image\/webp 5×7, image\/webp 4000×3000, image\/gif 1×1\. /,
  );
  const one = await ai.run(GLM_FLASH, withImages("x", imagePart("image/png", png(2, 2))));
  assert.match(one.choices[0].message.content, / I see 1 image: image\/png 2×2\. You asked: «x»$/);
  // Images in earlier messages count as well (the conversation carries them).
  const history = await ai.run(KIMI, {
    messages: [
      { role: "user", content: [{ type: "text", text: "first" }, imagePart("image/png", png(10, 10))] },
      { role: "assistant", content: "a square" },
      { role: "user", content: [{ type: "text", text: "and this?" }, imagePart("image/gif", gif(3, 4))] },
    ],
  });
  assert.match(history.choices[0].message.content, / I see 2 images: image\/png 10×10, image\/gif 3×4\. You asked: «and this\?»$/);
});

test("images cost one prompt token per started 28×28 tile; text parts count as text", async () => {
  assert.equal(IMAGE_TILE_PX, 28);
  assert.equal(imageTokens({ width: 640, height: 480 }), 23 * 18);
  assert.equal(imageTokens({ width: 28, height: 28 }), 1);
  assert.equal(imageTokens({ width: 29, height: 1 }), 2);
  assert.equal(imageTokens({ width: 0, height: 0 }), 1);
  const ai = new Ai(memoryIo());
  const r = await ai.run(KIMI, withImages("what is this?", imagePart("image/png", png(640, 480)), imagePart("image/gif", gif(56, 30))));
  assert.equal(r.usage.prompt_tokens, countTokens("what is this?") + 2 + 23 * 18 + 2 * 2);
});

test("a model without vision given image parts throws 5006; so does Llama 3.2 Vision (it takes a top-level image)", async () => {
  const io = memoryIo();
  const ai = new Ai(io);
  const inputs = withImages("x", imagePart("image/png", png(1, 1)));
  for (const model of [GLM, "@cf/zai-org/glm-5.3", LLAMA]) {
    await assert.rejects(ai.run(model, inputs), (e) => {
      assert.match(e.message, new RegExp(`^5006: Error: ${model.replaceAll("/", "\\/").replaceAll(".", "\\.")} does not accept image input`));
      return true;
    });
  }
  await assert.rejects(ai.run(GLM, { ...inputs, stream: true }), /^Error: 5006: /);
  await assert.rejects(ai.run(LLAMA_VISION, inputs), /^Error: 5006: .*takes its image in the top-level `image`/);
  await assert.rejects(ai.run(KIMI, { prompt: "x", image: [...png(1, 1)] }), /^Error: 5006: .*does not take a top-level `image`/);
  assert.equal(io.log.length, 6);
  assert.ok(io.log.every((l) => l.error.startsWith("5006: ")));
});

test("an image that is not one (or not a base64 data URL) is a 5006 naming which", async () => {
  const ai = new Ai(memoryIo());
  const text = { type: "image_url", image_url: { url: dataUrl("image/png", new TextEncoder().encode("not an image")) } };
  await assert.rejects(
    ai.run(KIMI, withImages("x", imagePart("image/png", png(1, 1)), text)),
    /^Error: 5006: Error: invalid image input for @cf\/moonshotai\/kimi-k2\.6: image 2 is not a PNG, JPEG, WebP or GIF image$/,
  );
  const remote = { type: "image_url", image_url: { url: "https://example.com/cat.png" } };
  await assert.rejects(ai.run(KIMI, withImages("x", remote)), /image 1 is not a data: URL \(the emulator fetches nothing\)/);
  const notBase64 = { type: "image_url", image_url: { url: "data:image/png,%89PNG" } };
  await assert.rejects(ai.run(KIMI, withImages("x", notBase64)), /image 1 is not base64 data/);
});

test("a PNG signature without its IHDR (the hardening issue's image) is a 5006: the refusal edgechat answers for", async () => {
  const ai = new Ai(memoryIo());
  const headless = { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgoLoP4=" } };
  await assert.rejects(ai.run(KIMI, withImages("x", headless)), /^Error: 5006: .*image 1 is not a PNG, JPEG, WebP or GIF image$/);
});

test("Llama 3.2 Vision: a top-level image as byte values, as bytes or as base64, with string content", async () => {
  const ai = new Ai(memoryIo());
  const messages = [{ role: "user", content: "describe" }];
  const expected = `This is the edgechat local Workers AI emulator, not a real model (${LLAMA_VISION}). I see 1 image: image/jpeg 120×90. You asked: «describe»`;
  for (const image of [[...jpeg(120, 90)], jpeg(120, 90), Buffer.from(jpeg(120, 90)).toString("base64"), dataUrl("image/jpeg", jpeg(120, 90))]) {
    const r = await ai.run(LLAMA_VISION, { messages, image });
    assert.equal(r.response, expected);
    assert.equal(r.usage.prompt_tokens, 1 + 2 + 5 * 4);
  }
  const evs = sseParsed(
    decodeAll((await readChunks(await ai.run(LLAMA_VISION, { messages, image: [...jpeg(120, 90)], stream: true }))).map((c) => c.bytes)),
  );
  assert.equal(evs.slice(0, -2).map((e) => e.response).join(""), expected);
  // Without an image it answers text like Llama does.
  assert.match((await ai.run(LLAMA_VISION, { messages })).response, /\(@cf\/meta\/llama-3\.2-11b-vision-instruct\)\. You asked: «describe»$/);
  await assert.rejects(ai.run(LLAMA_VISION, { messages, image: [1, 2, 300] }), /^Error: 5006: .*`image` is not base64 data/);
  await assert.rejects(ai.run(LLAMA_VISION, { messages, image: [1, 2, 3] }), /^Error: 5006: .*`image` is not a PNG, JPEG, WebP or GIF image/);
});

test("scripts still apply to vision calls (rules are picked after the images are read)", async () => {
  const io = memoryIo({
    script: { rules: [{ match: { model: KIMI, contains: "busy" }, error: "3040: Capacity temporarily exceeded" }, { match: { contains: "cat" }, reply: { content: "A cat." } }] },
  });
  const ai = new Ai(io);
  await assert.rejects(ai.run(KIMI, withImages("busy", imagePart("image/png", png(1, 1)))), /^Error: 3040: /);
  const r = await ai.run(GLM_FLASH, withImages("a cat?", imagePart("image/png", png(640, 480))));
  assert.equal(r.choices[0].message.content, "A cat.");
  assert.equal(r.usage.prompt_tokens, 2 + 2 + 23 * 18);
  // The log keeps the inputs as sent, images included.
  assert.equal(io.log[1].inputs.messages[0].content[1].type, "image_url");
});
