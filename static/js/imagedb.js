// The images of the conversations, in IndexedDB: localStorage holds a few MB
// of text, an image alone can be one. A message keeps only its images' ids
// ({id, type, width, height}, store.js); the bytes are here, by id. Those of
// this visit are also kept in memory, so a request never waits on the disk.

const kept = new Map(); // id → Blob
const urls = new Map(); // id → object URL of a thumbnail
let opened;

function db() {
  opened ||= new Promise((resolve, reject) => {
    const open = indexedDB.open("edgechat", 1);
    open.onupgradeneeded = () => open.result.createObjectStore("images");
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
  return opened;
}

async function tx(mode, act) {
  const store = (await db()).transaction("images", mode).objectStore("images");
  return new Promise((resolve, reject) => {
    const request = act(store);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

/** Keeps `blob` under `id`; resolves once it is written (false if it could not be). */
export function putImage(id, blob) {
  kept.set(id, blob);
  return tx("readwrite", (s) => s.put(blob, id)).then(
    () => true,
    () => false,
  );
}

/** The image's Blob, or null when this browser no longer has it. */
export async function getImage(id) {
  if (kept.has(id)) return kept.get(id);
  try {
    const blob = await tx("readonly", (s) => s.get(id));
    if (blob instanceof Blob) kept.set(id, blob);
    return blob instanceof Blob ? blob : null;
  } catch {
    return null;
  }
}

/** An object URL to show the image (made once per visit), or null. */
export async function imageUrl(id) {
  if (!urls.has(id)) {
    const blob = await getImage(id);
    if (!blob) return null;
    if (!urls.has(id)) urls.set(id, URL.createObjectURL(blob));
  }
  return urls.get(id);
}

/** Forgets these images (their conversation was deleted). */
export function dropImages(ids) {
  for (const id of ids) {
    kept.delete(id);
    if (urls.has(id)) URL.revokeObjectURL(urls.get(id));
    urls.delete(id);
    tx("readwrite", (s) => s.delete(id)).catch(() => {});
  }
}
