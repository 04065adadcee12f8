// Dictation: the microphone button records (MediaRecorder), POST
// /api/transcribe turns the recording into text, and the text lands in the
// composer to edit or send. A failure says why and leaves the question as typed.

import { renderTray, resizeInput } from "./composer.js";
import { ui } from "./dom.js";
import { state, TOKEN_KEY } from "./state.js";

// Dictation's own words (the button's first label, "dictate", is i18n.js's: the page shows it before this loads).
const TEXT = {
  en: {
    stopDictation: "Stop dictation",
    transcribing: "Transcribing…",
    noMicrophone: "No microphone is available to this page.",
    notTranscribed: (why) => `Not transcribed: ${why}`,
  },
  zh: {
    stopDictation: "停止语音输入",
    transcribing: "正在转写…",
    noMicrophone: "此页面无法使用麦克风。",
    notTranscribed: (why) => `未能转写：${why}`,
  },
};

const text = () => TEXT[state.lang] || TEXT.en;

let recording = null; // {recorder, stream, timer}
let transcribing = false;

export function renderMic() {
  const T = text();
  const label = transcribing ? T.transcribing : recording ? T.stopDictation : state.t.dictate;
  ui.mic.setAttribute("aria-label", label);
  ui.mic.title = label;
  ui.mic.setAttribute("aria-pressed", String(Boolean(recording)));
  ui.mic.disabled = transcribing;
}

function said(message) {
  state.problem = ["said", message];
  renderTray();
}

export async function toggleDictation() {
  if (recording) {
    recording.recorder.stop();
    return;
  }
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch {
    said(text().noMicrophone);
    return;
  }
  const recorder = new MediaRecorder(stream);
  const chunks = [];
  recorder.addEventListener("dataavailable", (e) => e.data.size && chunks.push(e.data));
  recorder.addEventListener("start", () => {
    // The server's limit on a recording's length, kept here: no format but WAV says it up front.
    const most = (state.limits?.max_audio_seconds || 120) * 1000;
    recording = { recorder, stream, timer: setTimeout(() => recorder.stop(), most) };
    renderMic();
  });
  recorder.addEventListener("stop", () => {
    clearTimeout(recording?.timer);
    for (const track of stream.getTracks()) track.stop();
    recording = null;
    transcribe(new Blob(chunks, { type: recorder.mimeType }));
  });
  recorder.start();
}

async function transcribe(audio) {
  transcribing = true;
  renderMic();
  const headers = { "Content-Type": audio.type || "application/octet-stream", Accept: "application/json" };
  // No Content-Language: the page's language says nothing of the one spoken; Whisper finds it.
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  try {
    const res = await fetch("/api/transcribe", { method: "POST", headers, body: audio });
    const data = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(data.error?.message || String(res.status));
    if (data.text) {
      ui.input.value = ui.input.value.trim() ? `${ui.input.value.trimEnd()} ${data.text}` : data.text;
      resizeInput();
    }
  } catch (error) {
    said(text().notTranscribed(error.message === "Failed to fetch" ? state.t.offline : error.message));
  } finally {
    transcribing = false;
    renderMic();
    ui.input.focus();
  }
}
