// Read aloud: an answer spoken piece by piece (POST /api/speech answers an
// MP3 of each), the next piece asked for while one plays, so the first words
// come quickly; Stop ends it at once. The server reads Markdown as prose.

import { ui } from "./dom.js";
import { TOKEN_KEY } from "./state.js";

let reading = null; // {message, controller}

export const isReading = (message) => reading?.message === message;

const FENCE = /^\s*(```|~~~)/;

/** `text` in pieces of at most `most` characters: by paragraph, then by
 * sentence; a fenced code block stays one piece (the server names it, unread). */
export function pieces(text, most = 300) {
  const blocks = [];
  let lines = [];
  let fenced = false;
  const flush = () => {
    if (lines.join("").trim()) blocks.push(lines.join("\n"));
    lines = [];
  };
  for (const line of text.split("\n")) {
    if (!fenced && !line.trim()) flush();
    else lines.push(line);
    if (FENCE.test(line)) fenced = !fenced;
  }
  flush();
  const out = [];
  for (const block of blocks) {
    if (block.length <= most || FENCE.test(block)) {
      out.push(block.slice(0, most * 4));
      continue;
    }
    let piece = "";
    for (const sentence of block.match(/[^.!?。！？]+[.!?。！？]*\s*/g) || [block]) {
      if (piece && piece.length + sentence.length > most) {
        out.push(piece);
        piece = "";
      }
      piece += sentence.slice(0, most);
    }
    if (piece.trim()) out.push(piece);
  }
  return out;
}

async function speech(text, signal) {
  const headers = { "Content-Type": "application/json", Accept: "audio/mpeg" };
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch("/api/speech", { method: "POST", headers, body: JSON.stringify({ text }), signal });
  if (!res.ok) throw new Error(String(res.status));
  return res.blob();
}

function play(blob, signal) {
  return new Promise((resolve) => {
    const audio = ui.speaker;
    const url = URL.createObjectURL(blob);
    const done = () => {
      audio.onended = null;
      audio.onerror = null;
      URL.revokeObjectURL(url);
      resolve();
    };
    audio.onended = done;
    audio.onerror = done;
    signal.addEventListener(
      "abort",
      () => {
        audio.pause();
        done();
      },
      { once: true },
    );
    audio.src = url;
    audio.play().catch(done);
  });
}

/** Reads `message` aloud; `changed()` runs when it starts and when it ends. */
export async function readAloud(message, changed) {
  stopReading();
  const run = { message, controller: new AbortController() };
  const { signal } = run.controller;
  reading = run;
  changed();
  try {
    const parts = pieces(message.content);
    let next = parts.length ? speech(parts[0], signal) : null;
    for (let k = 0; k < parts.length && !signal.aborted; k++) {
      const blob = await next;
      if (k + 1 < parts.length) next = speech(parts[k + 1], signal);
      await play(blob, signal);
    }
    await next?.catch(() => {});
  } catch {
    // a refused or aborted piece ends the reading; the answer stays as it is
  } finally {
    if (reading === run) reading = null;
    changed();
  }
}

export function stopReading() {
  reading?.controller.abort();
}
