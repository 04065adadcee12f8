// Tiny images built byte by byte for the emulator's tests (not a test file
// itself). The PNG is complete and valid (CRCs, zlib data, IEND); the other
// formats carry real headers up to and past the size fields, which is all the
// header parser reads.
import { deflateSync } from "node:zlib";

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

const u32be = (n) => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
const u16be = (n) => [(n >> 8) & 0xff, n & 0xff];
const u16le = (n) => [n & 0xff, (n >> 8) & 0xff];
const u24le = (n) => [n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff];
const u32le = (n) => [n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, (n >>> 24) & 0xff];
const ascii = (s) => [...s].map((c) => c.charCodeAt(0));

function pngChunk(type, data) {
  const body = [...ascii(type), ...data];
  return [...u32be(data.length), ...body, ...u32be(crc32(body))];
}

/** A valid grey 8-bit PNG of width × height. */
export function png(width, height) {
  const ihdr = [...u32be(width), ...u32be(height), 8, 0, 0, 0, 0];
  const rows = new Uint8Array(height * (width + 1)); // filter byte 0, black pixels
  const idat = [...deflateSync(rows)];
  return Uint8Array.from([
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a,
    ...pngChunk("IHDR", ihdr),
    ...pngChunk("IDAT", idat),
    ...pngChunk("IEND", []),
  ]);
}

const segment = (marker, data) => [0xff, marker, ...u16be(data.length + 2), ...data];

/**
 * A JPEG header: SOI, a JFIF APP0, an APP1 whose payload holds bytes that
 * look like a SOF0 marker (a parser must skip segments by their length), a
 * DHT (C4, not a frame header), then the frame header `sof` (C0 baseline,
 * C2 progressive, …), SOS and EOI.
 */
export function jpeg(width, height, sof = 0xc0) {
  const app0 = [...ascii("JFIF"), 0, 1, 1, 0, 0, 1, 0, 1, 0, 0];
  const decoy = [0xff, 0xc0, 0x00, 0x11, 0x08, ...u16be(1), ...u16be(1)];
  const dht = [0x00, ...new Array(16).fill(0)];
  const frame = [8, ...u16be(height), ...u16be(width), 1, 1, 0x11, 0];
  return Uint8Array.from([
    0xff, 0xd8,
    ...segment(0xe0, app0),
    ...segment(0xe1, decoy),
    ...segment(0xc4, dht),
    ...segment(sof, frame),
    ...segment(0xda, [1, 1, 0, 0, 0x3f, 0]),
    0x00, 0xff, 0xd9,
  ]);
}

const riff = (chunkType, payload) =>
  Uint8Array.from([
    ...ascii("RIFF"),
    ...u32le(4 + 8 + payload.length),
    ...ascii("WEBP"),
    ...ascii(chunkType),
    ...u32le(payload.length),
    ...payload,
  ]);

/** A lossy WebP header (VP8 key frame). */
export function webpVp8(width, height) {
  return riff("VP8 ", [0x9d, 0x01, 0x00, 0x9d, 0x01, 0x2a, ...u16le(width), ...u16le(height), 0, 0]);
}

/** A lossless WebP header (VP8L: 14-bit width-1 and height-1). */
export function webpVp8l(width, height) {
  const w = width - 1;
  const h = height - 1;
  const bits = w | (h << 14); // alpha and version bits 0
  return riff("VP8L", [0x2f, bits & 0xff, (bits >>> 8) & 0xff, (bits >>> 16) & 0xff, (bits >>> 24) & 0xff, 0]);
}

/** An extended WebP header (VP8X: 24-bit canvas width-1 and height-1). */
export function webpVp8x(width, height) {
  return riff("VP8X", [0x10, 0, 0, 0, ...u24le(width - 1), ...u24le(height - 1)]);
}

/** A GIF89a header and logical screen descriptor, then the trailer. */
export function gif(width, height) {
  return Uint8Array.from([...ascii("GIF89a"), ...u16le(width), ...u16le(height), 0, 0, 0, 0x3b]);
}

/** `data:<mime>;base64,<bytes>` */
export const dataUrl = (mime, bytes) => `data:${mime};base64,${Buffer.from(bytes).toString("base64")}`;

/** An OpenAI image content part. */
export const imagePart = (mime, bytes) => ({ type: "image_url", image_url: { url: dataUrl(mime, bytes) } });
