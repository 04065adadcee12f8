// The page's conversation store (static/js/store.js): the `messages` of a
// /chat request, and conversations kept in a Storage.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { requestMessages, Store } from "../../static/js/store.js";

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

  test("keeps the newest 50 messages", () => {
    const history = Array.from({ length: 60 }, (_, k) => (k % 2 ? assistant(`a${k}`) : user(`u${k}`)));
    const out = requestMessages(history);
    assert.equal(out.length, 50);
    assert.deepEqual(out, history.slice(10));
  });

  test("keeps the newest turns within 32000 characters, then starts at a user turn", () => {
    const big = "x".repeat(10000);
    const history = [user(big), assistant(big), user(big), assistant(big), user("last")];
    // 3 × 10000 + 4 fits; a fourth big one would not, and the kept list may
    // not open with the assistant turn, so it drops to the user turn after it.
    assert.deepEqual(requestMessages(history), [user(big), assistant(big), user("last")]);
    // Exactly 32000 characters fit; one more leaves the oldest out, and with
    // it the assistant turn that would then open the list.
    const exact = [user("y".repeat(16000)), assistant("z".repeat(16000))];
    assert.deepEqual(requestMessages(exact), exact);
    assert.deepEqual(requestMessages([...exact, user("!")]), [user("!")]);
  });

  test("the newest message is sent even when it alone is over the cap", () => {
    const huge = user("h".repeat(40000));
    assert.deepEqual(requestMessages([user("old"), huge]), [huge]);
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

const KEY = "edgechat.conversations.v1";
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
    conversation.messages.push(user("hi"));
    store.touch(conversation);
    const again = new Store(storage);
    assert.deepEqual(again.conversations, [conversation]);
    assert.equal(again.current.id, conversation.id);
  });

  test("drops corrupt storage instead of failing", () => {
    for (const raw of ["{not json", '{"a":1}', "42", "null"]) {
      assert.deepEqual(new Store(new MemoryStorage({ [KEY]: raw })).conversations, [], raw);
    }
    const mixed = JSON.stringify([null, 3, { id: "x" }, { id: "ok", messages: [] }, { id: "bad", messages: "no" }]);
    assert.deepEqual(
      new Store(new MemoryStorage({ [KEY]: mixed })).conversations.map((c) => c.id),
      ["ok"],
    );
  });

  test("sorted() is newest first and does not reorder the list", () => {
    const list = [
      { id: "a", updated: 1, messages: [] },
      { id: "b", updated: 3, messages: [] },
      { id: "c", updated: 2, messages: [] },
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
    const list = [{ id: "a", updated: 1, messages: [] }];
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
      { id: "a", updated: 1, messages: [] },
      { id: "b", updated: 3, messages: [] },
      { id: "c", updated: 2, messages: [] },
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
