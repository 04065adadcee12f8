// edgechat's local stand-in for a Vectorize index binding (`env.VECTORS`):
// Vectorize has no local simulation in wrangler (its bindings always access
// remote resources), so `npm start` binds VECTORS to this, in the emulator
// Worker (worker.mjs, `EmulatedVectorize`).
//
// `new Vectorize(options)` answers like the binding does
// (https://developers.cloudflare.com/vectorize/reference/client-api/):
// `upsert`, `insert`, `query`, `getByIds`, `deleteByIds`, `describe`, with the
// index's limits and quirks, each cited beside its rule. Its refusals are
// thrown as the binding throws them (workerd's src/cloudflare/internal/
// vectorize-api.ts): `Error("VECTOR_<OPERATION>_ERROR: <message>")`.
//
// Only web-platform APIs are used (TextEncoder, setTimeout, Promise), so the
// same file runs in Node and inside workerd. The store is this object's
// memory: it lives as long as the object (the emulator Worker's isolate).
//
// Options:
//   dimensions   the index's (1024: bge-m3's vectors)
//   indexed      {property: "string" | "number" | "boolean"}: its metadata indexes
//   lagMs        how long a mutation takes to show in queries (0: at once)
//   log(record)  records each call, and each mutation once it is applied
//   now()        epoch ms (defaults to Date.now)

/** https://developers.cloudflare.com/vectorize/platform/limits/ (Vectorize v2 indexes). */
export const LIMITS = Object.freeze({
  // "Maximum dimensions per vector: 1536"; an index has one dimension count,
  // and "the length of this array must match the dimensions configured on the
  // index" (client-api, Vectors).
  maxDimensions: 1536,
  // "Maximum vector ID length: 64 bytes".
  idBytes: 64,
  // "Metadata per vector: 10KiB".
  metadataBytes: 10 * 1024,
  // "Maximum returned results (topK) with values or metadata: 20"; "without
  // values and metadata: 100" (client-api, topK: 20 with returnValues true or
  // returnMetadata "all").
  topK: 100,
  topKWithValuesOrMetadata: 20,
  // "Maximum upsert batch size (per batch): 1000 (Workers)".
  upsertBatch: 1000,
  // "Maximum namespace name length: 64 bytes".
  namespaceBytes: 64,
  // "Maximum metadata indexes per Vectorize index: 10".
  metadataIndexes: 10,
  // "Maximum indexed data per metadata index per vector: 64 bytes"; a string
  // is indexed on its first 64 bytes, cut on a UTF-8 character boundary
  // (reference/metadata-filtering, Metadata indexes).
  indexedBytes: 64,
  // "filter must be non-empty object whose compact JSON representation must
  // be less than 2048 bytes"; keys "cannot be empty, contain `"` ..., start
  // with `$`, or be longer than 512 characters" (reference/metadata-filtering).
  filterBytes: 2048,
  filterKeyChars: 512,
});

/** topK when the query gives none (client-api: "topK (default: 5)"). */
export const DEFAULT_TOP_K = 5;

// The operators a filter may use: $eq and $ne (reference/metadata-filtering,
// Supported operations), $in/$nin and the ranges (the binding's own types,
// @cloudflare/workers-types `VectorizeVectorMetadataFilter`).
const SCALAR_OPERATORS = new Set(["$eq", "$ne", "$lt", "$lte", "$gt", "$gte"]);
const LIST_OPERATORS = new Set(["$in", "$nin"]);

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const bytesOf = (text) => encoder.encode(text).length;

// A string as a metadata index keeps it: its first 64 bytes, cut back to the
// last whole UTF-8 character.
function indexedString(text) {
  const bytes = encoder.encode(text);
  if (bytes.length <= LIMITS.indexedBytes) return text;
  let end = LIMITS.indexedBytes;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end -= 1;
  return decoder.decode(bytes.subarray(0, end));
}

const isScalar = (v) => v === null || ["string", "number", "boolean"].includes(typeof v);
const isPlainObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v) && !ArrayBuffer.isView(v);

function refuse(operation, message) {
  return new Error(`VECTOR_${operation}_ERROR: ${message}`);
}

/**
 * Metadata keys "cannot be empty, contain the dot character (.), contain the
 * double-quote character ("), or start with the dollar character ($)"
 * (best-practices/insert-vectors, Metadata), at every depth.
 */
function checkMetadataKeys(value, operation, path = "") {
  if (!isPlainObject(value)) return;
  for (const [key, inner] of Object.entries(value)) {
    if (key === "" || key.includes(".") || key.includes('"') || key.startsWith("$")) {
      throw refuse(
        operation,
        `metadata key ${JSON.stringify(path + key)} is not allowed (empty, ".", '"' or a leading "$")`,
      );
    }
    checkMetadataKeys(inner, operation, `${path}${key}.`);
  }
}

function checkValues(values, dimensions, operation) {
  const list =
    Array.isArray(values) || values instanceof Float32Array || values instanceof Float64Array ? values : null;
  if (list === null) throw refuse(operation, "values must be an array of numbers, a Float32Array or a Float64Array");
  if (list.length !== dimensions) {
    throw refuse(operation, `vector has ${list.length} dimensions, the index has ${dimensions}`);
  }
  for (const v of list) {
    if (typeof v !== "number" || !Number.isFinite(v)) throw refuse(operation, "values must be finite numbers");
  }
  // "Vectorize stores and restitutes vector dimensions as Float32"
  // (best-practices/insert-vectors, Supported vector formats).
  return Array.from(list, Math.fround);
}

function checkNamespace(namespace, operation) {
  if (namespace === undefined) return undefined;
  if (typeof namespace !== "string") throw refuse(operation, "namespace must be a string");
  if (bytesOf(namespace) > LIMITS.namespaceBytes) {
    throw refuse(operation, `namespace is over ${LIMITS.namespaceBytes} bytes`);
  }
  return namespace;
}

function checkIds(ids, operation) {
  if (!Array.isArray(ids)) throw refuse(operation, "ids must be an array of strings");
  for (const id of ids) {
    if (typeof id !== "string") throw refuse(operation, "ids must be strings");
  }
  return ids;
}

function cosine(a, b, normB) {
  let dot = 0;
  let normA = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    normA += a[i] * a[i];
  }
  const norms = Math.sqrt(normA) * normB;
  return norms === 0 ? 0 : dot / norms;
}

const norm = (values) => Math.sqrt(values.reduce((sum, v) => sum + v * v, 0));

function compare(have, operator, want) {
  switch (operator) {
    case "$eq":
      return have === want;
    case "$ne":
      return have !== want;
    case "$in":
      return want.includes(have);
    case "$nin":
      return !want.includes(have);
    case "$lt":
      return want !== null && have < want;
    case "$lte":
      return want !== null && have <= want;
    case "$gt":
      return want !== null && have > want;
    case "$gte":
      return want !== null && have >= want;
    default:
      return false;
  }
}

export class Vectorize {
  #dimensions;
  #indexed;
  #lagMs;
  #log;
  #now;
  #vectors = new Map(); // id -> {id, values, norm, namespace?, metadata?}
  #pending = []; // [{mutationId, due, apply, applied: Promise, resolve}]
  #mutations = 0;
  #processedUpTo = null;

  constructor({ dimensions = 1024, indexed = {}, lagMs = 0, log = () => {}, now = () => Date.now() } = {}) {
    if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > LIMITS.maxDimensions) {
      throw new Error(`an index has 1 to ${LIMITS.maxDimensions} dimensions, not ${dimensions}`);
    }
    if (Object.keys(indexed).length > LIMITS.metadataIndexes) {
      throw new Error(`an index has at most ${LIMITS.metadataIndexes} metadata indexes`);
    }
    this.#dimensions = dimensions;
    this.#indexed = { ...indexed };
    this.#lagMs = lagMs;
    this.#log = log;
    this.#now = now;
  }

  // --- mutations: asynchronous, as the real index's ---------------------------
  // "Vectorize upserts are asynchronous and the upsert operation returns a
  // mutation identifier unique for that operation. It typically takes a few
  // seconds for upserted vectors to be available for querying" (client-api,
  // Upsert vectors; the same for inserts and deletes). Here a mutation shows
  // after `lagMs`, in the order the mutations were made; `applied(id)` says
  // when.

  #mutate(operation, record, apply) {
    this.#mutations += 1;
    const mutationId = `emulated-${this.#mutations}`;
    let resolve;
    const applied = new Promise((r) => {
      resolve = r;
    });
    this.#pending.push({ mutationId, apply, applied, resolve, operation, count: record.count });
    this.#log({ ...record, mutationId, applied: false });
    if (this.#lagMs <= 0) this.#applyUpTo(mutationId);
    else setTimeout(() => this.#applyUpTo(mutationId), this.#lagMs);
    return { mutationId };
  }

  #applyUpTo(mutationId) {
    while (this.#pending.length > 0) {
      const mutation = this.#pending.shift();
      mutation.apply();
      this.#processedUpTo = mutation.mutationId;
      this.#log({
        event: "applied",
        t: this.#now(),
        method: mutation.operation,
        mutationId: mutation.mutationId,
        count: mutation.count,
        stored: this.#vectors.size,
      });
      mutation.resolve(mutation.mutationId);
      if (mutation.mutationId === mutationId) return;
    }
  }

  /** Resolves once mutation `mutationId` shows in queries (at once if it already does). */
  applied(mutationId) {
    const waiting = this.#pending.find((m) => m.mutationId === mutationId);
    return waiting ? waiting.applied : Promise.resolve(mutationId);
  }

  /** Resolves once every mutation made so far shows in queries. */
  settled() {
    const last = this.#pending.at(-1);
    return last ? last.applied : Promise.resolve(this.#processedUpTo);
  }

  #checkVectors(vectors, operation) {
    if (!Array.isArray(vectors)) throw refuse(operation, "vectors must be an array");
    if (vectors.length > LIMITS.upsertBatch) {
      throw refuse(operation, `${vectors.length} vectors in one batch, over ${LIMITS.upsertBatch}`);
    }
    return vectors.map((vector) => {
      if (!isPlainObject(vector))
        throw refuse(operation, "each vector must be an object {id, values, namespace?, metadata?}");
      const { id, metadata } = vector;
      if (typeof id !== "string" || id === "") throw refuse(operation, "a vector id must be a non-empty string");
      if (bytesOf(id) > LIMITS.idBytes) throw refuse(operation, `vector id over ${LIMITS.idBytes} bytes`);
      const values = checkValues(vector.values, this.#dimensions, operation);
      const namespace = checkNamespace(vector.namespace, operation);
      const kept = { id, values, norm: norm(values) };
      if (namespace !== undefined) kept.namespace = namespace;
      if (metadata !== undefined && metadata !== null) {
        if (!isPlainObject(metadata)) throw refuse(operation, "metadata must be an object");
        checkMetadataKeys(metadata, operation);
        const text = JSON.stringify(metadata);
        if (bytesOf(text) > LIMITS.metadataBytes) {
          throw refuse(operation, `metadata of vector ${JSON.stringify(id)} is over ${LIMITS.metadataBytes} bytes`);
        }
        kept.metadata = JSON.parse(text);
      }
      return kept;
    });
  }

  // One mutation call: its checks (a refused call is logged with its error),
  // its record, and the change it makes once applied.
  #mutation(method, check, change) {
    const t = this.#now();
    let kept;
    try {
      kept = check();
    } catch (err) {
      this.#log({ method, t_start: t, error: err.message });
      throw err;
    }
    const ids = kept.map((v) => (typeof v === "string" ? v : v.id));
    const record = { method, t_start: t, count: ids.length, ids };
    if (method !== "deleteByIds") record.namespaces = [...new Set(kept.map((v) => v.namespace ?? null))];
    return this.#mutate(method, record, () => change(kept));
  }

  upsert(vectors) {
    // "the upserted vector replaces the existing vector in full" (client-api).
    return this.#mutation(
      "upsert",
      () => this.#checkVectors(vectors, "UPSERT"),
      (kept) => {
        for (const vector of kept) this.#vectors.set(vector.id, vector);
      },
    );
  }

  insert(vectors) {
    // "only the vectors with new IDs will be inserted" (client-api).
    return this.#mutation(
      "insert",
      () => this.#checkVectors(vectors, "INSERT"),
      (kept) => {
        for (const vector of kept) if (!this.#vectors.has(vector.id)) this.#vectors.set(vector.id, vector);
      },
    );
  }

  deleteByIds(ids) {
    return this.#mutation(
      "deleteByIds",
      () => [...checkIds(ids, "DELETE")],
      (gone) => {
        for (const id of gone) this.#vectors.delete(id);
      },
    );
  }

  // --- reads -------------------------------------------------------------------

  /** "Retrieves the specified vectors by their ID, including values and metadata" (client-api). */
  getByIds(ids) {
    const t = this.#now();
    let wanted;
    try {
      wanted = checkIds(ids, "GET");
    } catch (err) {
      this.#log({ method: "getByIds", t_start: t, error: err.message });
      throw err;
    }
    this.#log({ method: "getByIds", t_start: t, count: wanted.length, ids: [...wanted] });
    return wanted.filter((id) => this.#vectors.has(id)).map((id) => this.#shown(this.#vectors.get(id), true, "all"));
  }

  query(vector, options = {}) {
    const opts = options ?? {};
    const topK = opts.topK ?? DEFAULT_TOP_K;
    // returnMetadata: "none" (the default), "indexed" or "all"; a boolean is
    // taken for true → "all", false → "none" (vectorize-api.ts, queryImplV2).
    let returnMetadata = opts.returnMetadata ?? "none";
    if (typeof returnMetadata === "boolean") returnMetadata = returnMetadata ? "all" : "none";
    const returnValues = opts.returnValues === true;
    const record = {
      method: "query",
      t_start: this.#now(),
      topK,
      returnMetadata,
      returnValues,
      namespace: opts.namespace ?? null,
      filter: opts.filter ?? null,
    };
    try {
      if (!["none", "indexed", "all"].includes(returnMetadata)) {
        throw new Error(
          `Invalid returnMetadata option. Expected: true, false, "none", "indexed" or "all"; got: ${opts.returnMetadata}`,
        );
      }
      const values = checkValues(vector, this.#dimensions, "QUERY");
      const namespace = checkNamespace(opts.namespace, "QUERY");
      if (!Number.isInteger(topK) || topK < 1) throw refuse("QUERY", "topK must be a whole number, at least 1");
      const most = returnValues || returnMetadata === "all" ? LIMITS.topKWithValuesOrMetadata : LIMITS.topK;
      if (topK > most) {
        throw refuse(
          "QUERY",
          `topK ${topK} is over ${most}${most === LIMITS.topK ? "" : ' with returnValues or returnMetadata "all"'}`,
        );
      }
      const filter = opts.filter === undefined || opts.filter === null ? null : this.#checkFilter(opts.filter);
      record.unindexed = filter ? filter.filter((c) => !(c.key in this.#indexed)).map((c) => c.key) : [];
      // The namespace first, then the filter, then topK of what is left:
      // "A namespace filter is applied before metadata filter(s)"; "filter is
      // applied first, and the topK results are taken from the filtered set"
      // (reference/metadata-filtering). Without a namespace, every vector is
      // a candidate (a namespace partitions the index only when asked for).
      const candidates = [];
      for (const stored of this.#vectors.values()) {
        if (namespace !== undefined && stored.namespace !== namespace) continue;
        if (filter && !filter.every((c) => this.#satisfies(stored, c))) continue;
        candidates.push({ stored, score: cosine(values, stored.values, stored.norm) });
      }
      candidates.sort((a, b) => b.score - a.score || (a.stored.id < b.stored.id ? -1 : 1));
      const matches = candidates
        .slice(0, topK)
        .map(({ stored, score }) => ({ ...this.#shown(stored, returnValues, returnMetadata), score }));
      record.matches = matches.map((m) => m.id);
      this.#log(record);
      return { count: matches.length, matches };
    } catch (err) {
      this.#log({ ...record, error: err.message });
      throw err;
    }
  }

  describe() {
    return {
      dimensions: this.#dimensions,
      vectorCount: this.#vectors.size,
      processedUpToMutation: this.#processedUpTo,
      processedUpToDatetime: null,
    };
  }

  #shown(stored, withValues, returnMetadata) {
    const shown = { id: stored.id };
    if (stored.namespace !== undefined) shown.namespace = stored.namespace;
    if (withValues) shown.values = [...stored.values];
    if (returnMetadata === "all" && stored.metadata) shown.metadata = structuredClone(stored.metadata);
    if (returnMetadata === "indexed" && stored.metadata) {
      // "indexed: Fetched metadata only for the indexed metadata fields ...
      // long text fields may be truncated" (client-api, returnMetadata).
      const indexed = {};
      for (const key of Object.keys(this.#indexed)) {
        const value = this.#indexedValue(stored, key);
        if (value !== undefined) indexed[key] = value;
      }
      shown.metadata = indexed;
    }
    return shown;
  }

  // The value a metadata index holds for a vector: none when the property is
  // absent or of another type than the index's (a vector is in a string
  // index only through a string).
  #indexedValue(stored, key) {
    const type = this.#indexed[key];
    if (type === undefined) return undefined;
    let value = stored.metadata;
    for (const part of key.split(".")) value = isPlainObject(value) ? value[part] : undefined;
    if (typeof value !== type) return undefined;
    return type === "string" ? indexedString(value) : value;
  }

  #checkFilter(filter) {
    if (!isPlainObject(filter) || Object.keys(filter).length === 0) {
      throw refuse("QUERY", "filter must be a non-empty object");
    }
    if (bytesOf(JSON.stringify(filter)) >= LIMITS.filterBytes) {
      throw refuse("QUERY", `filter is ${LIMITS.filterBytes} bytes or more as compact JSON`);
    }
    const conditions = [];
    for (const [key, condition] of Object.entries(filter)) {
      // Dots in a filter's key name a nested property ("pandas.nice").
      if (key === "" || key.includes('"') || key.startsWith("$") || key.length > LIMITS.filterKeyChars) {
        throw refuse("QUERY", `filter key ${JSON.stringify(key)} is not allowed`);
      }
      if (isScalar(condition)) {
        // The implicit $eq; a string is compared as the index keeps it.
        conditions.push({
          key,
          operator: "$eq",
          want: typeof condition === "string" ? indexedString(condition) : condition,
        });
        continue;
      }
      if (!isPlainObject(condition) || Object.keys(condition).length === 0) {
        throw refuse(
          "QUERY",
          `filter value of ${JSON.stringify(key)} must be a string, number, boolean, null or {operator: value}`,
        );
      }
      for (const [operator, want] of Object.entries(condition)) {
        if (SCALAR_OPERATORS.has(operator) && isScalar(want)) {
          conditions.push({ key, operator, want: typeof want === "string" ? indexedString(want) : want });
        } else if (
          LIST_OPERATORS.has(operator) &&
          Array.isArray(want) &&
          want.every((w) => isScalar(w) && w !== null)
        ) {
          conditions.push({ key, operator, want: want.map((w) => (typeof w === "string" ? indexedString(w) : w)) });
        } else {
          throw refuse("QUERY", `unsupported filter operator or operand ${JSON.stringify({ [operator]: want })}`);
        }
      }
    }
    return conditions;
  }

  // Filtering reads the metadata indexes only: "to filter on another metadata
  // property of your vectors, you'll need to create a metadata index", and a
  // vector not in an index is not filterable on it ("Vectors upserted before a
  // metadata index was created won't have their metadata contained in that
  // index"; reference/metadata-filtering). So a condition on a property with
  // no index, or on a vector without the property, matches nothing (not even
  // $ne or $nin); the query log names such properties (`unindexed`).
  #satisfies(stored, { key, operator, want }) {
    const have = this.#indexedValue(stored, key);
    if (have === undefined) return false;
    return compare(have, operator, want);
  }
}
