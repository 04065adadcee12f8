// The emulator's text-to-speech: a valid MP3 whose length follows the text,
// carrying the text it was asked to speak, so a test can prove what arrived.
//
// The file is an ID3v2.3 tag (id3.org/id3v2.3.0, 3 and 4.2.2: one TXXX frame,
// description "edgechat-emulator", the prompt as its value, and a TLAN frame
// with the language) followed by silent MPEG-1 Layer III frames (ISO/IEC
// 11172-3, 2.4.1.3: a 4-byte header, then side information and main data,
// all zero here: every granule is empty, which decodes as silence).
// 32 kbit/s, 44.1 kHz, mono: 104 bytes and 1,152 samples (26.1 ms) a frame.

const encoder = new TextEncoder();

export const FRAME_HEADER = Uint8Array.of(0xff, 0xfb, 0x10, 0xc0);
export const FRAME_BYTES = 104;
export const FRAME_MS = (1152 / 44100) * 1000;
/** Speech time per character of the prompt. */
export const MS_PER_CHAR = 60;

function synchsafe(n) {
  return Uint8Array.of((n >> 21) & 0x7f, (n >> 14) & 0x7f, (n >> 7) & 0x7f, n & 0x7f);
}

function textFrame(id, body) {
  const out = new Uint8Array(10 + body.length);
  out.set(encoder.encode(id), 0);
  new DataView(out.buffer).setUint32(4, body.length);
  out.set(body, 10);
  return out;
}

const join = (parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};

/** The MP3 bytes for `text` spoken in `lang`. */
export function speechMp3(text, lang) {
  // Encoding 3 is UTF-8 (ID3v2.4's; 2.3 readers take it as Latin-1 at worst).
  const txxx = textFrame("TXXX", join([Uint8Array.of(3), encoder.encode("edgechat-emulator\0"), encoder.encode(text)]));
  const tlan = textFrame("TLAN", join([Uint8Array.of(3), encoder.encode(lang)]));
  const frames = join([txxx, tlan]);
  const tag = join([encoder.encode("ID3"), Uint8Array.of(3, 0, 0), synchsafe(frames.length), frames]);
  const count = Math.max(1, Math.ceil(([...text].length * MS_PER_CHAR) / FRAME_MS));
  const audio = new Uint8Array(count * FRAME_BYTES);
  for (let k = 0; k < count; k++) audio.set(FRAME_HEADER, k * FRAME_BYTES);
  return join([tag, audio]);
}

export function base64Of(bytes) {
  let binary = "";
  for (let at = 0; at < bytes.length; at += 0x8000) binary += String.fromCharCode(...bytes.subarray(at, at + 0x8000));
  return btoa(binary);
}

// --- speech in: Whisper ------------------------------------------------------

/** The audio format of `bytes` by its signature (as edgechat checks it), or null. */
export function audioKind(bytes) {
  const ascii = (from, to) => String.fromCharCode(...bytes.subarray(from, to));
  if (bytes[0] === 0x1a && bytes[1] === 0x45 && bytes[2] === 0xdf && bytes[3] === 0xa3) return "webm";
  if (ascii(0, 4) === "OggS") return "ogg";
  if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WAVE") return "wav";
  if (ascii(0, 4) === "fLaC") return "flac";
  if (ascii(4, 8) === "ftyp") return "mp4";
  if (ascii(0, 3) === "ID3" || (bytes[0] === 0xff && (bytes[1] & 0xe0) === 0xe0)) return "mp3";
  return null;
}

function wavSeconds(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 12;
  let rate = 0;
  while (at + 8 <= bytes.length) {
    const name = String.fromCharCode(...bytes.subarray(at, at + 4));
    const size = view.getUint32(at + 4, true);
    if (name === "fmt " && size >= 16) rate = view.getUint32(at + 16, true);
    else if (name === "data") return rate ? size / rate : 0;
    at += 8 + size + (size & 1);
  }
  return 0;
}

/**
 * Whisper's answer for these audio bytes: the emulator understands no speech,
 * so the transcript says what it got (format, size, the first 8 hex digits
 * of the bytes' SHA-256), which proves the bytes arrived whole. The language
 * is the one asked for, else "en"; `duration` a WAV's own, else 0.
 */
export async function transcriptOf(bytes, language) {
  const kind = audioKind(bytes);
  if (kind === null) return null;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  const hex = [...digest.subarray(0, 4)].map((b) => b.toString(16).padStart(2, "0")).join("");
  const text = `Emulated transcript of ${bytes.length} bytes of ${kind} audio, sha-256 ${hex}.`;
  const duration = kind === "wav" ? wavSeconds(bytes) : 0;
  return {
    text,
    word_count: text.split(/\s+/).length,
    transcription_info: { language: language ?? "en", language_probability: 1, duration, duration_after_vad: duration },
    segments: [{ start: 0, end: duration, text }],
  };
}
