// The emulator's image-header parser: type and pixel size from the bytes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { inflateSync } from "node:zlib";
import { imageInfo } from "../../tools/emulator/images.mjs";
import { gif, jpeg, png, webpVp8, webpVp8l, webpVp8x } from "./image-fixtures.mjs";

test("the PNG fixture is a real PNG: signature, IHDR, zlib rows, IEND", () => {
  const bytes = png(3, 2);
  assert.deepEqual([...bytes.slice(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const view = new DataView(bytes.buffer);
  const idatLength = view.getUint32(33);
  assert.equal(new TextDecoder().decode(bytes.slice(37, 41)), "IDAT");
  assert.equal(inflateSync(bytes.slice(41, 41 + idatLength)).length, 2 * (3 + 1));
  assert.equal(new TextDecoder().decode(bytes.slice(-8, -4)), "IEND");
});

test("PNG: width and height from IHDR", () => {
  assert.deepEqual(imageInfo(png(640, 480)), { mime: "image/png", width: 640, height: 480 });
  assert.deepEqual(imageInfo(png(1, 1)), { mime: "image/png", width: 1, height: 1 });
  // 32-bit sizes past 2^31 stay positive
  const big = png(1, 1);
  big.set([0x80, 0, 0, 1], 16);
  assert.equal(imageInfo(big).width, 0x80000001);
});

test("JPEG: the size of the first frame header, segments skipped by length (a decoy SOF inside APP1, DHT is not a frame)", () => {
  assert.deepEqual(imageInfo(jpeg(1568, 1176)), { mime: "image/jpeg", width: 1568, height: 1176 });
  assert.deepEqual(imageInfo(jpeg(300, 200, 0xc2)), { mime: "image/jpeg", width: 300, height: 200 }, "progressive");
  assert.deepEqual(imageInfo(jpeg(65535, 7, 0xc1)), { mime: "image/jpeg", width: 65535, height: 7 });
});

test("JPEG: fill bytes before a marker are skipped; scan data before any frame header is no size", () => {
  const b = jpeg(20, 10);
  const padded = Uint8Array.from([0xff, 0xd8, 0xff, 0xff, ...b.slice(2)]);
  assert.deepEqual(imageInfo(padded), { mime: "image/jpeg", width: 20, height: 10 });
  const noFrame = Uint8Array.from([0xff, 0xd8, 0xff, 0xda, 0x00, 0x08, 1, 1, 0, 0, 0x3f, 0, 0xff, 0xd9]);
  assert.equal(imageInfo(noFrame), null);
});

test("WebP: VP8, VP8L and VP8X", () => {
  assert.deepEqual(imageInfo(webpVp8(800, 600)), { mime: "image/webp", width: 800, height: 600 });
  assert.deepEqual(imageInfo(webpVp8l(16383, 1)), { mime: "image/webp", width: 16383, height: 1 });
  assert.deepEqual(imageInfo(webpVp8l(123, 4567)), { mime: "image/webp", width: 123, height: 4567 });
  assert.deepEqual(imageInfo(webpVp8x(20000, 16777216)), { mime: "image/webp", width: 20000, height: 16777216 });
});

test("GIF: the logical screen", () => {
  assert.deepEqual(imageInfo(gif(320, 200)), { mime: "image/gif", width: 320, height: 200 });
  const gif87 = gif(5, 6);
  gif87.set([0x37], 4);
  assert.deepEqual(imageInfo(gif87), { mime: "image/gif", width: 5, height: 6 });
});

test("not an image, or cut before the size: null", () => {
  assert.equal(imageInfo(new Uint8Array()), null);
  assert.equal(imageInfo(new TextEncoder().encode("hello, this is text and no image at all")), null);
  assert.equal(imageInfo(png(10, 10).slice(0, 20)), null, "PNG cut inside IHDR");
  assert.equal(imageInfo(jpeg(10, 10).slice(0, 30)), null, "JPEG cut before its frame header");
  assert.equal(imageInfo(webpVp8(10, 10).slice(0, 25)), null, "VP8 cut before its sizes");
  assert.equal(imageInfo(gif(10, 10).slice(0, 8)), null);
  const badVp8 = webpVp8(10, 10);
  badVp8[23] = 0; // the start code 9D 01 2A is broken
  assert.equal(imageInfo(badVp8), null);
  // An array of byte values works as well as a Uint8Array.
  assert.deepEqual(imageInfo([...gif(2, 3)]), { mime: "image/gif", width: 2, height: 3 });
});
