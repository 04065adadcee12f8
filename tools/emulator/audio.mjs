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
