// The composer: the question, its images, the model it goes to.

import { answer } from "./answer.js";
import { scrollDown } from "./conversation.js";
import { documentChip, documentType, readDocument } from "./documents.js";
import { button, el, ui } from "./dom.js";
import { MODEL_KEY, state, store } from "./state.js";
import { encodeImage, fitCount, getImage, parseLimits, putImage } from "./store.js";
import { addVersion, parentOf, tip } from "./tree.js";

export function send(text) {
  if (state.active || (!text.trim() && !state.pending.length && !state.docs.length && !state.encoding)) return;
  if (state.encoding) {
    state.attaching.then(() => send(text));
    return;
  }
  // Compare mode (compare.js, once turned on) asks its models instead.
  if (state.compareMode) {
    state.compareMode.send(text);
    return;
  }
  if (state.pending.length && chosenModel()?.vision === false) return; // the tray says why
  answer(placeQuestion(text));
}

/** The composer's question (its text, images and documents) added to the current conversation. */
export function placeQuestion(text) {
  const conversation = store.current || store.create();
  const last = tip(conversation);
  // After an unanswered question (an import can end so), a new version of it: roles alternate.
  const parent = last.role === "user" ? parentOf(conversation, last) : last;
  const question = { role: "user", content: text };
  if (state.pending.length) {
    question.images = state.pending.map(({ url, ...image }) => {
      image.id = crypto.randomUUID();
      putImage(image.id, url);
      return image;
    });
  }
  if (state.docs.length) {
    question.documents = state.docs.map(({ url, ...doc }) => {
      doc.id = crypto.randomUUID();
      putImage(doc.id, url); // the same store of data URLs as images
      return doc;
    });
  }
  state.pending = [];
  state.docs = [];
  state.problem = null;
  renderTray();
  addVersion(parent, question);
  if (!conversation.title) conversation.title = text.trim().replace(/\s+/g, " ").slice(0, 60);
  ui.input.value = "";
  resizeInput();
  state.stick = true;
  return conversation;
}

// Enter confirming an IME candidate must not send.
export const isSendKey = (e) => e.key === "Enter" && !e.shiftKey && !e.isComposing && e.keyCode !== 229;

export function sendOnEnter(e) {
  if (isSendKey(e)) {
    e.preventDefault();
    send(ui.input.value);
  }
}

export function resizeInput() {
  if (CSS.supports("field-sizing", "content")) return;
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, 200)}px`;
}

export function setBusy(busy) {
  ui.send.hidden = busy;
  ui.stop.hidden = !busy;
}

export async function loadModels() {
  try {
    const res = await fetch("/api/models", { headers: { Accept: "application/json" } });
    if (!res.ok) throw new Error(String(res.status));
    const data = await res.json();
    state.models = Array.isArray(data) ? data : data.models || [];
  } catch {
    state.models = [];
  }
  fillModels();
}

export function fillModels() {
  const { models, t } = state;
  if (!models.length) return;
  const saved = localStorage.getItem(MODEL_KEY);
  const chosen = models.find((m) => m.alias === saved) || models.find((m) => m.default) || models[0];
  ui.model.replaceChildren(
    ...models.map((m) => {
      const marks =
        m.alias === "auto"
          ? [m.label, t.autoPicks]
          : [m.label, m.vision && t.sees, !m.free_plan && t.paid].filter(Boolean);
      const option = el("option", null, marks.join(" · "));
      option.value = m.alias;
      option.selected = m === chosen;
      return option;
    }),
  );
  ui.model.disabled = false;
}

export const chosenModel = () => state.models.find((m) => m.alias === ui.model.value);

export function modelLabel(id) {
  const m = state.models.find((x) => x.id === id || x.alias === id);
  return m ? m.label : id;
}

export async function loadLimits() {
  try {
    const res = await fetch("/api/limits", { headers: { Accept: "application/json" } });
    if (res.ok) state.limits = parseLimits(await res.json());
  } catch {
    state.limits = null; // the server names any limit broken
  }
  if (state.limits) ui.input.maxLength = state.limits.max_message_chars;
}

export function picture(image, k) {
  const img = el("img", "thumb");
  img.alt = state.t.imageAlt(k + 1, image.width, image.height);
  if (image.url) img.src = image.url;
  else
    getImage(image.id).then((url) => {
      if (url) img.src = url;
    });
  return img;
}

export function renderTray() {
  const { t, models } = state;
  ui.previews.replaceChildren(
    ...state.pending.map((p, k) => {
      const li = el("li", "preview");
      const remove = button(
        "btn-icon remove",
        "×",
        () => {
          state.pending = state.pending.filter((x) => x !== p);
          state.problem = null;
          renderTray();
          ui.input.focus();
        },
        t.removeImage(k + 1),
      );
      li.append(picture(p, k), remove);
      return li;
    }),
    ...state.docs.map((doc) =>
      documentChip(doc, () => {
        state.docs = state.docs.filter((x) => x !== doc);
        state.problem = null;
        renderTray();
        ui.input.focus();
      }),
    ),
  );
  const why = state.problem ? [el("span", null, t[state.problem[0]](state.problem[1]))] : [];
  const model = chosenModel();
  // A model that sees, by name (not auto, whose choice the switch would hide).
  const seeing = models.find((m) => m.vision && m.alias !== "auto");
  if (state.pending.length && model?.vision === false) {
    why.push(el("span", null, t.noVision(model.label)));
    if (seeing)
      why.push(
        button("btn btn-small", t.switchTo(seeing.label), () => {
          ui.model.value = seeing.alias;
          localStorage.setItem(MODEL_KEY, seeing.alias);
          renderTray();
          ui.input.focus();
        }),
      );
  }
  ui.warn.replaceChildren(...why);
  scrollDown();
}

export function attach(files) {
  const documents = [...files].filter((f) => documentType(f));
  if (documents.length) attachDocuments(documents);
  const images = [...files].filter((f) => f.type.startsWith("image/") && !documentType(f));
  if (!images.length) return;
  state.encoding += images.length;
  state.attaching = state.attaching.then(async () => {
    await state.limitsReady;
    const { limits } = state;
    const take = fitCount(state.pending.length, images.length, limits);
    state.problem = take < images.length && ["tooMany", limits.max_images];
    state.encoding -= images.length - take;
    for (const file of images.slice(0, take)) {
      try {
        state.pending.push(await encodeImage(file, limits?.max_image_bytes));
      } catch (error) {
        state.problem = [error.message, file.name];
      }
      state.encoding -= 1;
      renderTray();
    }
  });
}

function attachDocuments(files) {
  state.encoding += files.length;
  state.attaching = state.attaching.then(async () => {
    await state.limitsReady;
    for (const file of files) {
      try {
        const most = state.limits?.max_documents;
        if (most && state.docs.length >= most) throw new Error(state.t.docTooMany(most));
        state.docs.push(await readDocument(file));
      } catch (error) {
        state.problem = ["said", error.message];
      }
      state.encoding -= 1;
      renderTray();
    }
  });
}

export function pasteImages(e) {
  const files = e.clipboardData?.files || [];
  if (!files.length) return;
  e.preventDefault();
  attach(files);
}

export function dragImages(e) {
  if (![...(e.dataTransfer?.types || [])].includes("Files")) return;
  e.preventDefault();
  if (e.type === "drop") attach(e.dataTransfer.files);
}
