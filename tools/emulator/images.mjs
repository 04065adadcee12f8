// What an image says about itself: its type and pixel size, read from its
// own header bytes, so the emulator's vision models can answer honestly about
// what they were sent. No decoding and no dependency: a few fixed offsets per
// format, web APIs only (runs in Node and in workerd).
//
// Formats (the offsets are the formats' own specifications):
//   PNG   signature, then the IHDR chunk: width, height as 32-bit big-endian
//         (https://www.w3.org/TR/png-3/#11IHDR)
//   JPEG  SOI, then marker segments up to the first SOFn (C0-CF except C4,
//         C8, CC): height, width as 16-bit big-endian (ITU T.81, B.2.2)
//   WebP  RIFF/WEBP, then the first chunk: VP8 (key frame header), VP8L
//         (14-bit sizes) or VP8X (24-bit canvas sizes)
//         (https://developers.google.com/speed/webp/docs/riff_container)
//   GIF   GIF87a/GIF89a, then the logical screen: width, height as 16-bit
//         little-endian (GIF89a spec, section 18)

const ascii = (bytes, at, text) => {
  if (at + text.length > bytes.length) return false;
  for (let i = 0; i < text.length; i++) if (bytes[at + i] !== text.charCodeAt(i)) return false;
  return true;
};
const u16be = (b, at) => (b[at] << 8) | b[at + 1];
const u16le = (b, at) => b[at] | (b[at + 1] << 8);
const u24le = (b, at) => b[at] | (b[at + 1] << 8) | (b[at + 2] << 16);
const u32be = (b, at) => b[at] * 0x1000000 + ((b[at + 1] << 16) | (b[at + 2] << 8) | b[at + 3]);

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

function png(b) {
  if (b.length < 24 || !PNG_SIGNATURE.every((v, i) => b[i] === v) || !ascii(b, 12, "IHDR")) return null;
  return { mime: "image/png", width: u32be(b, 16), height: u32be(b, 20) };
}

function gif(b) {
  if (b.length < 10 || !(ascii(b, 0, "GIF87a") || ascii(b, 0, "GIF89a"))) return null;
  return { mime: "image/gif", width: u16le(b, 6), height: u16le(b, 8) };
}

// Markers without a length field: TEM, RST0-7, SOI.
const standalone = (m) => m === 0x01 || (m >= 0xd0 && m <= 0xd8);
const isSof = (m) => m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc;

function jpeg(b) {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return null;
  let at = 2;
  while (at < b.length) {
    if (b[at] !== 0xff) return null;
    while (at < b.length && b[at] === 0xff) at++; // fill bytes
    if (at >= b.length) return null;
    const marker = b[at++];
    if (standalone(marker)) continue;
    if (marker === 0xd9 || marker === 0xda) return null; // EOI or scan data before any frame header
    if (at + 2 > b.length) return null;
    const length = u16be(b, at);
    if (length < 2) return null;
    if (isSof(marker)) {
      // length(2) precision(1) height(2) width(2)
      if (at + 7 > b.length) return null;
      return { mime: "image/jpeg", width: u16be(b, at + 5), height: u16be(b, at + 3) };
    }
    at += length;
  }
  return null;
}

function webp(b) {
  if (b.length < 16 || !ascii(b, 0, "RIFF") || !ascii(b, 8, "WEBP")) return null;
  const data = 20; // first chunk: fourcc at 12, size at 16, payload at 20
  if (ascii(b, 12, "VP8 ")) {
    // frame tag (3 bytes), start code 9D 01 2A, then 14-bit sizes (2 scale bits)
    if (b.length < data + 10 || b[data + 3] !== 0x9d || b[data + 4] !== 0x01 || b[data + 5] !== 0x2a) return null;
    return { mime: "image/webp", width: u16le(b, data + 6) & 0x3fff, height: u16le(b, data + 8) & 0x3fff };
  }
  if (ascii(b, 12, "VP8L")) {
    if (b.length < data + 5 || b[data] !== 0x2f) return null;
    const b0 = b[data + 1];
    const b1 = b[data + 2];
    const b2 = b[data + 3];
    const b3 = b[data + 4];
    return {
      mime: "image/webp",
      width: 1 + (b0 | ((b1 & 0x3f) << 8)),
      height: 1 + ((b1 >> 6) | (b2 << 2) | ((b3 & 0x0f) << 10)),
    };
  }
  if (ascii(b, 12, "VP8X")) {
    if (b.length < data + 10) return null;
    return { mime: "image/webp", width: 1 + u24le(b, data + 4), height: 1 + u24le(b, data + 7) };
  }
  return null;
}

/**
 * `{mime, width, height}` read from an image's header bytes (PNG, JPEG, WebP,
 * GIF), or null when the bytes are none of these or are cut before the size.
 */
export function imageInfo(bytes) {
  const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  return png(b) ?? jpeg(b) ?? webp(b) ?? gif(b);
}
