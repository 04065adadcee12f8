// Images attached to a question: downscaled and re-encoded in the browser
// before they are sent (a phone photo is 12 MP; a vision model reads ~1.5k px
// on the long side anyway), checked against the server's limits
// (GET /api/limits: max_images per conversation, max_image_bytes each).

/** The long side the page downscales to (what the vision models read at full detail). */
export const MAX_SIDE = 1568;
/** A file larger than this is not even decoded: no photo needs it. */
export const MAX_FILE_BYTES = 40 << 20;
const TYPE = "image/jpeg";

/** `width`×`height` scaled down (never up) to fit `max` on the long side, aspect kept. */
export function fitSize(width, height, max = MAX_SIDE) {
  const scale = Math.min(1, max / Math.max(width, height));
  return { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) };
}

/**
 * How many of `adding` files fit beside `pending` ones and the `inThread`
 * images the conversation already has: {take, refused: "count"|null}.
 * One question can hold up to max_images; older images of the conversation
 * are left out of a request that would break the limit (store.js).
 */
export function fitCount(pending, adding, limits) {
  const max = limits?.max_images;
  if (!max) return { take: adding, refused: null };
  const take = Math.max(0, Math.min(adding, max - pending));
  return { take, refused: take < adding ? "count" : null };
}

/** A user message's `content` for /chat: the text, or its parts when it has images (data URLs). */
export function contentParts(text, urls) {
  if (!urls.length) return text;
  const parts = text.trim() ? [{ type: "text", text }] : [];
  for (const url of urls) parts.push({ type: "image_url", image_url: { url } });
  return parts;
}

/**
 * Decodes `file`, draws it at most MAX_SIDE px on the long side on white
 * (JPEG has no transparency) and encodes it as JPEG, lowering the quality
 * until it fits `maxBytes`. Resolves to {blob, type, width, height}; rejects
 * with Error("size") or Error("decode").
 */
export async function encodeImage(file, maxBytes = Number.POSITIVE_INFINITY) {
  if (file.size > MAX_FILE_BYTES) throw new Error("size");
  let bitmap;
  try {
    bitmap = await createImageBitmap(file);
  } catch {
    throw new Error("decode");
  }
  const { width, height } = fitSize(bitmap.width, bitmap.height);
  const canvas = document.createElement("canvas");
  canvas.width = width;
  canvas.height = height;
  const g = canvas.getContext("2d");
  g.fillStyle = "#fff";
  g.fillRect(0, 0, width, height);
  g.drawImage(bitmap, 0, 0, width, height);
  bitmap.close();
  for (const quality of [0.85, 0.7, 0.5]) {
    const blob = await new Promise((resolve) => canvas.toBlob(resolve, TYPE, quality));
    if (blob && blob.size <= maxBytes) return { blob, type: TYPE, width, height };
  }
  throw new Error("size");
}

/** A blob's data: URL (base64), as /chat takes images. */
export function dataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}
