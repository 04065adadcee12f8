// Server-Sent Events over a fetch() body (EventSource only does GET; /chat is a
// POST). Decoding and framing are incremental: split characters come out whole.

/** Parses SSE text pushed in pieces into {event, data}. */
export class SseParser {
  constructor() {
    this.buffer = "";
    this.event = "";
    this.data = [];
    this.pendingCR = false;
  }

  push(text) {
    const out = [];
    let s = text;
    // A "\r" ending the last piece may be half of "\r\n".
    if (this.pendingCR) {
      this.pendingCR = false;
      if (s.startsWith("\n")) s = s.slice(1);
    }
    this.buffer += s;
    let start = 0;
    const buf = this.buffer;
    for (let i = 0; i < buf.length; i++) {
      const c = buf.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.line(buf.slice(start, i), out);
      if (c === 13) {
        if (i + 1 === buf.length) this.pendingCR = true;
        else if (buf.charCodeAt(i + 1) === 10) i++;
      }
      start = i + 1;
    }
    this.buffer = buf.slice(start);
    return out;
  }

  line(line, out) {
    if (line === "") {
      if (this.data.length) out.push({ event: this.event || "message", data: this.data.join("\n") });
      this.event = "";
      this.data = [];
      return;
    }
    if (line.charCodeAt(0) === 58) return; // ":" comment, e.g. ": ping"
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
  }
}

/** Calls onEvent(name, parsedJson) per event of an SSE body; rejects when reading fails. */
export async function readEvents(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  const parser = new SseParser();
  const emit = (events) => {
    for (const { event, data } of events) {
      let value;
      try {
        value = JSON.parse(data);
      } catch {
        continue; // "[DONE]", or a cut-off line
      }
      onEvent(event, value);
    }
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    emit(parser.push(decoder.decode(value, { stream: true })));
  }
  // An event without its closing blank line is dropped (SSE spec).
  emit(parser.push(decoder.decode()));
}

const text = (value) => (typeof value === "string" ? value : "");

/** Reasoning and answer text of a model event: OpenAI chunk/completion or {"response"} (Llama). */
export function modelDelta(data) {
  if (!data || typeof data !== "object") return { reasoning: "", content: "" };
  if (Array.isArray(data.choices)) {
    const choice = data.choices[0];
    const delta = (choice && (choice.delta || choice.message)) || {};
    return { reasoning: text(delta.reasoning_content || delta.reasoning), content: text(delta.content) };
  }
  return { reasoning: "", content: text(data.response) };
}
