// Sync's pure parts (static/js/sync.js): a tree travels flat and comes back
// the same; two devices' edits merge with both versions kept; a conversation
// with nothing new here becomes the server's, keeping this browser's images.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Window } from "happy-dom";

const window = new Window({ url: "https://edgechat.example/" });
for (const [name, value] of Object.entries({ document: window.document, localStorage: window.localStorage })) {
  Object.defineProperty(globalThis, name, { value, configurable: true, writable: true });
}
const { adopt, batches, merge, toFlat } = await import("../../static/js/sync.js");
const { addVersion, fromFlat, thread } = await import("../../static/js/tree.js");
after(() => window.happyDOM.close());

function conversation() {
  const c = { id: "c1", title: "Tea", updated: 5, next: [], pick: 0 };
  const q = addVersion(c, { role: "user", content: "Green or black?" });
  const comparison = { id: "Jq0c_-aaaaaaaaaaaaaaaaaa", slot: 0, blind: false };
  const similar = { score: 0.96, question: "Green tea or black?" };
  addVersion(q, {
    role: "assistant",
    content: "Green.",
    status: "done",
    stats: { model: "glm", extra: 1, comparison, similar },
  });
  const a = addVersion(q, { role: "assistant", content: "Black.", status: "streaming" });
  const image = { id: "img1", type: "image/jpeg", width: 640, height: 480, url: "data:image/jpeg;base64,/9j/" };
  addVersion(a, { role: "user", content: "Why?", images: [image] });
  return c;
}

const texts = (c) => thread(c).map((m) => m.content);

describe("the flat form", () => {
  test("a tree goes flat breadth first and comes back with its versions and picks", () => {
    const flat = toFlat(conversation());
    assert.deepEqual(
      flat.nodes.map((n) => [n.parent, n.role, n.content]),
      [
        [null, "user", "Green or black?"],
        [0, "assistant", "Green."],
        [0, "assistant", "Black."],
        [2, "user", "Why?"],
      ],
    );
    assert.equal(flat.nodes[0].pick, 1);
    // Only what the server's rules know travels: no stats it does not know,
    // no "streaming"; an image by its id and size, never its bytes.
    // A comparison's answer takes its comparison along, a cached one its similar question.
    assert.deepEqual(flat.nodes[1].stats, {
      model: "glm",
      comparison: { id: "Jq0c_-aaaaaaaaaaaaaaaaaa", slot: 0, blind: false },
      similar: { score: 0.96, question: "Green tea or black?" },
    });
    assert.equal(flat.nodes[2].status, "interrupted");
    assert.deepEqual(flat.nodes[3].images, [{ id: "img1", type: "image/jpeg", width: 640, height: 480 }]);
    const back = fromFlat(flat);
    assert.deepEqual(texts(back), ["Green or black?", "Black.", "Why?"]);
    assert.deepEqual(thread(back)[2].images, flat.nodes[3].images);
    assert.equal(back.next[0].next.length, 2);
  });

  test("an answer's semantic-cache note and knowledge sources travel with it", () => {
    const c = conversation();
    const source = { n: 1, base: "b", document: "d", name: "tea.md", chunk: 0, id: "d:0", score: 0.9, text: "Tea." };
    thread(c)[1].stats = { model: "glm", similar: { score: 0.97, question: "Tea?" }, sources: [source] };
    assert.deepEqual(toFlat(c).nodes[2].stats, thread(c)[1].stats);
  });
});

describe("merging two devices' edits", () => {
  test("a message only one side has becomes one more version; nothing is lost", () => {
    const here = conversation();
    const there = fromFlat(toFlat(conversation()));
    addVersion(thread(here)[2], { role: "assistant", content: "Tannins, here." });
    addVersion(thread(there)[2], { role: "assistant", content: "Tannins, there." });
    assert.equal(merge(here, there), true);
    const why = thread(here)[2];
    assert.deepEqual(
      why.next.map((m) => m.content),
      ["Tannins, here.", "Tannins, there."],
    );
    // Merging again adds nothing.
    assert.equal(merge(here, there), false);
  });

  test("adopting the server's copy keeps this browser's images", () => {
    const here = conversation();
    const there = fromFlat(toFlat(conversation()));
    there.title = "Renamed elsewhere";
    addVersion(thread(there)[2], { role: "assistant", content: "Because." });
    adopt(here, there);
    assert.equal(here.title, "Renamed elsewhere");
    assert.deepEqual(texts(here), ["Green or black?", "Black.", "Why?", "Because."]);
    assert.equal(thread(here)[2].images[0].url, "data:image/jpeg;base64,/9j/");
  });
});

describe("the first sync's batches", () => {
  const item = (id, bytes) => ({ id, bytes });
  const ids = (groups) => groups.map((group) => group.map((i) => i.id));

  test("groups stay within the server's count and bytes; a large one goes alone", () => {
    const limits = { max_batch_conversations: 2, max_batch_bytes: 1000 };
    const pending = [item("a", 100), item("b", 100), item("c", 100), item("d", 900), item("e", 100)];
    assert.deepEqual(ids(batches(pending, limits)), [["a", "b"], ["c"], ["d"], ["e"]]);
    for (const group of batches(pending, limits).filter((g) => g.length > 1))
      assert.ok(group.reduce((n, i) => n + i.bytes + 48, 16) <= limits.max_batch_bytes);
  });

  test("a server that names no batch gets each conversation alone", () => {
    assert.deepEqual(ids(batches([item("a", 1), item("b", 1)], null)), [["a"], ["b"]]);
    assert.deepEqual(batches([], { max_batch_conversations: 5, max_batch_bytes: 100 }), []);
  });
});

describe("an image this browser lacks", () => {
  test("comes from the source once however many ask at once, and is kept after", async () => {
    const { getImage, imagesFrom } = await import("../../static/js/store.js");
    const asked = [];
    let answer;
    imagesFrom((id) => {
      asked.push(id);
      return new Promise((resolve) => {
        answer = resolve;
      });
    });
    const both = Promise.all([getImage("far-1"), getImage("far-1")]);
    while (!answer) await new Promise((resolve) => setTimeout(resolve, 0));
    answer("data:image/jpeg;base64,/9j/");
    assert.deepEqual(await both, ["data:image/jpeg;base64,/9j/", "data:image/jpeg;base64,/9j/"]);
    assert.equal(await getImage("far-1"), "data:image/jpeg;base64,/9j/");
    assert.deepEqual(asked, ["far-1"]);
  });

  test("a source that fails gives nothing now and is asked again next time", async () => {
    const { getImage, imagesFrom } = await import("../../static/js/store.js");
    let calls = 0;
    imagesFrom(async () => {
      calls++;
      if (calls === 1) throw new Error("offline");
      return "data:image/png;base64,iVBO";
    });
    assert.equal(await getImage("far-2"), undefined);
    assert.equal(await getImage("far-2"), "data:image/png;base64,iVBO");
    assert.equal(calls, 2);
  });
});
