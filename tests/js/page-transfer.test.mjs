// Export and import (static/js/transfer.js): an export reads back as the same
// conversations; a broken or hostile file is refused whole, naming where.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  fileName,
  IMPORT_TEXT,
  ImportError,
  MAX_IMPORT_BYTES,
  MAX_JSON_DEPTH,
  parseImport,
  toJson,
  toMarkdown,
} from "../../static/js/transfer.js";
import { addVersion, thread } from "../../static/js/tree.js";

function conversation() {
  const c = { id: "c1", title: "Fruit: apples & pears", updated: 1764547200000, next: [], pick: 0 };
  const q = addVersion(c, { role: "user", content: "Tell me about apples" });
  addVersion(q, { role: "assistant", content: "First answer", status: "done" });
  const a = addVersion(q, {
    role: "assistant",
    content: "Apples are **pomes**.\n\n```py\nprint('hi')\n```",
    reasoning: "think",
    status: "done",
    stats: {
      model: "@cf/x",
      ttft_ms: 40,
      // cached_tokens: of the prompt, what the prompt cache served (done.usage).
      usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8, cached_tokens: 2 },
      cost_usd: 0.0001,
      tps: 12.5,
      // From the semantic cache: the similar question's score and text (done.cached).
      similar: { score: 0.96, question: "Apples?" },
      // A knowledge base's passages the answer cites as [1] (done.sources).
      sources: [
        {
          n: 1,
          base: "b1",
          document: "d1",
          name: "fruit.md",
          chunk: 3,
          id: "d1:3",
          score: 0.83,
          text: "Apples are pomes.",
        },
      ],
    },
  });
  addVersion(a, { role: "user", content: "And pears?" });
  addVersion(thread(c)[2], {
    role: "assistant",
    content: "",
    status: "error",
    error: { code: "model_busy", retryable: true },
    // A comparison's answer, failed: it keeps its comparison (compare.js).
    stats: { comparison: { id: "Jq0c_-aaaaaaaaaaaaaaaaaa", slot: 1, blind: true } },
  });
  return c;
}

/** The export's text with `change` applied to its parsed data. */
function changed(change) {
  const data = JSON.parse(toJson([conversation()]));
  change(data);
  return JSON.stringify(data);
}

function refused(text, code, path) {
  assert.throws(
    () => parseImport(text),
    (error) => error instanceof ImportError && error.code === code && (path === undefined || error.path === path),
    `${text.slice(0, 80)} → ${code} ${path ?? ""}`,
  );
}

describe("export", () => {
  test("JSON reads back as the same tree, versions and all", () => {
    const original = conversation();
    const text = toJson([original], new Date("2026-12-01T10:00:00Z"));
    const data = JSON.parse(text);
    assert.equal(data.format, "edgechat");
    assert.equal(data.version, 1);
    assert.equal(data.exported, "2026-12-01T10:00:00.000Z");
    const [back] = parseImport(text);
    assert.deepEqual(back, JSON.parse(JSON.stringify(original)));
    assert.deepEqual(
      thread(back).map((m) => m.content),
      thread(original).map((m) => m.content),
    );
  });

  test("an answer still streaming is exported as cut off", () => {
    const c = conversation();
    thread(c)[3].status = "streaming";
    const [back] = parseImport(toJson([c]));
    assert.equal(thread(back)[3].status, "interrupted");
  });

  test("the preset a conversation follows goes out and comes back; a bad one is refused", () => {
    const c = { ...conversation(), preset: "translator" };
    const [back] = parseImport(toJson([c]));
    assert.equal(back.preset, "translator");
    assert.equal(parseImport(toJson([conversation()]))[0].preset, undefined);
    const bad = toJson([c]).replace('"preset": "translator"', '"preset": 7');
    assert.throws(() => parseImport(bad), /preset/);
  });

  test("Markdown is the thread on screen, with the roles as headings", () => {
    assert.equal(
      toMarkdown(conversation()),
      "# Fruit: apples & pears\n\n## You\n\nTell me about apples\n\n## Assistant\n\nApples are **pomes**.\n\n```py\nprint('hi')\n```\n\n## You\n\nAnd pears?\n\n## Assistant\n\n…\n",
    );
    assert.match(toMarkdown(conversation(), { user: "你", assistant: "助手" }), /## 你\n\nTell me/);
  });

  test("file names say what and when", () => {
    const day = new Date("2026-12-01T10:00:00Z");
    assert.equal(fileName("Fruit: apples & pears", "md", day), "edgechat-fruit-apples-pears-2026-12-01.md");
    assert.equal(fileName("你好 世界", "json", day), "edgechat-你好-世界-2026-12-01.json");
    assert.equal(fileName("../../etc/passwd", "json", day), "edgechat-etc-passwd-2026-12-01.json");
    assert.equal(fileName("", "json", day), "edgechat-2026-12-01.json");
  });
});

describe("import refuses, whole", () => {
  test("each refusal has its words in each language, with the path and limit filled in", () => {
    for (const lang of ["en", "zh"]) {
      const { refused, imported } = IMPORT_TEXT[lang];
      assert.deepEqual(Object.keys(refused).sort(), ["depth", "field", "format", "json", "size", "storage"]);
      const deep = refused.depth("$.x[0]", 32);
      assert.ok(deep.includes("$.x[0]") && deep.includes("32"), deep);
      assert.ok(refused.field("$.a").includes("$.a"));
      assert.match(imported(3), /3/);
    }
  });

  test("a file over the size cap", () => {
    const valid = toJson([conversation()]);
    assert.throws(
      () => parseImport(valid, valid.length - 1),
      (error) => error instanceof ImportError && error.code === "size",
    );
    assert.equal(parseImport(valid, valid.length).length, 1);
    // Counted in UTF-8 bytes, not characters.
    assert.throws(
      () => parseImport(`"${"中".repeat(40)}"`, 100),
      (error) => error.code === "size",
    );
  });

  test("text that is not JSON, or JSON that is not an export", () => {
    refused("{not json", "json");
    refused("", "json");
    for (const text of [
      "null",
      "[]",
      "42",
      '"edgechat"',
      '{"format": "other", "version": 1, "conversations": []}',
      '{"format": "edgechat", "version": 2, "conversations": []}',
    ]) {
      refused(text, "format");
    }
  });

  test("unknown keys anywhere, __proto__ included", () => {
    refused(
      changed((d) => (d.extra = 1)),
      "field",
      "$.extra",
    );
    refused(
      changed((d) => (d.conversations[0].owner = "me")),
      "field",
      "$.conversations[0].owner",
    );
    refused(
      changed((d) => (d.conversations[0].next[0].html = "<b>")),
      "field",
      "$.conversations[0].next[0].html",
    );
    refused(
      changed((d) => (d.conversations[0].next[0].next[1].stats.extra = 1)),
      "field",
      "$.conversations[0].next[0].next[1].stats.extra",
    );
    const proto = toJson([conversation()]).replace('"role": "user"', '"__proto__": {"polluted": true}, "role": "user"');
    refused(proto, "field", "$.conversations[0].next[0].__proto__");
    assert.equal({}.polluted, undefined);
    // A key from the file is named, but never at length.
    const long = changed((d) => (d.conversations[0]["k".repeat(500)] = 1));
    assert.throws(
      () => parseImport(long),
      (error) => error.code === "field" && error.path.length <= 120 && error.path.startsWith("$.conversations[0].kkk"),
    );
  });

  test("wrong types, roles out of turn, bad picks, duplicate ids", () => {
    const cases = [
      [(d) => (d.conversations = []), "$.conversations"],
      [(d) => (d.conversations[0].id = 7), "$.conversations[0].id"],
      [(d) => (d.conversations[0].id = ""), "$.conversations[0].id"],
      [(d) => (d.conversations[0].title = null), "$.conversations[0].title"],
      [(d) => (d.conversations[0].updated = "yesterday"), "$.conversations[0].updated"],
      [(d) => (d.conversations[0].next = {}), "$.conversations[0].next"],
      [(d) => (d.conversations[0].pick = 3), "$.conversations[0].pick"],
      [(d) => (d.conversations[0].next[0].role = "system"), "$.conversations[0].next[0].role"],
      [(d) => (d.conversations[0].next[0].role = "assistant"), "$.conversations[0].next[0].role"],
      [(d) => (d.conversations[0].next[0].content = ["x"]), "$.conversations[0].next[0].content"],
      [(d) => (d.conversations[0].next[0].next[0].status = "streaming"), "$.conversations[0].next[0].next[0].status"],
      [
        (d) => (d.conversations[0].next[0].next[1].stats.usage.total_tokens = -1),
        "$.conversations[0].next[0].next[1].stats.usage.total_tokens",
      ],
      [
        (d) => (d.conversations[0].next[0].next[1].stats.similar.score = 7),
        "$.conversations[0].next[0].next[1].stats.similar.score",
      ],
      [
        (d) => (d.conversations[0].next[0].next[1].stats.sources[0].n = 2),
        "$.conversations[0].next[0].next[1].stats.sources[0].n",
      ],
      [
        (d) => (d.conversations[0].next[0].next[1].stats.sources[0].text = "x".repeat(8001)),
        "$.conversations[0].next[0].next[1].stats.sources[0].text",
      ],
      [
        (d) => (d.conversations[0].next[0].next[1].stats.sources[0].url = "https://example.com"),
        "$.conversations[0].next[0].next[1].stats.sources[0].url",
      ],
      [
        (d) => delete d.conversations[0].next[0].next[1].stats.sources[0].name,
        "$.conversations[0].next[0].next[1].stats.sources[0].name",
      ],
      [
        (d) => (d.conversations[0].next[0].next[1].stats.sources[0].score = 2),
        "$.conversations[0].next[0].next[1].stats.sources[0].score",
      ],
      [
        (d) => {
          const { sources } = d.conversations[0].next[0].next[1].stats;
          for (let k = 1; k <= 50; k++) sources.push({ ...sources[0], n: k + 1 });
        },
        "$.conversations[0].next[0].next[1].stats.sources",
      ],
      [
        (d) => (d.conversations[0].next[0].next[1].next[0].next[0].stats.comparison.id = "short"),
        "$.conversations[0].next[0].next[1].next[0].next[0].stats.comparison.id",
      ],
      [
        (d) => (d.conversations[0].next[0].next[1].next[0].next[0].stats.comparison.slot = 3),
        "$.conversations[0].next[0].next[1].next[0].next[0].stats.comparison.slot",
      ],
      [
        (d) => (d.conversations[0].next[0].next[1].next[0].next[0].stats.comparison.blind = 1),
        "$.conversations[0].next[0].next[1].next[0].next[0].stats.comparison.blind",
      ],
      [
        (d) => (d.conversations[0].next[0].next[1].stats.ttft_ms = "fast"),
        "$.conversations[0].next[0].next[1].stats.ttft_ms",
      ],
      [
        (d) => (d.conversations[0].next[0].next[1].next[0].next[0].error.retryable = "yes"),
        "$.conversations[0].next[0].next[1].next[0].next[0].error.retryable",
      ],
      [(d) => d.conversations.push(d.conversations[0]), "$.conversations[1].id"],
    ];
    for (const [change, path] of cases) refused(changed(change), "field", path);
  });

  test("a tree deeper than the cap", () => {
    let node = { role: "user", content: "x", next: [] };
    const top = node;
    for (let k = 1; k < 2100; k++) {
      const child = { role: k % 2 ? "assistant" : "user", content: "x", next: [] };
      node.next.push(child);
      node = child;
    }
    const text = JSON.stringify({
      format: "edgechat",
      version: 1,
      conversations: [{ id: "d", title: "", updated: 0, next: [top] }],
    });
    assert.throws(() => parseImport(text), ImportError);
  });

  test("nesting deeper than 32 levels, before anything walks it, whatever the field", () => {
    /** An export whose first answer's stats.model is `levels` arrays deep (stats.model is at level 5). */
    const nestedModel = (levels) =>
      changed((d) => {
        let value = "x";
        for (let k = 0; k < levels; k++) value = [value];
        d.conversations[0].next[0].next[1].stats.model = value;
      });
    // 28 arrays end at level 32: too deep is not the complaint, a model that is no string is.
    refused(nestedModel(28), "field", "$.conversations[0].next[0].next[1].stats.model");
    assert.throws(
      () => parseImport(nestedModel(29)),
      (error) =>
        error instanceof ImportError &&
        error.code === "depth" &&
        error.limit === MAX_JSON_DEPTH &&
        error.path.startsWith("$.conversations[0].next[0].next[1].stats.model[0][0]"),
    );
    assert.equal(MAX_JSON_DEPTH, 32);
    // Far deeper than any stack: refused as quickly, and no RangeError.
    refused(nestedModel(200_000), "depth");
    refused(
      `{"format": "edgechat", "version": 1, "x": ${"[".repeat(100)}${"]".repeat(100)}}`,
      "depth",
      `$.x${"[0]".repeat(31)}`, // the root is level 1, $.x level 2
    );
  });

  test("the depth from the server's limits, when it names one", () => {
    const text = toJson([conversation()]); // its deepest: a source of a message's stats.sources, level 6
    assert.equal(parseImport(text, MAX_IMPORT_BYTES, 6).length, 1);
    assert.throws(
      () => parseImport(text, MAX_IMPORT_BYTES, 5),
      (error) => error.code === "depth" && error.limit === 5 && /\.stats\.sources\[0\]$/.test(error.path),
    );
  });

  test("a long conversation is no deeper for it: versions are not levels of nesting", () => {
    const c = { id: "long", title: "", updated: 1, next: [], pick: 0 };
    let node = c;
    for (let k = 0; k < 500; k++) {
      const role = k % 2 ? "assistant" : "user";
      node = addVersion(node, { role, content: `turn ${k}`, ...(k % 2 && { status: "done", stats: { usage: {} } }) });
    }
    const [back] = parseImport(toJson([c]));
    assert.equal(thread(back).length, 500);
    assert.equal(thread(back)[499].content, "turn 499");
  });

  test("what is accepted is copied: no shared objects with the parsed file", () => {
    const [c] = parseImport(toJson([conversation()]));
    assert.equal(Object.getPrototypeOf(c), Object.prototype);
    assert.deepEqual(Object.keys(c).sort(), ["id", "next", "pick", "title", "updated"]);
  });
});

describe("the server's export (GET /api/my-data)", () => {
  // What the server sends: flat conversations with their etag, links, images' descriptions.
  const serverExport = (nodes) =>
    JSON.stringify({
      format: "edgechat-server",
      version: 1,
      user: "ann",
      conversations: [{ id: "c1", title: "Tea", updated: 5, pick: 0, nodes, etag: '"3"' }],
      shares: [],
      files: [{ id: "img1", type: "image/jpeg", width: 8, height: 8, bytes: 100, created: 1 }],
      // The server's own record, exported beside the chats: read past, not imported.
      feedback: [],
      comparisons: [],
      knowledge: [],
    });
  const image = { id: "img1", type: "image/jpeg", width: 8, height: 8 };

  test("reads back as the page's trees, versions and picks kept, images' descriptions left out", () => {
    const [c] = parseImport(
      serverExport([
        { parent: null, role: "user", content: "Green or black?", pick: 1, images: [image] },
        { parent: 0, role: "assistant", content: "Green.", status: "done" },
        { parent: 0, role: "assistant", content: "Black.", status: "done" },
      ]),
    );
    assert.deepEqual(
      thread(c).map((m) => m.content),
      ["Green or black?", "Black."],
    );
    assert.equal(c.next[0].next.length, 2);
    assert.equal(c.next[0].images, undefined);
    assert.equal(c.etag, undefined);
  });

  test("a node whose parent is not an earlier node, or a field the rules do not know, names where", () => {
    const bad = (nodes, where) =>
      assert.throws(
        () => parseImport(serverExport(nodes)),
        (e) => e instanceof ImportError && e.code === "field" && e.path === where,
      );
    bad([{ parent: 0, role: "user", content: "loop" }], "$.conversations[0].nodes[0].parent");
    bad(
      [
        { parent: null, role: "user", content: "q" },
        { parent: 1.5, role: "assistant", content: "a" },
      ],
      "$.conversations[0].nodes[1].parent",
    );
    bad([{ parent: null, role: "assistant", content: "first" }], "$.conversations[0].next[0].role");
    bad([{ parent: null, role: "user", content: "q", colour: "red" }], "$.conversations[0].next[0].colour");
    bad(["not a node"], "$.conversations[0].nodes[0]");
  });
});
