// Mermaid diagrams, drawn once their code block is closed. Mermaid runs in a
// sandboxed frame (static/diagram.html: allow-scripts only, an opaque origin,
// its own CSP), loaded the first time an answer has a diagram; the page
// receives the SVG as text and shows it as an <img> from a data: URL, where
// no script runs and nothing is fetched. The page's own CSP stays as it was
// but for frame-src 'self'. The source stays one click away; a diagram that
// cannot be drawn shows its source and a short reason.

const MAX_SVG = 4_000_000;
const TIMEOUT_MS = 20_000;
let frame = null;
let ready = null;
let seq = 0;
const waiting = new Map();
const drawn = new Map(); // theme and source → what the frame answered, for an answer shown again

function onMessage(event) {
  if (!frame || event.source !== frame.contentWindow) return;
  const data = event.data;
  if (!data || typeof data !== "object") return;
  if (data.type === "ready") frame.dispatchEvent(new Event("diagram-ready"));
  else if (data.type === "drawn" && waiting.has(data.id)) {
    waiting.get(data.id)(data);
    waiting.delete(data.id);
  }
}

function open() {
  ready ||= new Promise((resolve) => {
    frame = document.createElement("iframe");
    frame.className = "diagram-frame";
    frame.setAttribute("sandbox", "allow-scripts");
    frame.setAttribute("aria-hidden", "true");
    frame.tabIndex = -1;
    frame.title = "diagram renderer";
    frame.src = "/diagram";
    frame.addEventListener("diagram-ready", () => resolve(), { once: true });
    window.addEventListener("message", onMessage);
    document.body.append(frame);
  });
  return ready;
}

function ask(source, theme) {
  const id = ++seq;
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      waiting.delete(id);
      resolve({ error: "timed out" });
    }, TIMEOUT_MS);
    waiting.set(id, (data) => {
      clearTimeout(timer);
      resolve(data);
    });
    frame.contentWindow.postMessage({ type: "draw", id, source, theme }, "*");
  });
}

function button(text, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "copy";
  b.textContent = text;
  b.addEventListener("click", onClick);
  return b;
}

/** Draws the Mermaid source of a `.code.diagram` block above its (then hidden) source. */
export async function draw(block, labels = {}) {
  if (block.dataset.drawn) return;
  block.dataset.drawn = "pending";
  const pre = block.querySelector("pre");
  const source = pre.querySelector("code").textContent;
  const dark = globalThis.matchMedia?.("(prefers-color-scheme: dark)").matches;
  const theme = dark ? "dark" : "default";
  const key = `${theme}\n${source}`;
  let result = drawn.get(key);
  if (!result) {
    const started = await Promise.race([
      open().then(() => true),
      new Promise((resolve) => setTimeout(() => resolve(false), TIMEOUT_MS)),
    ]);
    result = started ? await ask(source, theme) : { error: "the diagram renderer did not load" };
    if (started && (result.svg || (result.error && result.error !== "timed out"))) drawn.set(key, result);
  }
  if (!block.isConnected) return;
  const svg = typeof result.svg === "string" && result.svg.length < MAX_SVG ? result.svg : "";
  if (!svg.trimStart().startsWith("<svg")) {
    block.dataset.drawn = "error";
    const note = document.createElement("p");
    note.className = "diagram-error";
    note.textContent = `${labels.diagramError || "The diagram could not be drawn:"} ${String(result.error || "no picture").slice(0, 300)}`;
    block.append(note);
    return;
  }
  block.dataset.drawn = "ok";
  const view = document.createElement("div");
  view.className = "diagram-view";
  const img = document.createElement("img");
  img.alt =
    [result.title, result.description]
      .filter((s) => typeof s === "string" && s)
      .join(": ")
      .slice(0, 500) ||
    labels.diagram ||
    "Diagram";
  img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
  view.append(img);
  pre.hidden = true;
  const head = block.querySelector(".code-head");
  const showSource = labels.showSource || "Source";
  const showDiagram = labels.showDiagram || "Diagram";
  const toggle = button(showSource, () => {
    const showing = !pre.hidden;
    pre.hidden = showing;
    view.hidden = !showing;
    toggle.textContent = showing ? showSource : showDiagram;
    toggle.setAttribute("aria-pressed", String(!showing));
  });
  toggle.className = "source-toggle";
  toggle.setAttribute("aria-pressed", "false");
  head.insertBefore(toggle, head.querySelector("button.copy"));
  block.insertBefore(view, pre);
}
