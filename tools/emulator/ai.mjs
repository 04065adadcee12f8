// edgechat's local stand-in for the Workers AI binding (`env.AI`).
//
// `new Ai(io).run(model, inputs, options)` answers like the real binding does
// (the binding's two streaming wire formats and its "<code>: …" errors): a ReadableStream
// of SSE bytes when `inputs.stream` is true, a plain object otherwise, and
// errors thrown as `Error("<code>: message")`. It never pretends to be a model:
// the default reply says it is the emulator and echoes the question (a vision
// model also lists the images it got, read from their bytes; Llama Guard
// answers "safe"). Tool calls and unsafe verdicts come only from scripts.
//
// Only web-platform APIs are used (ReadableStream, TextEncoder, setTimeout,
// AbortSignal, atob), so the same file runs in Node and inside workerd.
//
// The host supplies `io`:
//   io.readScript()   -> parsed script object or null (may return a promise);
//                        read on every call
//   io.appendLog(obj) -> record one finished call
//   io.delayMs()      -> milliseconds between generated tokens (0 = none)
//   io.now()          -> epoch ms (optional, defaults to Date.now)
import { base64Of, speechMp3, transcriptOf } from "./audio.mjs";
import { convertDocument } from "./documents.mjs";
import { imageInfo } from "./images.mjs";

/**
 * The models edgechat knows (https://developers.cloudflare.com/workers-ai/models/),
 * with the wire format each one answers in. `vision` says how a model takes
 * images: "parts" (OpenAI `image_url` content parts) or "image" (a top-level
 * `image`); absent means no images. Format "guard" is Llama Guard's verdict.
 */
export const MODELS = Object.freeze({
  "@cf/zai-org/glm-4.7-flash": { format: "openai", thinks: true },
  "@cf/zai-org/glm-5.3-flash": { format: "openai", thinks: true, vision: "parts" },
  "@cf/zai-org/glm-5.3": { format: "openai", thinks: true },
  "@cf/moonshotai/kimi-k2.6": { format: "openai", thinks: true, vision: "parts" },
  "@cf/moonshotai/kimi-k2.7-code": { format: "openai", thinks: true },
  "@cf/meta/llama-3.1-8b-instruct-fp8": { format: "native", thinks: false, defaultMaxTokens: 256 },
  "@cf/meta/llama-3.2-11b-vision-instruct": {
    format: "native",
    thinks: false,
    defaultMaxTokens: 256,
    vision: "image",
  },
  "@cf/meta/llama-guard-3-8b": { format: "guard", thinks: false },
  // https://developers.cloudflare.com/workers-ai/models/bge-m3/
  "@cf/baai/bge-m3": { format: "embedding", thinks: false, dimensions: 1024 },
  // https://developers.cloudflare.com/workers-ai/models/melotts/: {prompt, lang} -> {audio: base64 MP3}.
  "@cf/myshell-ai/melotts": { format: "tts", thinks: false },
  // https://developers.cloudflare.com/workers-ai/models/whisper-large-v3-turbo/:
  // {audio: base64, language?, task?} -> {text, transcription_info: {language, duration, …}, …}.
  "@cf/openai/whisper-large-v3-turbo": { format: "asr", thinks: false },
});

/** The model name `toMarkdown` calls are logged and scripted under. */
export const TO_MARKDOWN = "toMarkdown";

/** Pixels per side of the square tile that costs one prompt token of an image. */
export const IMAGE_TILE_PX = 28;

/** Characters per `function.arguments` fragment in a streamed tool call. */
export const TOOL_ARGUMENT_PIECE = 8;

const encoder = new TextEncoder();

// ---------------------------------------------------------------------------
// Tokens: every CJK character is a token; every other run of non-space
// characters is a token that carries the whitespace in front of it; trailing
// whitespace is a token of its own. Joining the tokens gives the text back.
const CJK = "\\p{Script=Han}\\p{Script=Hiragana}\\p{Script=Katakana}\\p{Script=Hangul}\\u3000-\\u303f\\uff00-\\uffef";
const TOKEN_RE = new RegExp(`\\s*(?:[${CJK}]|[^\\s${CJK}]+)|\\s+`, "gu");

/** Splits text into the emulator's tokens (their concatenation is the text). */
export function tokenize(text) {
  if (typeof text !== "string" || text === "") return [];
  return text.match(TOKEN_RE) ?? [];
}

/** Number of emulator tokens in a text. */
export function countTokens(text) {
  return tokenize(text).length;
}

function contentText(content) {
  if (typeof content === "string") return content;
  if (content == null) return "";
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === "string" ? part : typeof part?.text === "string" ? part.text : ""))
      .join("");
  }
  return JSON.stringify(content);
}

function lastUserText(inputs) {
  if (Array.isArray(inputs.messages)) {
    for (let i = inputs.messages.length - 1; i >= 0; i--) {
      const m = inputs.messages[i];
      if (m && m.role === "user") return contentText(m.content);
    }
    return "";
  }
  return typeof inputs.prompt === "string" ? inputs.prompt : "";
}

// The text of every message (any role) and of `prompt`, for `match.any_contains`.
function allTexts(inputs) {
  const texts = Array.isArray(inputs.messages) ? inputs.messages.map((m) => contentText(m?.content)) : [];
  if (typeof inputs.prompt === "string") texts.push(inputs.prompt);
  return texts;
}

function lastRole(inputs) {
  if (!Array.isArray(inputs.messages) || inputs.messages.length === 0) return null;
  return inputs.messages.at(-1)?.role ?? null;
}

// A call an assistant message made: its name and its arguments as text.
function toolCallTokens(call) {
  const fn = call?.function ?? {};
  const args =
    typeof fn.arguments === "string" ? fn.arguments : fn.arguments == null ? "" : JSON.stringify(fn.arguments);
  return countTokens(typeof fn.name === "string" ? fn.name : "") + countTokens(args);
}

/** Prompt tokens of one image: one per started 28x28 tile, at least 1. */
export function imageTokens({ width, height }) {
  return Math.max(1, Math.ceil(width / IMAGE_TILE_PX) * Math.ceil(height / IMAGE_TILE_PX));
}

// Each message costs its content tokens plus 2 for the role framing, plus
// the tokens of the tool calls an assistant message carries; each image its tiles.
function messageTokens(m) {
  const calls = Array.isArray(m?.tool_calls) ? m.tool_calls : [];
  return countTokens(contentText(m?.content)) + 2 + calls.reduce((k, c) => k + toolCallTokens(c), 0);
}

function promptTokens(inputs, images = []) {
  const imageCost = images.reduce((n, img) => n + imageTokens(img), 0);
  if (Array.isArray(inputs.messages)) {
    return inputs.messages.reduce((n, m) => n + messageTokens(m), imageCost);
  }
  return countTokens(inputs.prompt) + imageCost;
}

// `cached`: of the prompt's tokens, those the prompt cache served; reported
// as OpenAI does, only when there were some.
function usageOf(prompt, completion, cached = 0) {
  const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  if (cached > 0) usage.prompt_tokens_details = { cached_tokens: cached };
  return usage;
}

/** The header that names a call's session for the prompt cache. */
export const SESSION_HEADER = "x-session-affinity";
// Sessions whose last prompt the emulator keeps (then the oldest goes).
const MAX_SESSIONS = 1024;

// Prompt caching (https://developers.cloudflare.com/workers-ai/features/prompt-caching/):
// requests with the same `x-session-affinity` reach the instance that holds
// the previous prompt's prefix, and the usage reports how much of the prompt
// it served (`prompt_tokens_details.cached_tokens`). The emulator plays it
// for the OpenAI-style models: the cached tokens are those of the messages
// this prompt shares, from its start, with the session's previous prompt of
// the same model; a first call, another model or no header: none.
class PromptCache {
  constructor() {
    this._last = new Map(); // "<model>\n<session>" -> the messages as JSON
  }
  /** The cached tokens of a call, remembering its prompt for the next one. */
  take(model, inputs, options) {
    const session = options?.extraHeaders?.[SESSION_HEADER];
    if (typeof session !== "string" || session === "" || !Array.isArray(inputs?.messages)) return 0;
    const key = `${model}\n${session}`;
    const before = this._last.get(key) ?? [];
    const now = inputs.messages.map((m) => JSON.stringify(m));
    let cached = 0;
    for (let i = 0; i < Math.min(before.length, now.length) && before[i] === now[i]; i++) {
      cached += messageTokens(inputs.messages[i]);
    }
    this._last.delete(key);
    this._last.set(key, now);
    if (this._last.size > MAX_SESSIONS) this._last.delete(this._last.keys().next().value);
    return cached;
  }
}

// ---------------------------------------------------------------------------
// Errors

function apiError(code, message) {
  return new Error(`${code}: ${message}`);
}

function abortReason(signal) {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

function messageOf(err) {
  if (err == null) return null;
  if (typeof err === "string") return err;
  return typeof err.message === "string" ? err.message : String(err);
}

function jsonSafe(value) {
  if (value === undefined) return null;
  try {
    return JSON.parse(JSON.stringify(value));
  } catch {
    return String(value);
  }
}

function validateInputs(inputs) {
  if (inputs === null || typeof inputs !== "object" || Array.isArray(inputs)) {
    throw apiError(3003, "Incomplete request: inputs must be an object with `messages` or `prompt`");
  }
  if (inputs.messages !== undefined) {
    if (!Array.isArray(inputs.messages) || inputs.messages.length === 0) {
      throw apiError(3003, "Incomplete request: `messages` must be a non-empty list");
    }
    for (const m of inputs.messages) {
      if (m === null || typeof m !== "object" || typeof m.role !== "string") {
        throw apiError(3003, "Incomplete request: every message needs a string `role`");
      }
    }
    return;
  }
  if (typeof inputs.prompt !== "string") {
    throw apiError(3003, "Incomplete request: provide `messages` or `prompt`");
  }
}

// ---------------------------------------------------------------------------
// Images: what a vision model was sent, read from the images' own bytes.

function base64Bytes(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// `data:<type>[;param]*;base64,<data>` -> bytes, or null.
function dataUrlBytes(url) {
  const m = /^data:([^,]*),(.*)$/s.exec(url);
  if (!m || !/;base64$/i.test(m[1])) return null;
  try {
    return base64Bytes(m[2].replace(/\s+/g, ""));
  } catch {
    return null;
  }
}

function imageError(model, message) {
  return apiError(5006, `Error: invalid image input for ${model}: ${message}`);
}

function readImage(model, bytes, which) {
  if (bytes === null) throw imageError(model, `${which} is not base64 data`);
  const info = imageInfo(bytes);
  if (info === null) throw imageError(model, `${which} is not a PNG, JPEG, WebP or GIF image`);
  return info;
}

// The top-level `image` of Llama 3.2 Vision: an array of byte values, the
// bytes themselves, or base64 (a data URL too).
function topLevelImageBytes(image) {
  if (image instanceof Uint8Array) return image;
  if (image instanceof ArrayBuffer) return new Uint8Array(image);
  if (ArrayBuffer.isView(image)) return new Uint8Array(image.buffer, image.byteOffset, image.byteLength);
  if (Array.isArray(image)) {
    if (!image.every((v) => Number.isInteger(v) && v >= 0 && v <= 255)) return null;
    return Uint8Array.from(image);
  }
  if (typeof image === "string") {
    if (image.startsWith("data:")) return dataUrlBytes(image);
    try {
      return base64Bytes(image.replace(/\s+/g, ""));
    } catch {
      return null;
    }
  }
  return null;
}

/**
 * The images of a call, in order, as {mime, width, height}. A model that does
 * not take images the way they were sent throws 5006, and so does an image
 * whose bytes are not one the header parser knows.
 */
function collectImages(model, inputs) {
  const vision = MODELS[model]?.vision ?? null;
  const urls = [];
  for (const m of Array.isArray(inputs.messages) ? inputs.messages : []) {
    if (!Array.isArray(m.content)) continue;
    for (const part of m.content) {
      if (part?.type !== "image_url") continue;
      const url = typeof part.image_url === "string" ? part.image_url : part.image_url?.url;
      urls.push(typeof url === "string" ? url : "");
    }
  }
  if (urls.length > 0 && vision !== "parts") {
    throw apiError(
      5006,
      vision === "image"
        ? `Error: ${model} takes its image in the top-level \`image\`, not in image_url content parts`
        : `Error: ${model} does not accept image input (image_url content parts)`,
    );
  }
  const images = urls.map((url, i) => {
    const which = `image ${i + 1}`;
    if (!url.startsWith("data:")) throw imageError(model, `${which} is not a data: URL (the emulator fetches nothing)`);
    return readImage(model, dataUrlBytes(url), which);
  });
  if (inputs.image !== undefined && inputs.image !== null) {
    if (vision !== "image") throw apiError(5006, `Error: ${model} does not take a top-level \`image\``);
    images.push(readImage(model, topLevelImageBytes(inputs.image), "`image`"));
  }
  return images;
}

/** "I see 2 images: image/png 640×480, image/jpeg 1568×1176." */
export function describeImages(images) {
  const list = images.map((img) => `${img.mime} ${img.width}×${img.height}`).join(", ");
  return `I see ${images.length} image${images.length === 1 ? "" : "s"}: ${list}.`;
}

// ---------------------------------------------------------------------------
// Rendering a reply (default or scripted) into the wire formats.

function maxTokensOf(inputs, model) {
  const v = inputs.max_completion_tokens ?? inputs.max_tokens;
  if (typeof v === "number" && Number.isFinite(v) && v >= 0) return Math.floor(v);
  return MODELS[model]?.defaultMaxTokens ?? Infinity;
}

function wantsThinking(inputs) {
  if (inputs.chat_template_kwargs?.enable_thinking === false) return false;
  if ("reasoning_effort" in inputs && inputs.reasoning_effort === null) return false;
  return true;
}

function defaultReply(model, inputs, images) {
  const asked = lastUserText(inputs);
  const seen = images.length > 0 ? ` ${describeImages(images)}` : "";
  const content = `This is the edgechat local Workers AI emulator, not a real model (${model}).${seen} You asked: «${asked}»`;
  let reasoning = null;
  if (MODELS[model]?.thinks && wantsThinking(inputs)) {
    const n = countTokens(asked);
    reasoning = `No model runs here: say so, then echo the ${n}-token message.`;
  }
  return { content, reasoning };
}

// The id a model gives a tool call the script names none for, in the
// model's own form (cloudflare/ai #527, #384). Kimi's ids name the function
// and count the answer's calls from 0, so the same ids come back on every
// turn; GLM's are vLLM's `chatcmpl-tool-<hex>`; other models get one of ours.
export function toolCallId(model, name, callNumber, index) {
  if (model.startsWith("@cf/moonshotai/")) return `functions.${name}:${index}`;
  if (model.startsWith("@cf/zai-org/")) {
    const hex = ((callNumber * 0x9e3779b1 + index * 0x85ebca6b) >>> 0).toString(16).padStart(8, "0");
    return `chatcmpl-tool-${hex}${index.toString(16).padStart(4, "0")}`;
  }
  return `call_emu_${callNumber}_${index}`;
}

// A reply's `tool_calls` as the wire's {id, name, arguments (text)}.
function toolCallsOf(reply, model, callNumber) {
  if (reply.tool_calls === undefined || reply.tool_calls === null) return [];
  if (!Array.isArray(reply.tool_calls)) throw new Error("edgechat emulator script: `tool_calls` must be a list");
  return reply.tool_calls.map((c, i) => {
    if (!c || typeof c !== "object" || typeof c.name !== "string" || c.name === "") {
      throw new Error(`edgechat emulator script: tool call ${i} needs a string \`name\``);
    }
    const args =
      c.arguments === undefined ? "{}" : typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments);
    const id = typeof c.id === "string" ? c.id : toolCallId(model, c.name, callNumber, i);
    return { id, name: c.name, arguments: args };
  });
}

// `function.arguments` in pieces of TOOL_ARGUMENT_PIECE characters (never
// inside a surrogate pair).
function argumentPieces(text) {
  const chars = Array.from(text);
  const pieces = [];
  for (let i = 0; i < chars.length; i += TOOL_ARGUMENT_PIECE) {
    pieces.push(chars.slice(i, i + TOOL_ARGUMENT_PIECE).join(""));
  }
  return pieces;
}

/**
 * Turns a reply into the exact events and the non-stream object.
 * Returns { events: [{text, token}], body }, where `token` marks events that
 * carry a generated token (those are the ones paced by the delay).
 */
function render(ctx, reply) {
  const { model, inputs, id, created, images } = ctx;
  const format = reply.format ?? MODELS[model]?.format ?? "openai";
  if (format !== "openai" && format !== "native") {
    throw new Error(`edgechat emulator script: unknown reply format ${JSON.stringify(format)}`);
  }
  const calls = toolCallsOf(reply, model, ctx.callNumber);
  if (calls.length > 0 && format !== "openai") {
    throw new Error("edgechat emulator script: `tool_calls` need the openai format (edgechat sends Llama no tools)");
  }
  const budget = maxTokensOf(inputs, model);
  const prompt = promptTokens(inputs, images);

  const reasoningTokens = format === "openai" ? tokenize(reply.reasoning ?? "") : [];
  const contentTokens = tokenize(reply.content ?? "");
  // A tool call is one token for its head (id, type, name) and one per
  // arguments piece.
  const toolTokens = calls.flatMap((call, index) => [
    ["tool", { index, head: true }],
    ...argumentPieces(call.arguments).map((piece) => ["tool", { index, piece }]),
  ]);
  const all = [
    ...reasoningTokens.map((t) => ["reasoning_content", t]),
    ...contentTokens.map((t) => ["content", t]),
    ...toolTokens,
  ];
  const cut = all.length > budget;
  const emitted = cut ? all.slice(0, budget) : all;
  const finishReason = reply.finish_reason ?? (cut ? "length" : calls.length > 0 ? "tool_calls" : "stop");

  // usage: undefined -> computed; an object -> used for the final usage;
  // null -> no usage anywhere.
  const withUsage = reply.usage !== null;
  const cached = format === "openai" ? (ctx.cachedTokens ?? 0) : 0;
  const finalUsage = reply.usage ?? usageOf(prompt, emitted.length, cached);

  const reasoningOut = emitted
    .filter(([k]) => k === "reasoning_content")
    .map(([, t]) => t)
    .join("");
  const contentList = emitted.filter(([k]) => k === "content").map(([, t]) => t);
  // The calls as far as they were sent: those whose head went out, with the
  // argument pieces that followed it.
  const sentCalls = [];
  for (const [kind, t] of emitted) {
    if (kind !== "tool") continue;
    const call = calls[t.index];
    if (t.head) sentCalls.push({ id: call.id, type: "function", function: { name: call.name, arguments: "" } });
    else sentCalls.at(-1).function.arguments += t.piece;
  }
  let contentOut;
  if (contentList.length > 0) contentOut = contentList.join("");
  else contentOut = reply.content == null || (cut && contentTokens.length > 0) ? null : reply.content;

  const events = [];
  const ev = (obj, token = false) => events.push({ text: `data: ${JSON.stringify(obj)}\n\n`, token });
  let body;

  if (format === "openai") {
    const chunk = (choice, usage) => {
      const obj = { id, object: "chat.completion.chunk", created, model, choices: [choice] };
      if (withUsage) obj.usage = usage;
      return obj;
    };
    const deltaOf = (kind, t) => {
      if (kind !== "tool") return { [kind]: t };
      const call = calls[t.index];
      const fn = t.head ? { name: call.name, arguments: "" } : { arguments: t.piece };
      const entry = t.head
        ? { index: t.index, id: call.id, type: "function", function: fn }
        : { index: t.index, function: fn };
      return { tool_calls: [entry] };
    };
    emitted.forEach(([kind, t], i) => {
      ev(chunk({ index: 0, delta: deltaOf(kind, t) }, usageOf(prompt, i + 1, cached)), true);
    });
    ev(chunk({ index: 0, delta: {}, finish_reason: finishReason }, finalUsage));
    if (withUsage) ev({ response: "", usage: finalUsage });

    const message = { role: "assistant", content: contentOut };
    if (reasoningOut !== "") message.reasoning_content = reasoningOut;
    if (sentCalls.length > 0) message.tool_calls = sentCalls;
    body = {
      id,
      object: "chat.completion",
      created,
      model,
      choices: [{ index: 0, message, finish_reason: finishReason }],
    };
    if (withUsage) body.usage = finalUsage;
  } else {
    for (const [, text] of emitted) ev({ response: text }, true);
    ev(withUsage ? { response: "", usage: finalUsage } : { response: "" });
    body = { response: contentOut ?? "" };
    if (withUsage) body.usage = finalUsage;
  }
  if (reply.done !== false) events.push({ text: "data: [DONE]\n\n", token: false });
  return { events, body, tokens: emitted.length };
}

// ---------------------------------------------------------------------------
// Embeddings: a vector per text, the same for the same text, of unit length;
// `{shape, data, pooling}` as the binding answers (workers-types
// `BGEM3OuputEmbedding`), with no token counts, as the binding gives none.
//
// No model runs here, but the vectors mean something, enough to test
// similarity thresholds: a text is a bag of its content words. It is
// lower-cased (NFKC), cut into words (runs of letters and digits), stop words
// and question fillers dropped (STOP_WORDS: "how do I", "please explain",
// "what's the"), each word stemmed lightly (stem: plurals, -ing, -ed, -ly);
// Chinese, Japanese and Korean runs give each character and each pair of
// neighbours (most Chinese words are two characters), less a few particles.
// Each feature adds ±1 at four places of the vector chosen by hashing it
// (FNV-1a), and the sum is normalised. So the cosine of two texts is about
// the share of content words they have in common: the same words in another
// order or with other fillers score 1, one word in nine different about
// 0.94, one in three about 0.82, texts with no word in common about 0. A text
// of stop words only is hashed whole, as one feature.

/** Words that carry no content here: dropped before hashing. */
export const STOP_WORDS = new Set(
  `a an the and or but if then so of to in on at by for from with about as into over under
  is are was were be been being am do does did doing have has had having will would shall should can could may might must
  i me my mine myself you your yours we us our they them their he him his she her it its this that these those there here
  what which who whom whose when where why how whats hows please tell explain show give let know want need like just also
  very really some any all more most much many s t d ll re ve m hi hello hey thanks thank`.split(/\s+/),
);
const CJK_CHAR = new RegExp(`[${CJK}]`, "u");
const CJK_PARTICLES = new Set([..."的了是吗呢吧啊我你他她它们这那什么怎请"]);
const CONSONANT_PAIR = /([b-df-hj-km-np-rtv-y])\1$/;

/** A light English stemmer: enough that "passwords" and "password", "resetting" and "reset" meet. */
export function stem(word) {
  if (word.length <= 3 || /^\p{N}+$/u.test(word)) return word;
  let s = word;
  if (s.endsWith("ies") && s.length > 4) s = `${s.slice(0, -3)}y`;
  else if (s.endsWith("sses")) s = s.slice(0, -2);
  else if (s.endsWith("s") && !/(ss|us|is)$/.test(s)) s = s.slice(0, -1);
  for (const [suffix, rest] of [
    ["ing", 3],
    ["ed", 3],
    ["ly", 4],
  ]) {
    if (s.endsWith(suffix) && s.length - suffix.length >= rest) {
      s = s.slice(0, -suffix.length);
      if (CONSONANT_PAIR.test(s)) s = s.slice(0, -1); // "resett" -> "reset"
      break;
    }
  }
  return s;
}

/** The features a text's vector is made of: its content words, stemmed, in order. */
export function contentWords(text) {
  const words = [];
  for (const run of text
    .normalize("NFKC")
    .toLowerCase()
    .match(/[\p{L}\p{N}]+/gu) ?? []) {
    if (CJK_CHAR.test(run)) {
      const chars = [...run].filter((c) => !CJK_PARTICLES.has(c));
      words.push(...chars);
      for (let i = 0; i + 1 < chars.length; i++) words.push(chars[i] + chars[i + 1]);
    } else if (!STOP_WORDS.has(run)) {
      words.push(stem(run));
    }
  }
  return words;
}

function fnv1a(text, seed) {
  let hash = seed >>> 0;
  for (const byte of encoder.encode(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}

/** Places a feature adds to. */
const PLACES = 4;

/** The emulator's vector for a text: `dimensions` numbers, unit length. */
export function embedding(text, dimensions) {
  const words = contentWords(text);
  const features = words.length > 0 ? words : [`\u0000${text}`];
  const vector = new Array(dimensions).fill(0);
  for (const feature of features) {
    for (let place = 0; place < PLACES; place++) {
      const hash = fnv1a(feature, 0x811c9dc5 + place * 0x9e3779b9);
      vector[hash % dimensions] += hash & 0x80000000 ? -1 : 1;
    }
  }
  const norm = Math.hypot(...vector);
  // Features that cancel out to nothing (their places collided with opposite
  // signs): one place of the whole text instead.
  if (norm === 0) vector[fnv1a(text, 0) % dimensions] = 1;
  return vector.map((x) => x / (norm || 1));
}

function embed(model, inputs) {
  const text = inputs?.text;
  const texts = typeof text === "string" ? [text] : text;
  if (!Array.isArray(texts) || texts.length === 0 || !texts.every((t) => typeof t === "string")) {
    throw apiError(5006, "Error: oneOf at '/' not met: required properties at '/' are 'text'");
  }
  const { dimensions } = MODELS[model];
  return { shape: [texts.length, dimensions], data: texts.map((t) => embedding(t, dimensions)), pooling: "cls" };
}

/**
 * Llama Guard's verdict: `response` is "safe" / "unsafe\nS1,S10", or with
 * `response_format: {type: "json_object"}` the object {safe, categories}.
 * A reply's `unsafe: [categories]` makes it unsafe.
 */
function renderGuard(ctx, reply) {
  const { inputs, images } = ctx;
  const unsafe = reply.unsafe ?? null;
  if (unsafe !== null && !(Array.isArray(unsafe) && unsafe.every((c) => typeof c === "string"))) {
    throw new Error('edgechat emulator script: `unsafe` must be a list of category strings like ["S1"]');
  }
  const safe = unsafe === null;
  const categories = safe ? [] : [...unsafe];
  const text = safe ? "safe" : categories.length > 0 ? `unsafe\n${categories.join(",")}` : "unsafe";
  const tokens = countTokens(text);
  const body = { response: inputs.response_format?.type === "json_object" ? { safe, categories } : text };
  if (reply.usage !== null) body.usage = reply.usage ?? usageOf(promptTokens(inputs, images), tokens);
  return { body, tokens };
}

/** Stream steps for a rendered reply: token events are preceded by the delay. */
function stepsForRendered(events, delay, splitBytes) {
  const steps = [];
  if (!splitBytes) {
    for (const e of events) {
      if (e.token && delay > 0) steps.push({ delay });
      steps.push({ bytes: encoder.encode(e.text) });
    }
    return steps;
  }
  const n = Math.floor(splitBytes);
  if (!(n >= 1)) throw new Error("edgechat emulator script: split_bytes must be a positive integer");
  // Cut the whole byte stream every n bytes; a piece waits one delay for each
  // token event that starts inside it, so the overall pacing is unchanged.
  const parts = events.map((e) => encoder.encode(e.text));
  const total = parts.reduce((s, p) => s + p.length, 0);
  const all = new Uint8Array(total);
  const tokenStarts = [];
  let off = 0;
  parts.forEach((p, i) => {
    if (events[i].token) tokenStarts.push(off);
    all.set(p, off);
    off += p.length;
  });
  for (let start = 0; start < total; start += n) {
    const end = Math.min(start + n, total);
    const starting = tokenStarts.filter((s) => s >= start && s < end).length;
    if (delay > 0 && starting > 0) steps.push({ delay: delay * starting });
    steps.push({ bytes: all.slice(start, end) });
  }
  return steps;
}

/** Stream steps for a `chunks` rule: the chunks exactly as written. */
function stepsForChunks(chunks) {
  if (!Array.isArray(chunks)) throw new Error("edgechat emulator script: `chunks` must be a list");
  return chunks.map((c) => {
    if (typeof c === "string") return { bytes: encoder.encode(c) };
    if (c && typeof c === "object") {
      if (typeof c.b64 === "string") return { bytes: base64Bytes(c.b64) };
      if (typeof c.delay_ms === "number") return { delay: c.delay_ms };
      if (typeof c.error === "string") return { error: c.error };
      if (c.stall === true) return { stall: true };
    }
    throw new Error(`edgechat emulator script: unknown chunk ${JSON.stringify(c)}`);
  });
}

// ---------------------------------------------------------------------------
// The script seam.

function ruleMatches(rule, model, inputs) {
  const m = rule.match ?? {};
  if (m.model !== undefined && m.model !== "*" && m.model !== model) return false;
  if (m.contains !== undefined && !lastUserText(inputs).includes(String(m.contains))) return false;
  if (m.any_contains !== undefined) {
    const needle = String(m.any_contains);
    if (!allTexts(inputs).some((text) => text.includes(needle))) return false;
  }
  if (m.last_role !== undefined && lastRole(inputs) !== m.last_role) return false;
  return true;
}

function delayOf(ms) {
  return typeof ms === "number" && Number.isFinite(ms) && ms > 0 ? ms : 0;
}

function checkScript(script) {
  if (script === null || script === undefined) return null;
  if (typeof script !== "object" || Array.isArray(script) || !Array.isArray(script.rules)) {
    throw new Error('edgechat emulator script: expected an object like {"rules": [...]}');
  }
  const account = script.account;
  if (account !== undefined && (account?.allocation !== "used_up" || ![3036, 4006].includes(account.code ?? 3036))) {
    throw new Error('edgechat emulator script: `account` must be like {"allocation": "used_up", "code": 3036 or 4006}');
  }
  return script;
}

// An account whose daily free allocation is used up: the allocation is
// account-wide, so every model answers the same, before anything else is
// looked at. Cloudflare's errors page lists 3036 "Account limited" (HTTP 429,
// https://developers.cloudflare.com/workers-ai/platform/errors/); projects
// in the wild report 4006 with the same message (OmniRoute #6980, Mail-Otter #88).
function allocationError(script) {
  if (script?.account === undefined) return null;
  const code = script.account.code ?? 3036;
  return apiError(code, "You have used up your daily free allocation of 10,000 neurons.");
}

// A rule's model at capacity (`queued_ms`): the call waits in the capacity
// queue, unless the caller asked `rejectIfBusy`, which fails at once with
// 3040 (https://developers.cloudflare.com/changelog/post/2026-09-17-reject-if-busy/).
function queueWait(rule, options) {
  const queued = delayOf(rule?.queued_ms);
  if (queued === 0) return 0;
  if (options?.rejectIfBusy === true) throw apiError(3040, "Capacity temporarily exceeded, please try again.");
  return queued;
}

/** A call's pending timers and stall waits, woken all at once when it stops. */
class Stopper {
  constructor() {
    this.stopped = false;
    this._wakers = new Set();
  }
  stop() {
    if (this.stopped) return;
    this.stopped = true;
    for (const wake of this._wakers) wake();
    this._wakers.clear();
  }
  /** Resolves after ms, or as soon as the call stops. */
  sleep(ms) {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      let timer;
      const wake = () => {
        clearTimeout(timer);
        this._wakers.delete(wake);
        resolve();
      };
      timer = setTimeout(wake, Math.max(0, ms));
      this._wakers.add(wake);
    });
  }
  /**
   * Resolves only when the call stops. It keeps a timer pending meanwhile:
   * workerd cancels a request whose code waits on nothing at all as "hung".
   */
  async forever() {
    while (!this.stopped) await this.sleep(1000);
  }
}

// ---------------------------------------------------------------------------

export class Ai {
  constructor(io = {}) {
    this.io = io;
    this._calls = 0;
    this._scriptKey = null;
    this._ruleUses = new Map(); // rule index -> calls served, for `times`
    this._promptCache = new PromptCache();
  }

  _now() {
    return typeof this.io.now === "function" ? this.io.now() : Date.now();
  }

  _delay() {
    const d = typeof this.io.delayMs === "function" ? Number(this.io.delayMs()) : 0;
    return Number.isFinite(d) && d > 0 ? d : 0;
  }

  async _script() {
    const raw = typeof this.io.readScript === "function" ? await this.io.readScript() : null;
    const script = checkScript(raw);
    // `times` counters live as long as the script content stays the same.
    const key = script === null ? null : JSON.stringify(script);
    if (key !== this._scriptKey) {
      this._scriptKey = key;
      this._ruleUses.clear();
    }
    return script;
  }

  _pickRule(script, model, inputs) {
    if (!script) return null;
    for (let i = 0; i < script.rules.length; i++) {
      const rule = script.rules[i];
      if (!rule || typeof rule !== "object" || !ruleMatches(rule, model, inputs)) continue;
      if (rule.times !== undefined) {
        const used = this._ruleUses.get(i) ?? 0;
        if (used >= rule.times) continue;
        this._ruleUses.set(i, used + 1);
      }
      return rule;
    }
    return null;
  }

  /** Records a finished call; a promise when the host's log is asynchronous. */
  _log(record) {
    if (typeof this.io.appendLog !== "function") return null;
    try {
      const r = this.io.appendLog(record);
      // A broken log must not break the call.
      if (r && typeof r.catch === "function") return r.catch(() => {});
    } catch {}
    return null;
  }

  /**
   * Same contract as `env.AI.run`. options: {signal, gateway, extraHeaders, ...};
   * everything but `signal` is only recorded in the log.
   */
  async run(model, inputs, options = {}) {
    options = options ?? {};
    const signal = options.signal ?? null;
    // `waitUntil` (a host's, never logged) keeps the call's context alive
    // until its log line is written: a cancelled stream's is written after
    // the caller stopped listening.
    const { signal: _omit, waitUntil: keep, ...rest } = options;
    const record = {
      model,
      inputs: jsonSafe(inputs),
      options: jsonSafe(rest),
      stream: inputs?.stream === true,
      aborted: false,
      error: null,
      t_start: this._now(),
      t_end: null,
    };
    let finished = false;
    let logged = null;
    const stopper = new Stopper();
    let onAbort = null;
    const finish = (fields = {}) => {
      if (finished) return false;
      finished = true;
      stopper.stop();
      if (onAbort) signal.removeEventListener("abort", onAbort);
      Object.assign(record, fields, { t_end: this._now() });
      logged = this._log(record);
      if (logged && typeof keep === "function") keep(logged);
      return true;
    };
    // Finishes the call and waits until its log line is written, so a host
    // whose log is remote (workerd's, over the control server) has it before
    // the caller sees the end.
    const settle = async (fields) => {
      finish(fields);
      await logged;
    };

    try {
      if (signal?.aborted) throw abortReason(signal);
      const script = await this._script();
      const usedUp = allocationError(script);
      if (usedUp) throw usedUp;
      // A model id outside MODELS is known only if a rule names it exactly.
      const named = !!script?.rules.some((r) => r?.match?.model === model);
      if (!(model in MODELS) && !named) {
        throw apiError(5007, `No such model ${model} or task`);
      }
      if (MODELS[model]?.format === "embedding") {
        const rule = this._pickRule(script, model, inputs);
        if (rule && typeof rule.error === "string") throw new Error(rule.error);
        const body = rule && "json" in rule ? rule.json : embed(model, inputs);
        await settle();
        return body;
      }
      const asr = MODELS[model]?.format === "asr";
      if (asr && typeof inputs?.audio !== "string") {
        throw apiError(5006, "Error: required properties at '/' are 'audio'");
      }
      if (!asr) validateInputs(inputs);
      const guard = MODELS[model]?.format === "guard";
      const tts = MODELS[model]?.format === "tts";
      if (tts && (typeof inputs.prompt !== "string" || inputs.prompt.length < 1)) {
        throw apiError(5006, "Error: required properties at '/' are 'prompt'");
      }

      if (guard && !Array.isArray(inputs.messages)) {
        throw apiError(3003, "Incomplete request: Llama Guard classifies `messages`, not `prompt`");
      }
      const images = collectImages(model, inputs);
      const rule = this._pickRule(script, model, inputs);

      if (signal) {
        onAbort = () => {
          const reason = abortReason(signal);
          if (finish({ aborted: true, error: messageOf(reason) }) && stopper.onAbort) {
            stopper.onAbort(reason);
          }
        };
        signal.addEventListener("abort", onAbort, { once: true });
      }
      // `delay_ms` on the rule (or in its reply): a wait before the rule acts;
      // `queued_ms`: the same wait, as a queue for capacity.
      const ruleDelay = delayOf(rule?.delay_ms) + delayOf(rule?.reply?.delay_ms) + queueWait(rule, options);
      const waitRuleDelay = async () => {
        if (ruleDelay > 0) await stopper.sleep(ruleDelay);
        if (signal?.aborted) throw abortReason(signal);
      };

      if (rule && typeof rule.error === "string") {
        await waitRuleDelay();
        throw new Error(rule.error);
      }
      if (rule && "json" in rule) {
        await waitRuleDelay();
        await settle();
        return rule.json;
      }
      if (asr) {
        // An undecodable input's real error code is unverified; 5006 is the binding's for bad input.
        const result = await transcriptOf(topLevelImageBytes(inputs.audio) ?? new Uint8Array(), inputs.language);
        if (!result) throw apiError(5006, "Error: the audio could not be decoded");
        await waitRuleDelay();
        await settle();
        return result;
      }

      const delay = this._delay();
      const ctx = {
        model,
        inputs,
        images,
        id: `chatcmpl-emu-${++this._calls}`,
        callNumber: this._calls,
        created: Math.floor(record.t_start / 1000),
        cachedTokens: guard || tts ? 0 : this._promptCache.take(model, inputs, options),
      };
      let steps;
      let body = null;
      let bodyDelay = 0;
      if (tts && !(rule && "chunks" in rule)) {
        // One MP3, whether or not a stream was asked; its length follows the text.
        await this._wait(stopper, ruleDelay + delay);
        if (signal?.aborted) throw abortReason(signal);
        await settle();
        return { audio: base64Of(speechMp3(inputs.prompt, inputs.lang ?? "en")) };
      }
      if (rule && "chunks" in rule) {
        steps = stepsForChunks(rule.chunks);
      } else if (guard) {
        // Llama Guard answers with one object, whether or not a stream was asked.
        const verdict = renderGuard(ctx, rule?.reply ?? {});
        await this._wait(stopper, ruleDelay + delay * verdict.tokens);
        if (signal?.aborted) throw abortReason(signal);
        await settle();
        return verdict.body;
      } else {
        const reply = rule?.reply ? rule.reply : defaultReply(model, inputs, images);
        const rendered = render(ctx, reply);
        steps = stepsForRendered(rendered.events, delay, rule?.reply?.split_bytes);
        body = rendered.body;
        bodyDelay = delay * rendered.tokens;
      }
      if (ruleDelay > 0) {
        // One wait, merged with a first token's delay, so the first byte
        // comes exactly ruleDelay (+ the delay) after the call.
        if (steps[0]?.delay !== undefined) steps[0] = { delay: steps[0].delay + ruleDelay };
        else steps.unshift({ delay: ruleDelay });
        bodyDelay += ruleDelay;
      }

      if (inputs.stream !== true) {
        const result = body !== null ? await this._wait(stopper, bodyDelay) : await this._collect(stopper, steps);
        if (signal?.aborted) throw abortReason(signal);
        await settle();
        return body !== null ? body : result;
      }
      return this._stream(steps, stopper, finish, settle);
    } catch (err) {
      const aborted = !!signal?.aborted;
      await settle({ aborted, error: messageOf(err) });
      throw err;
    }
  }

  /**
   * Same contract as `env.AI.toMarkdown`: one {name, blob} or a list, one
   * ConversionResult or a list (documents.mjs). Logged as a call of model
   * "toMarkdown"; only rules that name that model apply (`error`, `json`).
   */
  async toMarkdown(files) {
    const list = Array.isArray(files) ? files : [files];
    const record = { model: TO_MARKDOWN, inputs: { files: [] }, error: null, t_start: this._now(), t_end: null };
    try {
      const read = await Promise.all(
        list.map(async (f) => ({ name: String(f?.name), bytes: new Uint8Array(await f.blob.arrayBuffer()) })),
      );
      record.inputs.files = read.map(({ name, bytes }) => ({ name, bytes: bytes.length }));
      const script = await this._script();
      const named = script && { rules: script.rules.map((r) => (r?.match?.model === TO_MARKDOWN ? r : null)) };
      const rule = this._pickRule(named, TO_MARKDOWN, {});
      if (rule && typeof rule.error === "string") throw new Error(rule.error);
      const results =
        rule && "json" in rule
          ? rule.json
          : await Promise.all(read.map(({ name, bytes }) => convertDocument(name, bytes, countTokens)));
      record.results = jsonSafe(results);
      return Array.isArray(files) || !Array.isArray(results) ? results : results[0];
    } catch (err) {
      record.error = messageOf(err);
      throw err;
    } finally {
      record.t_end = this._now();
      await this._log(record);
    }
  }

  async _wait(stopper, ms) {
    if (ms > 0) await stopper.sleep(ms);
    return null;
  }

  /** Non-stream call on a `chunks` rule: the chunks are the raw JSON body. */
  async _collect(stopper, steps) {
    const parts = [];
    for (const step of steps) {
      if (stopper.stopped) return null;
      if (step.delay !== undefined) await stopper.sleep(step.delay);
      else if (step.stall) await stopper.forever();
      else if (step.error !== undefined) throw new Error(step.error);
      else parts.push(step.bytes);
    }
    const all = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
    let off = 0;
    for (const p of parts) {
      all.set(p, off);
      off += p.length;
    }
    const text = new TextDecoder().decode(all);
    try {
      return JSON.parse(text);
    } catch {
      throw new Error(
        "edgechat emulator script: non-stream call on a `chunks` rule whose chunks are not one JSON body",
      );
    }
  }

  _stream(steps, stopper, finish, settle) {
    let i = 0;
    let controller;
    stopper.onAbort = (reason) => {
      try {
        controller.error(reason);
      } catch {
        // already closed or errored
      }
    };
    return new ReadableStream({
      start(c) {
        controller = c;
      },
      async pull(c) {
        while (i < steps.length) {
          if (stopper.stopped) return;
          const step = steps[i++];
          if (step.delay !== undefined) {
            await stopper.sleep(step.delay);
          } else if (step.stall) {
            await stopper.forever();
          } else if (step.error !== undefined) {
            const err = new Error(step.error);
            await settle({ error: err.message });
            c.error(err);
            return;
          } else if (step.bytes.length > 0) {
            c.enqueue(step.bytes.slice());
            return;
          }
        }
        if (stopper.stopped) return;
        await settle();
        c.close();
      },
      cancel() {
        finish({ aborted: true });
      },
    });
  }
}
