// The version tree of a conversation (static/js/tree.js): edits and
// regenerated answers are new versions of a turn, the earlier ones stay
// reachable, and the thread follows the versions shown.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { fnv, nodeKey } from "../../static/js/node-key.js";
import {
  addVersion,
  dropVersion,
  fromList,
  nodes,
  parentOf,
  reveal,
  stepVersion,
  thread,
  tip,
  versionOf,
} from "../../static/js/tree.js";

const user = (content) => ({ role: "user", content });
const assistant = (content) => ({ role: "assistant", content });
const texts = (root) => thread(root).map((m) => m.content);

/** hi → hello → more → sure, as a conversation would grow. */
function grown() {
  const root = { next: [], pick: 0 };
  const q1 = addVersion(root, user("hi"));
  const a1 = addVersion(q1, assistant("hello"));
  const q2 = addVersion(a1, user("more"));
  const a2 = addVersion(q2, assistant("sure"));
  return { root, q1, a1, q2, a2 };
}

describe("tree", () => {
  test("a conversation grows as one thread", () => {
    const { root, a2 } = grown();
    assert.deepEqual(texts(root), ["hi", "hello", "more", "sure"]);
    assert.equal(tip(root), a2);
    assert.equal(tip({ next: [] }).next.length, 0);
    assert.deepEqual(versionOf(root, a2), { index: 0, count: 1 });
  });

  test("editing a message starts a new branch there; the old one stays reachable", () => {
    const { root, a1, q2 } = grown();
    const edited = addVersion(parentOf(root, q2), user("less"));
    addVersion(edited, assistant("fine"));
    assert.deepEqual(texts(root), ["hi", "hello", "less", "fine"]);
    assert.deepEqual(versionOf(root, edited), { index: 1, count: 2 });
    assert.equal(parentOf(root, edited), a1);
    // ‹ 1/2: the first version comes back with the answers that followed it.
    assert.equal(stepVersion(root, edited, -1), q2);
    assert.deepEqual(texts(root), ["hi", "hello", "more", "sure"]);
    assert.equal(stepVersion(root, q2, -1), null);
    assert.equal(stepVersion(root, q2, 1), edited);
    assert.equal(stepVersion(root, edited, 1), null);
    assert.deepEqual(texts(root), ["hi", "hello", "less", "fine"]);
  });

  test("regenerating adds a version of the answer; edits of the first message branch from the root", () => {
    const { root, q1, a1 } = grown();
    const again = addVersion(q1, assistant("hey"));
    assert.deepEqual(texts(root), ["hi", "hey"]);
    assert.deepEqual(versionOf(root, again), { index: 1, count: 2 });
    stepVersion(root, again, -1);
    assert.deepEqual(texts(root), ["hi", "hello", "more", "sure"]);
    assert.equal(parentOf(root, a1), q1);
    const first = addVersion(parentOf(root, q1), user("yo"));
    assert.equal(parentOf(root, first), root);
    assert.deepEqual(texts(root), ["yo"]);
    assert.deepEqual(versionOf(root, first), { index: 1, count: 2 });
  });

  test("a failed answer that is retried is replaced, not kept", () => {
    const { root, q2, a2 } = grown();
    dropVersion(q2, a2);
    assert.deepEqual(texts(root), ["hi", "hello", "more"]);
    dropVersion(q2, a2); // already gone: nothing happens
    assert.equal(q2.pick, 0);
  });

  test("nodes() visits every version; reveal() shows the branch holding a node", () => {
    const { root, q2 } = grown();
    const edited = addVersion(parentOf(root, q2), user("less"));
    addVersion(edited, assistant("fine"));
    assert.deepEqual(
      [...nodes(root)].map((m) => m.content),
      ["hi", "hello", "more", "sure", "less", "fine"],
    );
    const sure = [...nodes(root)].find((m) => m.content === "sure");
    assert.equal(reveal(root, sure), true);
    assert.deepEqual(texts(root), ["hi", "hello", "more", "sure"]);
    assert.equal(reveal(root, { role: "user", content: "elsewhere" }), false);
    assert.deepEqual(texts(root), ["hi", "hello", "more", "sure"]);
  });

  test("a pick out of range shows the nearest version, and a deep tree needs no recursion", () => {
    const { root, a1 } = grown();
    a1.pick = 9;
    assert.deepEqual(texts(root), ["hi", "hello", "more", "sure"]);
    const deep = fromList(
      { next: [] },
      Array.from({ length: 20000 }, (_, k) => (k % 2 ? assistant(`a${k}`) : user(`u${k}`))),
    );
    assert.equal(thread(deep).length, 20000);
    assert.equal([...nodes(deep)].length, 20000);
    assert.equal(reveal(deep, tip(deep)), true);
  });

  test("nodeKey() names a message by its role and text: the same on every device, a server-valid id", () => {
    const a = { ...assistant("Paris."), stats: { model: "glm" }, next: [], pick: 0 };
    const copy = fromList({}, [user("Capital?"), assistant("Paris.")]).next[0].next[0];
    assert.equal(nodeKey(a), nodeKey(copy));
    assert.notEqual(nodeKey(a), nodeKey(assistant("Paris!")));
    assert.notEqual(nodeKey(a), nodeKey(user("Paris.")));
    // The feedback API's ids: 1 to 100 letters, digits, ".", "_", "-".
    for (const text of ["", "x".repeat(100000), "你好"]) assert.match(nodeKey(user(text)), /^[A-Za-z0-9._-]{1,100}$/);
    assert.equal(fnv("abc"), fnv("abc"));
    assert.notEqual(fnv("abc"), fnv("abd"));
  });
});
