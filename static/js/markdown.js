// Answers' Markdown on the page, as it streams. The renderer itself
// (render.js: markdown-it, highlight.js) is not part of the first load: it is
// fetched after the first paint (loadRenderer, from app.js) or as soon as an
// answer needs it, which until then shows as plain text.

let renderer = null;
let loading = null;
const waiting = new Set();

/**
 * Fetches the renderer once; streams that were waiting for it render then,
 * and in the idle time after, it warms up (render.js `warm`).
 */
export function loadRenderer() {
  loading ||= import("./render.js").then((module) => {
    renderer = module;
    for (const stream of waiting) stream.flush();
    waiting.clear();
    setTimeout(() => module.warm(), 0);
    return module;
  });
  return loading;
}

// The scanner's view of the block structure: only what decides where a cut is safe.
const FENCE = /^ {0,3}(`{3,}(?=[^`]*$)|~{3,})[ \t]*([^\s`]*)/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;

/**
 * Renders a growing (streamed) source into `host`: closed blocks once, only
 * the open tail again. A cut is made at a whole column-0 line outside a fence
 * that follows a blank line and is no list item, opens a fence (without "|"),
 * or follows the closing line of a fence opened at column 0: nothing later can
 * join earlier blocks, so the result equals a whole render. Link reference
 * definitions carry over; one that arrives after a block that may use it
 * renders the closed blocks again. An open code block at the end is repainted
 * in place. Closed blocks get their math typeset, diagrams drawn and languages
 * detected (render.js `enhance`); `update(source, true)` says the source is
 * whole, which closes every block. A source that does not extend the last one
 * starts over.
 */
export class MarkdownStream {
  constructor(host, labels = {}) {
    this.host = host;
    this.labels = labels;
    this.wanted = null;
    this.reset();
  }

  reset() {
    this.source = "";
    this.final = false;
    this.committed = 0; // source[0, committed) is final
    this.scanned = 0; // lines before this offset are classified
    this.fence = null; // the open fence at `scanned`, if any…
    this.fenceStart = -1; // …where its opening line starts…
    this.fenceTop = false; // …and whether it opened at column 0
    this.blank = false; // the last classified line was blank
    this.env = { references: {} };
    this.tail = [];
    this.code = null; // {element, lang} when the tail is one open code block
    this.host.replaceChildren();
  }

  /** Renders what was asked for before the renderer arrived. */
  flush() {
    if (!this.wanted) return;
    const [source, final] = this.wanted;
    this.wanted = null;
    this.reset();
    this.update(source, final);
  }

  update(raw, final = false) {
    const source = raw.replace(/\r\n?/g, "\n");
    if (!renderer) {
      // Until the renderer is here: the text as it is.
      this.wanted = [source, final];
      waiting.add(this);
      const p = document.createElement("p");
      p.className = "plain";
      p.textContent = source;
      this.host.replaceChildren(...(source ? [p] : []));
      loadRenderer();
      return;
    }
    if (source === this.source && final === this.final) return;
    if (!source.startsWith(this.source) || (this.final && !final)) this.reset();
    this.source = source;
    this.final = final;
    let cut = this.scan(source);
    if (final) cut = source.length;
    if (cut > this.committed) this.commit(cut);
    const tail = source.slice(this.committed);
    if (this.growCode(tail)) return;
    for (const node of this.tail) node.remove();
    const rendered = renderer.renderMarkdown(tail, this.labels, { references: { ...this.env.references } });
    this.tail = [...rendered.childNodes];
    this.host.append(rendered);
    const openCode = this.fence && this.fenceStart === this.committed && tail.includes("\n");
    const element = openCode && this.tail.length === 1 ? this.tail[0].querySelector("pre > code") : null;
    this.code = element ? { element, lang: FENCE.exec(tail.slice(0, tail.indexOf("\n")))[2] } : null;
  }

  /** Classifies the whole lines not seen yet; returns the last safe cut. */
  scan(source) {
    let cut = this.committed;
    while (this.scanned < source.length) {
      const end = source.indexOf("\n", this.scanned);
      if (end < 0) break; // the last line is not whole yet
      const start = this.scanned;
      const line = source.slice(start, end);
      this.scanned = end + 1;
      if (this.fence) {
        const close = FENCE_CLOSE.exec(line);
        if (close && close[1][0] === this.fence[0] && close[1].length >= this.fence.length) {
          this.fence = null;
          if (this.fenceTop) cut = this.scanned;
          this.blank = false;
        }
        continue;
      }
      if (!line.trim()) {
        this.blank = true;
        continue;
      }
      const m = FENCE.exec(line);
      const column0 = /^\S/.test(line);
      if (column0 && ((this.blank && !ITEM.test(line)) || (m && !line.includes("|")))) cut = start;
      this.blank = false;
      if (m) {
        this.fence = m[1];
        this.fenceStart = start;
        this.fenceTop = column0;
      }
    }
    return cut;
  }

  /** Renders source[committed, cut) for good and hands it to `enhance`. */
  commit(cut) {
    for (const node of this.tail) node.remove();
    this.tail = [];
    this.code = null;
    const known = Object.keys(this.env.references).length;
    let rendered = renderer.renderMarkdown(this.source.slice(this.committed, cut), this.labels, this.env);
    if (Object.keys(this.env.references).length > known && this.committed > 0) {
      // A definition for a [label] that earlier blocks may use: those again, with it.
      this.host.replaceChildren();
      this.env = { references: {} };
      rendered = renderer.renderMarkdown(this.source.slice(0, cut), this.labels, this.env);
    }
    const nodes = [...rendered.childNodes];
    this.host.append(rendered);
    this.committed = cut;
    renderer.enhance(nodes, this.labels);
  }

  /** Paints the tail onto its open code block; false when it is not one now. */
  growCode(tail) {
    if (!this.code || !this.fence || !this.fenceTop || this.fenceStart !== this.committed) return false;
    // A possible closing fence is left to the renderer.
    const last = tail.slice(tail.lastIndexOf("\n") + 1);
    if (/^ {0,3}(`{3,}|~{3,})/.test(last) || (last.trim() && last.trim().replaceAll(this.fence[0], "") === ""))
      return false;
    // The block's text as the parser sees it (the last line may be partial).
    const text = renderer.openFenceText(tail);
    if (text === null) return false;
    if (this.code.element.closest(".diagram")) this.code.element.textContent = text;
    else renderer.paint(this.code.element, text, this.code.lang);
    return true;
  }
}
