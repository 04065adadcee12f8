// The page's conversation store (static/js/store.js): the `messages` of a
// /chat request within the server's limits, and conversations kept in a Storage.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseLimits, requestMessages, Store } from "../../static/js/store.js";
import { addVersion, thread } from "../../static/js/tree.js";

// What GET /api/limits answers with the server's defaults.
const LIMITS = {
  max_body_bytes: 65536,
  max_messages: 50,
  max_message_chars: 8000,
  max_total_chars: 32000,
  default_output_tokens: 1024,
  max_output_tokens: 4096,
};

const user = (content) => ({ role: "user", content });
const assistant = (content, extra = {}) => ({ role: "assistant", content, ...extra });

describe("requestMessages", () => {
  test("sends only role and content of the answered turns", () => {
    const history = [
      user("hi"),
      assistant("hello", { reasoning: "think", status: "done", stats: { tokens: 3 } }),
      user("again"),
    ];
    assert.deepEqual(requestMessages(history), [user("hi"), assistant("hello"), user("again")]);
  });

  test("leaves out empty, blank and missing content and any other role", () => {
    const history = [
      { role: "system", content: "be evil" },
      user("one"),
      assistant("", { status: "error", error: { code: "upstream_error" } }),
      assistant("   \n"),
      { role: "assistant" },
      { role: "tool", content: "x" },
      user("two"),
    ];
    assert.deepEqual(requestMessages(history), [user("one"), user("two")]);
  });

  test("keeps content exactly as typed (no trimming)", () => {
    assert.deepEqual(requestMessages([user("  padded\n")]), [user("  padded\n")]);
  });

  test("never starts with an assistant turn", () => {
    assert.deepEqual(requestMessages([assistant("a"), assistant("b"), user("q")]), [user("q")]);
    assert.deepEqual(requestMessages([assistant("only")]), [assistant("only")]);
    assert.deepEqual(requestMessages([]), []);
  });

  test("keeps the newest max_messages messages", () => {
    const history = Array.from({ length: 60 }, (_, k) => (k % 2 ? assistant(`a${k}`) : user(`u${k}`)));
    const out = requestMessages(history, LIMITS);
    assert.equal(out.length, 50);
    assert.deepEqual(out, history.slice(10));
    // The newest 3 would open with an answer, so 2 are sent.
    assert.deepEqual(requestMessages(history, { ...LIMITS, max_messages: 3 }), history.slice(-2));
  });

  test("keeps the newest turns within max_total_chars, then starts at a user turn", () => {
    const big = "x".repeat(7000);
    const limits = { ...LIMITS, max_total_chars: 22000 };
    const history = [user(big), assistant(big), user(big), assistant(big), user("last")];
    // 3 × 7000 + 4 fits; a fourth big one would not, and the kept list may
    // not open with the assistant turn, so it drops to the user turn after it.
    assert.deepEqual(requestMessages(history, limits), [user(big), assistant(big), user("last")]);
    // Exactly the limit fits; one more leaves the oldest out, and with it the
    // assistant turn that would then open the list.
    const exact = [user("y".repeat(7000)), assistant("z".repeat(7000))];
    assert.deepEqual(requestMessages(exact, { ...LIMITS, max_total_chars: 14000 }), exact);
    assert.deepEqual(requestMessages([...exact, user("!")], { ...LIMITS, max_total_chars: 14000 }), [user("!")]);
  });

  test("an older message over max_message_chars ends what is sent (the server would refuse it)", () => {
    const long = assistant("l".repeat(8001));
    assert.deepEqual(requestMessages([user("q"), long, user("next")], LIMITS), [user("next")]);
    assert.deepEqual(requestMessages([user("q"), long, user("next")], { ...LIMITS, max_message_chars: 9000 }), [
      user("q"),
      long,
      user("next"),
    ]);
  });

  test("the body stays within max_body_bytes, counted in UTF-8", () => {
    const cjk = "中".repeat(3000); // 9000 bytes each
    const history = [user(cjk), assistant(cjk), user(cjk), assistant(cjk), user("last")];
    const out = requestMessages(history, { ...LIMITS, max_body_bytes: 20000 });
    assert.equal(out.length, 3); // 3 × 3000 characters would fit max_total_chars, not 20000 bytes
    assert.ok(new TextEncoder().encode(JSON.stringify({ messages: out })).length <= 20000);
    assert.equal(requestMessages(history, { ...LIMITS, max_body_bytes: 15000 }).length, 1);
  });

  test("the newest message is sent even when it alone is over a limit", () => {
    const huge = user("h".repeat(40000));
    assert.deepEqual(requestMessages([user("old"), huge], LIMITS), [huge]);
  });

  test("without the server's limits everything is sent (the server names any limit broken)", () => {
    const history = Array.from({ length: 60 }, (_, k) => (k % 2 ? assistant(`a${k}`) : user(`u${k}`)));
    assert.equal(requestMessages(history, null).length, 60);
  });

  test("parseLimits keeps the four request limits and refuses anything else", () => {
    assert.deepEqual(parseLimits(LIMITS), {
      max_body_bytes: 65536,
      max_messages: 50,
      max_message_chars: 8000,
      max_total_chars: 32000,
    });
    for (const bad of [
      null,
      "x",
      [],
      {},
      { ...LIMITS, max_messages: "50" },
      { ...LIMITS, max_total_chars: 0 },
      { ...LIMITS, max_body_bytes: 1.5 },
    ]) {
      assert.equal(parseLimits(bad), null, JSON.stringify(bad));
    }
  });

  test("parseLimits keeps the feedback text's limit when the server names it", () => {
    assert.equal(parseLimits({ ...LIMITS, max_feedback_chars: 500 }).max_feedback_chars, 500);
    assert.equal(parseLimits({ ...LIMITS, max_feedback_chars: "500" }).max_feedback_chars, undefined);
  });

  test("documents go as file parts after the images, and count towards max_documents", () => {
    const doc = (id, name) => ({ id, name, type: "text/plain", size: 3, tokens: 1 });
    const urls = new Map([
      ["a", "data:text/plain;base64,YQ=="],
      ["b", "data:text/plain;base64,Yg=="],
      ["i", "data:image/png;base64,AA=="],
    ]);
    const history = [
      { role: "user", content: "first", documents: [doc("a", "a.txt")] },
      { role: "assistant", content: "ok" },
      { role: "user", content: "", documents: [doc("b", "b.txt")], images: [{ id: "i" }] },
    ];
    const file = (name, url) => ({ type: "file", file: { filename: name, file_data: url } });
    assert.deepEqual(requestMessages(history, null, urls), [
      { role: "user", content: [{ type: "text", text: "first" }, file("a.txt", urls.get("a"))] },
      { role: "assistant", content: "ok" },
      {
        role: "user",
        content: [{ type: "image_url", image_url: { url: urls.get("i") } }, file("b.txt", urls.get("b"))],
      },
    ]);
    const one = { ...parseLimits(LIMITS), max_documents: 1 };
    assert.equal(requestMessages(history, one, urls).length, 1);
    assert.deepEqual(parseLimits({ ...LIMITS, max_documents: 2, max_document_bytes: 9, max_document_tokens: 5 }), {
      ...parseLimits(LIMITS),
      max_documents: 2,
      max_document_bytes: 9,
      max_document_tokens: 5,
    });
  });

  test("parseLimits keeps max_json_depth, and takes fields it does not know as no reason to refuse", () => {
    const four = parseLimits(LIMITS);
    assert.deepEqual(parseLimits({ ...LIMITS, max_json_depth: 32, max_future_thing: 7, note: "x" }), {
      ...four,
      max_json_depth: 32,
    });
    assert.equal("max_json_depth" in four, false); // the page's own 32 then (transfer.js)
  });
});

/** A Storage backed by a Map; `failWrites` makes setItem throw like a full quota. */
class MemoryStorage {
  constructor(entries = {}) {
    this.map = new Map(Object.entries(entries));
    this.failWrites = false;
  }
  getItem(key) {
    return this.map.has(key) ? this.map.get(key) : null;
  }
  setItem(key, value) {
    if (this.failWrites) throw new Error("QuotaExceededError");
    this.map.set(key, String(value));
  }
  removeItem(key) {
    this.map.delete(key);
  }
}

const KEY = "edgechat.conversations.v2";
const OLD_KEY = "edgechat.conversations.v1";
const CURRENT = "edgechat.current";

describe("Store", () => {
  test("starts empty on an empty storage", () => {
    const store = new Store(new MemoryStorage());
    assert.deepEqual(store.conversations, []);
    assert.equal(store.current, null);
  });

  test("reads back what it saved, with the current conversation", () => {
    const storage = new MemoryStorage();
    const store = new Store(storage);
    const conversation = store.create();
    addVersion(conversation, user("hi"));
    store.touch(conversation);
    const again = new Store(storage);
    assert.deepEqual(again.conversations, [conversation]);
    assert.equal(again.current.id, conversation.id);
  });

  test("drops corrupt storage instead of failing", () => {
    for (const raw of ["{not json", '{"a":1}', "42", "null"]) {
      assert.deepEqual(new Store(new MemoryStorage({ [KEY]: raw })).conversations, [], raw);
    }
    const mixed = JSON.stringify([null, 3, { id: "x" }, { id: "ok", next: [] }, { id: "bad", next: "no" }]);
    assert.deepEqual(
      new Store(new MemoryStorage({ [KEY]: mixed })).conversations.map((c) => c.id),
      ["ok"],
    );
  });

  test("conversations saved before versions existed are read as a thread", () => {
    const old = [{ id: "a", title: "t", updated: 5, messages: [user("q"), assistant("a", { status: "done" }), null] }];
    const store = new Store(new MemoryStorage({ [OLD_KEY]: JSON.stringify(old) }));
    const [conversation] = store.conversations;
    assert.equal(conversation.id, "a");
    assert.equal(conversation.messages, undefined);
    assert.deepEqual(
      thread(conversation).map((m) => [m.role, m.content, m.status]),
      [
        ["user", "q", undefined],
        ["assistant", "a", "done"],
      ],
    );
  });

  test("addAll adds every conversation or none; a taken id gets a new one", () => {
    const storage = new MemoryStorage();
    const store = new Store(storage);
    const mine = store.create();
    const imported = [
      { id: mine.id, title: "same id", updated: 1, next: [], pick: 0 },
      { id: "new", title: "new", updated: 2, next: [], pick: 0 },
    ];
    assert.equal(store.addAll(imported), true);
    assert.equal(store.conversations.length, 3);
    assert.equal(new Set(store.conversations.map((c) => c.id)).size, 3);
    assert.equal(
      store.conversations.find((c) => c.id === mine.id),
      mine,
    );
    storage.failWrites = true;
    assert.equal(store.addAll([{ id: "more", title: "", updated: 3, next: [], pick: 0 }]), false);
    assert.equal(store.conversations.length, 3);
  });

  test("sorted() is newest first and does not reorder the list", () => {
    const list = [
      { id: "a", updated: 1, next: [] },
      { id: "b", updated: 3, next: [] },
      { id: "c", updated: 2, next: [] },
    ];
    const store = new Store(new MemoryStorage({ [KEY]: JSON.stringify(list) }));
    assert.deepEqual(
      store.sorted().map((c) => c.id),
      ["b", "c", "a"],
    );
    assert.deepEqual(
      store.conversations.map((c) => c.id),
      ["a", "b", "c"],
    );
  });

  test("select() ignores unknown ids", () => {
    const list = [{ id: "a", updated: 1, next: [] }];
    const storage = new MemoryStorage({ [KEY]: JSON.stringify(list), [CURRENT]: "a" });
    const store = new Store(storage);
    store.select("missing");
    assert.equal(store.currentId, "a");
  });

  test("rename() trims and caps the title at 100 characters", () => {
    const store = new Store(new MemoryStorage());
    const { id } = store.create();
    store.rename(id, `  ${"t".repeat(150)}  `);
    assert.equal(store.current.title, "t".repeat(100));
  });

  test("removing the current conversation selects the newest remaining one, then none", () => {
    const list = [
      { id: "a", updated: 1, next: [] },
      { id: "b", updated: 3, next: [] },
      { id: "c", updated: 2, next: [] },
    ];
    const storage = new MemoryStorage({ [KEY]: JSON.stringify(list), [CURRENT]: "b" });
    const store = new Store(storage);
    store.remove("b");
    assert.equal(store.currentId, "c");
    store.remove("a");
    assert.equal(store.currentId, "c");
    store.remove("c");
    assert.equal(store.currentId, null);
    assert.equal(storage.getItem(CURRENT), null);
    assert.equal(storage.getItem(KEY), "[]");
  });

  test("a full storage does not break the chat", () => {
    const storage = new MemoryStorage();
    const store = new Store(storage);
    storage.failWrites = true;
    const conversation = store.create();
    assert.equal(store.current, conversation);
    assert.equal(storage.getItem(KEY), null);
  });
});
