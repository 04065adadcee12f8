// toMarkdown: one result per file, in order, read from the files' own bytes;
// a file it cannot read is an "error" result; scripts can make the call fail.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ai, countTokens, TO_MARKDOWN } from "../../tools/emulator/ai.mjs";
import { memoryIo } from "./helpers.mjs";

const file = (name, data) => ({ name, blob: new Blob([data]) });

// A one-page PDF whose unfiltered content stream shows two lines.
function pdf(lines, { encrypt = false } = {}) {
  const shown = lines.map((l) => `(${l}) Tj`).join(" T* ");
  const content = `BT /F1 12 Tf ${shown} ET`;
  return (
    `%PDF-1.7\n1 0 obj\n<< /Type /Page >>\nendobj\n2 0 obj\n<< /Length ${content.length} >>\nstream\n` +
    `${content}\nendstream\nendobj\ntrailer\n<< /Root 1 0 R${encrypt ? " /Encrypt 3 0 R" : ""} >>\nstartxref\n0\n%%EOF\n`
  );
}

test("each file comes back in order, converted from its bytes, with its tokens", async () => {
  const io = memoryIo();
  const results = await new Ai(io).toMarkdown([
    file("a.csv", 'name,note\nAda,"x, y"\n'),
    file("b.html", "<h2>Head</h2><p>One &amp; two</p><style>p{}</style>"),
    file("c.pdf", pdf(["First line", "Second (line)".replace(/[()]/g, "\\$&")])),
  ]);
  assert.deepEqual(
    results.map((r) => [r.name, r.mimeType, r.format, r.data]),
    [
      ["a.csv", "text/csv", "markdown", "| name | note |\n| --- | --- |\n| Ada | x, y |"],
      ["b.html", "text/html", "markdown", "## Head\n\nOne & two"],
      ["c.pdf", "application/pdf", "markdown", "## Page 1\n\nFirst line\nSecond (line)"],
    ],
  );
  for (const r of results) assert.equal(r.tokens, countTokens(r.data));
  const [record] = io.log;
  assert.equal(record.model, TO_MARKDOWN);
  assert.deepEqual(record.inputs.files.map((f) => f.name), ["a.csv", "b.html", "c.pdf"]);
});

test("one file in, one result out", async () => {
  const result = await new Ai(memoryIo()).toMarkdown(file("a.csv", "x,y\n"));
  assert.equal(result.format, "markdown");
});

test("what it cannot read is an error result, never a throw", async () => {
  const results = await new Ai(memoryIo()).toMarkdown([
    file("locked.pdf", pdf(["x"], { encrypt: true })),
    file("broken.docx", "PK\u0003\u0004 not a zip"),
    file("latin.csv", new Uint8Array([0x63, 0x61, 0x66, 0xe9])),
    file("run.exe", "MZ"),
  ]);
  assert.deepEqual(
    results.map((r) => [r.format, r.error]),
    [
      ["error", "Conversion failed: the PDF is encrypted"],
      ["error", "Conversion failed: no zip central directory"],
      ["error", "Conversion failed: the file could not be read"],
      ["error", "Unsupported file type: .exe"],
    ],
  );
});

test("only rules naming toMarkdown apply to it", async () => {
  const io = memoryIo({
    script: {
      rules: [
        { reply: { content: "a catch-all for models" } },
        { match: { model: TO_MARKDOWN }, error: "3040: out of capacity" },
      ],
    },
  });
  await assert.rejects(new Ai(io).toMarkdown([file("a.csv", "x\n")]), /^Error: 3040: out of capacity$/);
  assert.equal(io.log[0].error, "3040: out of capacity");
});
