// BGE-M3's embeddings: a unit vector per text, the same for the same text,
// `{shape, data, pooling}` as the binding answers; refusals and scripts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ai, MODELS, embedding } from "../../tools/emulator/ai.mjs";
import { memoryIo } from "./helpers.mjs";

const BGE = "@cf/baai/bge-m3";
const dot = (a, b) => a.reduce((sum, x, i) => sum + x * b[i], 0);

test("a vector per text, in order: 1,024 numbers of unit length, the same for the same text", async () => {
  const io = memoryIo();
  const ai = new Ai(io);
  const texts = ["边缘计算", "edge computing", "边缘计算"];
  const answer = await ai.run(BGE, { text: texts });
  assert.deepEqual(Object.keys(answer), ["shape", "data", "pooling"]);
  assert.deepEqual(answer.shape, [3, MODELS[BGE].dimensions]);
  assert.equal(answer.data.length, 3);
  for (const vector of answer.data) {
    assert.equal(vector.length, 1024);
    assert.ok(Math.abs(dot(vector, vector) - 1) < 1e-9);
  }
  assert.deepEqual(answer.data[0], answer.data[2]);
  assert.ok(dot(answer.data[0], answer.data[1]) < 0.5, "different texts, different vectors");
  assert.deepEqual(answer.data[1], embedding("edge computing", 1024));
  // One string is one text.
  assert.deepEqual((await ai.run(BGE, { text: "edge computing" })).data, [answer.data[1]]);
  assert.equal(io.log.length, 2);
  assert.equal(io.log[0].error, null);
});

test("anything but text (or a list of texts) is refused as the binding refuses it: 5006", async () => {
  const ai = new Ai(memoryIo());
  for (const inputs of [{}, { text: [] }, { text: [1, 2] }, { messages: [{ role: "user", content: "x" }] }]) {
    await assert.rejects(ai.run(BGE, inputs), /^Error: 5006: /);
  }
});

test("a script can make it fail or answer what it says", async () => {
  const io = memoryIo({
    script: {
      rules: [
        { match: { model: BGE }, times: 1, error: "3040: Capacity temporarily exceeded" },
        { match: { model: BGE }, json: { shape: [1, 2], data: [[0.5, 0.5]] } },
      ],
    },
  });
  const ai = new Ai(io);
  await assert.rejects(ai.run(BGE, { text: "x" }), /^Error: 3040: /);
  assert.deepEqual(await ai.run(BGE, { text: "x" }), { shape: [1, 2], data: [[0.5, 0.5]] });
});
