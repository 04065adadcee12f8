// Presets: the operator's starting points (GET /api/presets), offered while
// a conversation is empty. The chosen one's name goes with every question of
// that conversation; its prompt never reaches the page.

import { fillModels } from "./composer.js";
import { button, el, ui } from "./dom.js";
import { MODEL_KEY, state, store } from "./state.js";

export async function loadPresets() {
  try {
    const res = await fetch("/api/presets", { headers: { Accept: "application/json" } });
    const data = res.ok ? await res.json() : null;
    state.presets = Array.isArray(data?.presets) ? data.presets : [];
  } catch {
    state.presets = [];
  }
  renderPresets();
}

const titleOf = (preset) => preset.title?.[state.lang] || preset.title?.en || preset.name;

/** The preset a conversation was started from, when this deployment still has it. */
export const presetOf = (conversation) => state.presets.find((p) => p.name === conversation?.preset);

export function choosePreset(preset) {
  const conversation = store.current || store.create();
  if (conversation.next.length) return;
  conversation.preset = conversation.preset === preset.name ? undefined : preset.name;
  if (conversation.preset && preset.model && state.models.some((m) => m.alias === preset.model)) {
    localStorage.setItem(MODEL_KEY, preset.model);
    fillModels();
  }
  store.touch(conversation);
  renderPresets();
  ui.input.focus();
}

export function renderPresets() {
  const { t } = state;
  const conversation = store.current;
  const chosen = presetOf(conversation);
  const open = !conversation?.next.length;
  ui.presets.hidden = !open || !state.presets.length;
  ui.presetList.replaceChildren(
    ...state.presets.map((preset) => {
      const pick = button("btn preset", titleOf(preset), () => choosePreset(preset));
      pick.setAttribute("aria-pressed", String(preset === chosen));
      const item = el("li");
      item.append(pick);
      return item;
    }),
  );
  const greeting = chosen?.greeting?.[state.lang] || chosen?.greeting?.en || "";
  ui.greeting.textContent = greeting;
  ui.greeting.hidden = !greeting;
  ui.presetNote.textContent = chosen && !open ? t.presetNote(titleOf(chosen)) : "";
  ui.presetNote.hidden = !ui.presetNote.textContent;
}
