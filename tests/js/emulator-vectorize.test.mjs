// The emulator's Vectorize index (tools/emulator/vectorize.mjs): what the
// real binding answers, its limits and quirks, its asynchronous mutations,
// and the log tests read.
import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_TOP_K, LIMITS, Vectorize } from "../../tools/emulator/vectorize.mjs";

const DIMS = 1024;
const INDEXED = { kind: "string", owner: "string", base: "string", scope: "string" };

// A unit vector along axis `i`, or between axes i and j at `share` of j.
function axis(i, j = null, share = 0) {
  const v = new Array(DIMS).fill(0);
  v[i] = Math.sqrt(1 - share * share);
  if (j !== null) v[j] = share;
  return v;
}

function index(options = {}) {
  const log = [];
  const made = new Vectorize({ dimensions: DIMS, indexed: INDEXED, log: (r) => log.push(r), ...options });
  return { index: made, log };
}

const ids = (result) => result.matches.map((m) => m.id);

test("upsert, then query: nearest first, cosine scores, topK 5 by default, metadata only when asked", () => {
  const { index: vectors } = index();
  const mutation = vectors.upsert([
    { id: "a", values: axis(0), metadata: { kind: "chunk", owner: "u1", text: "alpha" } },
    { id: "b", values: axis(0, 1, 0.6) },
    { id: "c", values: axis(1) },
    ...Array.from({ length: 6 }, (_, n) => ({ id: `far${n}`, values: axis(10 + n) })),
  ]);
  assert.match(mutation.mutationId, /./);
  const found = vectors.query(axis(0));
  assert.equal(found.count, DEFAULT_TOP_K);
  assert.deepEqual(ids(found).slice(0, 3), ["a", "b", "c"]);
  assert.equal(found.matches[0].score, 1);
  assert.ok(Math.abs(found.matches[1].score - 0.8) < 1e-6, "cos between the axis and 0.8/0.6");
  assert.equal(found.matches[2].score, 0);
  assert.equal(found.matches[0].metadata, undefined, 'returnMetadata is "none" by default');
  assert.equal(found.matches[0].values, undefined);
  const withAll = vectors.query(axis(0), { topK: 1, returnMetadata: "all", returnValues: true });
  assert.deepEqual(withAll.matches[0].metadata, { kind: "chunk", owner: "u1", text: "alpha" });
  assert.equal(withAll.matches[0].values.length, DIMS);
  // "indexed": the indexed properties only.
  assert.deepEqual(vectors.query(axis(0), { topK: 1, returnMetadata: "indexed" }).matches[0].metadata, {
    kind: "chunk",
    owner: "u1",
  });
  // A boolean is taken as the binding takes it: true is "all".
  assert.ok(vectors.query(axis(0), { topK: 1, returnMetadata: true }).matches[0].metadata);
});

test("an upsert replaces the vector in full; values come back as float32", () => {
  const { index: vectors } = index();
  vectors.upsert([{ id: "a", values: axis(0, 1, 0.1), metadata: { kind: "chunk", owner: "u1" } }]);
  vectors.upsert([{ id: "a", values: axis(2), metadata: { kind: "answer" } }]);
  const [got] = vectors.getByIds(["a"]);
  assert.deepEqual(got.metadata, { kind: "answer" });
  assert.equal(got.values[2], 1);
  assert.equal(got.values[0], 0);
  vectors.upsert([{ id: "f", values: axis(0, 1, 0.1) }]);
  const [f] = vectors.getByIds(["f"]);
  assert.equal(f.values[1], Math.fround(0.1));
  assert.notEqual(f.values[1], 0.1);
});

test("insert keeps the vectors already there", () => {
  const { index: vectors } = index();
  vectors.upsert([{ id: "a", values: axis(0) }]);
  vectors.insert([
    { id: "a", values: axis(1) },
    { id: "b", values: axis(1) },
  ]);
  assert.deepEqual(
    vectors.getByIds(["a", "b"]).map((v) => v.values.indexOf(1)),
    [0, 1],
  );
});

test("namespaces: a query with one sees only its vectors; without one, every vector", () => {
  const { index: vectors } = index();
  vectors.upsert([
    { id: "u1", values: axis(0), namespace: "user-1" },
    { id: "u2", values: axis(0), namespace: "user-2" },
    { id: "none", values: axis(0) },
  ]);
  assert.deepEqual(ids(vectors.query(axis(0), { namespace: "user-1" })), ["u1"]);
  assert.deepEqual(ids(vectors.query(axis(0), { namespace: "nobody" })), []);
  assert.deepEqual(ids(vectors.query(axis(0))).sort(), ["none", "u1", "u2"]);
  assert.equal(vectors.getByIds(["u2"])[0].namespace, "user-2");
  assert.throws(() => vectors.query(axis(0), { namespace: "n".repeat(LIMITS.namespaceBytes + 1) }), /QUERY_ERROR/);
  assert.throws(
    () => vectors.upsert([{ id: "x", values: axis(0), namespace: "é".repeat(33) }]),
    /^Error: VECTOR_UPSERT_ERROR: namespace is over 64 bytes/,
  );
});

test("filters: implicit $eq and every operator, on indexed properties, before topK", () => {
  const { index: vectors } = index();
  vectors.upsert([
    { id: "a1", values: axis(0), metadata: { kind: "chunk", owner: "u1", base: "b1" } },
    { id: "a2", values: axis(0, 1, 0.1), metadata: { kind: "chunk", owner: "u1", base: "b2" } },
    { id: "b1", values: axis(0, 1, 0.2), metadata: { kind: "chunk", owner: "u2", base: "b3" } },
    { id: "c1", values: axis(0, 1, 0.3), metadata: { kind: "answer", owner: "u1" } },
    { id: "n", values: axis(0, 1, 0.4), metadata: { kind: "chunk" } },
  ]);
  const where = (filter, topK = 5) => ids(vectors.query(axis(0), { topK, filter }));
  assert.deepEqual(where({ owner: "u1" }), ["a1", "a2", "c1"]);
  assert.deepEqual(where({ owner: "u1", kind: "chunk" }), ["a1", "a2"], "several keys: AND");
  assert.deepEqual(where({ owner: { $eq: "u2" } }), ["b1"]);
  assert.deepEqual(where({ owner: { $ne: "u1" } }), ["b1"], "a vector without the property matches no operator");
  assert.deepEqual(where({ base: { $in: ["b1", "b3"] } }), ["a1", "b1"]);
  assert.deepEqual(where({ base: { $nin: ["b1"] } }), ["a2", "b1"]);
  assert.deepEqual(where({ base: { $lt: "b2" } }), ["a1"]);
  assert.deepEqual(where({ base: { $lte: "b2" } }), ["a1", "a2"]);
  assert.deepEqual(where({ base: { $gt: "b2" } }), ["b1"]);
  assert.deepEqual(where({ base: { $gte: "b2", $lt: "b3" } }), ["a2"]);
  // The filter first, then topK of what is left: the nearest vector overall
  // (a1) does not crowd out the others' matches.
  assert.deepEqual(where({ owner: "u2" }, 1), ["b1"]);
});

test("a filter on a property with no metadata index matches nothing, and the log names it", () => {
  const { index: vectors, log } = index();
  vectors.upsert([{ id: "a", values: axis(0), metadata: { kind: "chunk", text: "alpha", nested: { owner: "u1" } } }]);
  assert.deepEqual(ids(vectors.query(axis(0), { filter: { text: "alpha" } })), []);
  assert.deepEqual(ids(vectors.query(axis(0), { filter: { "nested.owner": "u1" } })), []);
  assert.deepEqual(log.at(-1).unindexed, ["nested.owner"]);
});

test("dotted filter keys reach nested metadata when that path is indexed", () => {
  const { index: vectors } = index({ indexed: { "doc.lang": "string", size: "number", live: "boolean" } });
  vectors.upsert([
    { id: "a", values: axis(0), metadata: { doc: { lang: "en" }, size: 10, live: true } },
    { id: "b", values: axis(0), metadata: { doc: { lang: "zh" }, size: "10", live: "true" } },
  ]);
  assert.deepEqual(ids(vectors.query(axis(0), { filter: { "doc.lang": "zh" } })), ["b"]);
  // An index has a type: a value of another type is not in it.
  assert.deepEqual(ids(vectors.query(axis(0), { filter: { size: { $gte: 10 } } })), ["a"]);
  assert.deepEqual(ids(vectors.query(axis(0), { filter: { live: true } })), ["a"]);
});

test("strings are indexed on their first 64 bytes", () => {
  const { index: vectors } = index();
  const long = `${"x".repeat(63)}é-and-more`; // é straddles byte 64: cut before it
  vectors.upsert([{ id: "a", values: axis(0), metadata: { owner: long } }]);
  assert.deepEqual(ids(vectors.query(axis(0), { filter: { owner: "x".repeat(63) } })), ["a"]);
  assert.deepEqual(ids(vectors.query(axis(0), { filter: { owner: `${"x".repeat(63)}é-other` } })), ["a"]);
});

test("refused filters: empty, too long, bad keys, bad operators or operands", () => {
  const { index: vectors } = index();
  for (const filter of [
    {},
    { owner: "x".repeat(LIMITS.filterBytes) },
    { "": "a" },
    { $owner: "a" },
    { 'ow"ner': "a" },
    { ["k".repeat(LIMITS.filterKeyChars + 1)]: "a" },
    { owner: { $regex: "a" } },
    { owner: { $in: "a" } },
    { owner: { $eq: ["a"] } },
    { owner: {} },
    { owner: ["a"] },
    [],
  ]) {
    assert.throws(() => vectors.query(axis(0), { filter }), /^Error: VECTOR_QUERY_ERROR: /, JSON.stringify(filter));
  }
});

test("topK: at most 100, and at most 20 with values or all metadata", () => {
  const { index: vectors } = index();
  vectors.upsert(Array.from({ length: 120 }, (_, n) => ({ id: `v${n}`, values: axis(n) })));
  assert.equal(vectors.query(axis(0), { topK: 100 }).count, 100);
  assert.equal(vectors.query(axis(0), { topK: 100, returnMetadata: "indexed" }).count, 100);
  assert.equal(vectors.query(axis(0), { topK: 20, returnMetadata: "all" }).count, 20);
  assert.throws(() => vectors.query(axis(0), { topK: 101 }), /topK 101 is over 100/);
  assert.throws(() => vectors.query(axis(0), { topK: 21, returnMetadata: "all" }), /topK 21 is over 20/);
  assert.throws(() => vectors.query(axis(0), { topK: 21, returnValues: true }), /topK 21 is over 20/);
  assert.throws(() => vectors.query(axis(0), { topK: 0 }), /topK/);
  assert.throws(() => vectors.query(axis(0), { returnMetadata: "some" }), /Invalid returnMetadata option/);
});

test("vectors: dimensions must match the index; ids, metadata and batches within the limits", () => {
  const { index: vectors, log } = index();
  const refused = (vector, pattern) => assert.throws(() => vectors.upsert([vector]), pattern);
  refused({ id: "a", values: [1, 2, 3] }, /^Error: VECTOR_UPSERT_ERROR: vector has 3 dimensions, the index has 1024$/);
  assert.throws(() => vectors.query([1, 2, 3]), /^Error: VECTOR_QUERY_ERROR: vector has 3 dimensions/);
  refused({ id: "a", values: axis(0).map(() => Number.NaN) }, /finite/);
  refused({ id: "", values: axis(0) }, /id/);
  refused({ id: "i".repeat(LIMITS.idBytes + 1), values: axis(0) }, /over 64 bytes/);
  refused({ id: "a", values: axis(0), metadata: { text: "t".repeat(LIMITS.metadataBytes) } }, /metadata .* over 10240 bytes/);
  for (const key of ["", "a.b", 'a"b', "$a"]) {
    refused({ id: "a", values: axis(0), metadata: { outer: { [key]: 1 } } }, /metadata key/);
  }
  assert.throws(
    () => vectors.upsert(Array.from({ length: LIMITS.upsertBatch + 1 }, (_, n) => ({ id: `${n}`, values: axis(0) }))),
    /1001 vectors in one batch, over 1000/,
  );
  // A Float32Array is taken as it is; the id's limit is in bytes.
  vectors.upsert([{ id: "é".repeat(32), values: Float32Array.from(axis(3)), metadata: { text: "t".repeat(10000) } }]);
  assert.equal(vectors.getByIds(["é".repeat(32)]).length, 1);
  assert.ok(log.some((r) => r.method === "upsert" && r.error?.includes("3 dimensions")), "refusals are logged");
});

test("getByIds and deleteByIds: missing ids are skipped, deletes apply like upserts", () => {
  const { index: vectors } = index();
  vectors.upsert([
    { id: "a", values: axis(0), metadata: { kind: "chunk" } },
    { id: "b", values: axis(1) },
  ]);
  assert.deepEqual(
    vectors.getByIds(["b", "zz", "a"]).map((v) => v.id),
    ["b", "a"],
  );
  assert.deepEqual(vectors.getByIds(["a"])[0].metadata, { kind: "chunk" });
  vectors.deleteByIds(["a", "zz"]);
  assert.deepEqual(vectors.getByIds(["a", "b"]).map((v) => v.id), ["b"]);
  assert.deepEqual(ids(vectors.query(axis(0))), ["b"]);
  assert.equal(vectors.describe().vectorCount, 1);
  assert.throws(() => vectors.deleteByIds("a"), /VECTOR_DELETE_ERROR/);
});

test("mutations show after the lag, in order, and each one's application is logged", async () => {
  const { index: vectors, log } = index({ lagMs: 30 });
  const first = vectors.upsert([{ id: "a", values: axis(0), metadata: { owner: "u1" } }]);
  const second = vectors.deleteByIds(["a"]);
  const third = vectors.upsert([{ id: "a", values: axis(1), metadata: { owner: "u2" } }]);
  assert.deepEqual(ids(vectors.query(axis(0))), [], "not queryable yet");
  assert.deepEqual(vectors.getByIds(["a"]), []);
  assert.equal(await vectors.applied(first.mutationId), first.mutationId);
  assert.deepEqual(ids(vectors.query(axis(0), { filter: { owner: "u1" } })), ["a"]);
  await vectors.settled();
  assert.deepEqual(vectors.getByIds(["a"])[0].metadata, { owner: "u2" });
  assert.equal(vectors.describe().processedUpToMutation, third.mutationId);
  const applied = log.filter((r) => r.event === "applied");
  assert.deepEqual(
    applied.map((r) => [r.mutationId, r.method, r.count, r.stored]),
    [
      [first.mutationId, "upsert", 1, 1],
      [second.mutationId, "deleteByIds", 1, 0],
      [third.mutationId, "upsert", 1, 1],
    ],
  );
  // Waiting for a mutation already applied returns at once.
  assert.equal(await vectors.applied(first.mutationId), first.mutationId);
});

test("the log: each call's method, namespace, filter, topK and ids", () => {
  const { index: vectors, log } = index({ now: () => 1234 });
  vectors.upsert([{ id: "a", values: axis(0), namespace: "n1" }]);
  vectors.query(axis(0), { topK: 3, namespace: "n1", filter: { owner: "u1" }, returnMetadata: "all" });
  vectors.getByIds(["a"]);
  vectors.deleteByIds(["a"]);
  assert.deepEqual(
    log.filter((r) => r.method && !r.event),
    [
      { method: "upsert", t_start: 1234, count: 1, ids: ["a"], namespaces: ["n1"], mutationId: "emulated-1", applied: false },
      {
        method: "query",
        t_start: 1234,
        topK: 3,
        returnMetadata: "all",
        returnValues: false,
        namespace: "n1",
        filter: { owner: "u1" },
        unindexed: [],
        matches: [],
      },
      { method: "getByIds", t_start: 1234, count: 1, ids: ["a"] },
      { method: "deleteByIds", t_start: 1234, count: 1, ids: ["a"], mutationId: "emulated-2", applied: false },
    ],
  );
});
