// The page's SSE reader (static/js/sse.js): framing across arbitrary splits,
// UTF-8 split inside a character, and the model-event shapes it reads.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { modelDelta, readEvents, SseParser } from "../../static/js/sse.js";

/** Every event a fresh parser yields for `pieces`, pushed one after another. */
function parse(pieces) {
  const parser = new SseParser();
  return pieces.flatMap((piece) => parser.push(piece));
}

/** All the ways to cut `text` into two pieces, and into single characters. */
function splits(text) {
  const out = [[text], [...text]];
  for (let k = 0; k <= text.length; k++) out.push([text.slice(0, k), text.slice(k)]);
  return out;
}

// A stream in the shape the Worker sends: a comment, named events, a
// multi-line data field, a field without a value and unknown fields.
const STREAM = [
  ": ping",
  "",
  "event: meta",
  'data: {"model":"glm"}',
  "",
  'data: {"choices":[{"delta":{"content":"Hi"}}]}',
  "id: 7",
  "retry: 10",
  "",
  "event: done",
  "data: first",
  "data:second",
  "data",
  "",
];
const EXPECTED = [
  { event: "meta", data: '{"model":"glm"}' },
  { event: "message", data: '{"choices":[{"delta":{"content":"Hi"}}]}' },
  { event: "done", data: "first\nsecond\n" },
];

describe("SseParser", () => {
  for (const [name, eol] of [
    ["LF", "\n"],
    ["CRLF", "\r\n"],
    ["CR", "\r"],
  ]) {
    test(`gives the same events for every split of a ${name} stream`, () => {
      const text = STREAM.join(eol) + eol;
      for (const pieces of splits(text)) {
        assert.deepEqual(parse(pieces), EXPECTED, JSON.stringify(pieces));
      }
    });
  }

  test("a CR at the end of one piece and LF at the start of the next is one line break", () => {
    assert.deepEqual(parse(["data: a\r", "\n\r", "\n"]), [{ event: "message", data: "a" }]);
    // Two CRs are two line breaks: the second ends the event.
    assert.deepEqual(parse(["data: a\r", "\r"]), [{ event: "message", data: "a" }]);
  });

  test("mixed line endings in one stream", () => {
    assert.deepEqual(parse(["data: a\r\ndata: b\rdata: c\n\r\n"]), [{ event: "message", data: "a\nb\nc" }]);
  });

  test("strips exactly one space after the colon", () => {
    assert.deepEqual(parse(["data:  two\n\ndata:none\n\n"]), [
      { event: "message", data: " two" },
      { event: "message", data: "none" },
    ]);
  });

  test("an event without data is not dispatched, and its name does not leak into the next", () => {
    assert.deepEqual(parse(["event: lost\n\ndata: x\n\n"]), [{ event: "message", data: "x" }]);
  });

  test("comments never become events, even ones that look like fields", () => {
    assert.deepEqual(parse([":data: x\n\n: event: error\n\n"]), []);
  });

  test("an event without its closing blank line stays pending", () => {
    const parser = new SseParser();
    assert.deepEqual(parser.push('data: {"a":1}\n'), []);
    assert.deepEqual(parser.push("\n"), [{ event: "message", data: '{"a":1}' }]);
  });
});

/** A ReadableStream of Uint8Array pieces, as fetch() gives a body. */
function body(pieces) {
  return new ReadableStream({
    start(controller) {
      for (const piece of pieces) controller.enqueue(piece);
      controller.close();
    },
  });
}

async function collect(pieces) {
  const events = [];
  await readEvents(body(pieces), (name, value) => events.push([name, value]));
  return events;
}

describe("readEvents", () => {
  test("a character split across reads at any byte comes out whole", async () => {
    // 2-, 3- and 4-byte UTF-8 (é, 你, 😀) inside JSON, and one escaped in JSON.
    const text = 'event: token\ndata: {"t":"é你😀"}\n\ndata: {"t":"\\u00e9"}\n\n';
    const bytes = new TextEncoder().encode(text);
    const expected = [
      ["token", { t: "é你😀" }],
      ["message", { t: "é" }],
    ];
    for (let a = 0; a <= bytes.length; a++) {
      for (let b = a; b <= bytes.length; b += 3) {
        const pieces = [bytes.slice(0, a), bytes.slice(a, b), bytes.slice(b)];
        assert.deepEqual(await collect(pieces), expected, `cut at ${a}, ${b}`);
      }
    }
    assert.deepEqual(await collect([...bytes].map((byte) => Uint8Array.of(byte))), expected);
  });

  test("data that is not JSON is skipped, the events around it are kept", async () => {
    const text = 'data: {"n":1}\n\ndata: [DONE]\n\ndata: {"n":\n\ndata: {"n":2}\n\n';
    assert.deepEqual(await collect([new TextEncoder().encode(text)]), [
      ["message", { n: 1 }],
      ["message", { n: 2 }],
    ]);
  });

  test("an event the body ends inside is dropped (the caller sees truncation)", async () => {
    const text = 'data: {"n":1}\n\nevent: done\ndata: {"n":2}\n';
    assert.deepEqual(await collect([new TextEncoder().encode(text)]), [["message", { n: 1 }]]);
  });

  test("a lone invalid byte becomes U+FFFD instead of failing the stream", async () => {
    const bytes = new TextEncoder().encode('data: {"t":"a?"}\n\n');
    bytes[bytes.indexOf(0x3f)] = 0xff;
    assert.deepEqual(await collect([bytes]), [["message", { t: "a\ufffd" }]]);
  });

  test("rejects with the body's error, after the events read before it", async () => {
    const failure = new Error("connection reset");
    let sent = false;
    const stream = new ReadableStream({
      pull(controller) {
        if (sent) controller.error(failure);
        else controller.enqueue(new TextEncoder().encode('data: {"n":1}\n\n'));
        sent = true;
      },
    });
    const events = [];
    await assert.rejects(
      readEvents(stream, (name, value) => events.push([name, value])),
      (err) => err === failure,
    );
    assert.deepEqual(events, [["message", { n: 1 }]]);
  });
});

describe("modelDelta", () => {
  const none = { reasoning: "", content: "" };

  test("an OpenAI chat.completion.chunk", () => {
    assert.deepEqual(modelDelta({ choices: [{ index: 0, delta: { content: "Hi" } }] }), {
      reasoning: "",
      content: "Hi",
    });
    assert.deepEqual(modelDelta({ choices: [{ delta: { reasoning_content: "hmm", content: null } }] }), {
      reasoning: "hmm",
      content: "",
    });
    assert.deepEqual(modelDelta({ choices: [{ delta: { reasoning: "also", content: "x" } }] }), {
      reasoning: "also",
      content: "x",
    });
  });

  test("reasoning_content wins over reasoning when both are there", () => {
    assert.deepEqual(modelDelta({ choices: [{ delta: { reasoning_content: "a", reasoning: "b" } }] }), {
      reasoning: "a",
      content: "",
    });
  });

  test("a whole chat.completion (message instead of delta)", () => {
    const completion = { object: "chat.completion", choices: [{ message: { role: "assistant", content: "All" } }] };
    assert.deepEqual(modelDelta(completion), { reasoning: "", content: "All" });
  });

  test("the native {response} shape", () => {
    assert.deepEqual(modelDelta({ response: "tok" }), { reasoning: "", content: "tok" });
    assert.deepEqual(modelDelta({ response: "", usage: { total_tokens: 3 } }), none);
  });

  test("a usage-only chunk and empty choices give nothing", () => {
    assert.deepEqual(modelDelta({ choices: [], usage: { total_tokens: 3 } }), none);
    assert.deepEqual(modelDelta({ choices: [{ finish_reason: "stop" }] }), none);
    assert.deepEqual(modelDelta({ choices: [null] }), none);
  });

  test("junk gives empty strings, never a non-string", () => {
    for (const junk of [
      null,
      undefined,
      0,
      "text",
      [],
      {},
      { response: 42 },
      { response: { text: "x" } },
      { choices: "nope" },
      { choices: [{ delta: { content: 5, reasoning_content: ["x"] } }] },
      { choices: [{ delta: "str" }] },
    ]) {
      assert.deepEqual(modelDelta(junk), none, JSON.stringify(junk));
    }
  });
});
