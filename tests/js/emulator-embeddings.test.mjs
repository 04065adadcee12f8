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

// The vectors mean something, enough to test similarity thresholds (the rule
// is in ai.mjs and tools/emulator/README.md).
const similarity = (a, b) => dot(embedding(a, 1024), embedding(b, 1024));

test("the same text scores 1", () => {
  for (const text of ["How do I reset my password?", "边缘计算", "", "?!", "the"]) {
    assert.ok(Math.abs(similarity(text, text) - 1) < 1e-12, JSON.stringify(text));
  }
});

test("a paraphrase with the same content words scores 1, one with one word in nine different 0.94", () => {
  // Other fillers, another order, plurals and -ing: the same content words.
  assert.ok(similarity("How do I reset my password?", "Resetting passwords: how can I do it?") > 0.999);
  assert.ok(similarity("边缘计算是什么？", "什么是边缘计算") > 0.999);
  // "green" is the one content word of nine the second leaves out: 8/√72.
  const score = similarity(
    "Please explain how photosynthesis turns sunlight, water and carbon dioxide into sugar in green plants",
    "How does photosynthesis turn sunlight, water and carbon dioxide into sugar in plants?",
  );
  assert.ok(Math.abs(score - 8 / Math.sqrt(72)) < 1e-9, `${score}`);
  assert.ok(score >= 0.9);
  // One extra word in three: 2/√6, about 0.82.
  const shorter = similarity("What is the capital of France?", "What's the capital city of France?");
  assert.ok(Math.abs(shorter - 2 / Math.sqrt(6)) < 1e-9, `${shorter}`);
});

test("unrelated texts score about 0, and a negation is not a paraphrase", () => {
  const questions = [
    "How do I reset my password?",
    "What is the capital of France?",
    "Best recipe for chocolate chip cookies",
    "Explain quantum entanglement simply",
    "边缘计算",
    "edge computing",
    "Write a haiku about autumn leaves",
  ];
  for (const a of questions) {
    for (const b of questions) {
      if (a !== b) assert.ok(Math.abs(similarity(a, b)) <= 0.3, `${a} / ${b}: ${similarity(a, b)}`);
    }
  }
  assert.ok(similarity("Is it safe to eat raw eggs?", "Is it not safe to eat raw eggs?") < 0.9);
});
