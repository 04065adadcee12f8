// The diagram frame's script (static/diagram.html), a classic script: the
// frame is sandboxed to an opaque origin, where module scripts would need
// CORS. It draws one Mermaid source at a time and posts the SVG back as text;
// the page shows it as an image, so nothing in it can run on the page.
/* global mermaid */

(() => {
  const BASE = {
    startOnLoad: false,
    securityLevel: "strict",
    htmlLabels: false,
    flowchart: { htmlLabels: false },
    fontFamily: "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
    maxTextSize: 50000,
    maxEdges: 500,
  };
  let queue = Promise.resolve();
  let n = 0;

  // The reason without Mermaid's pointer lines ("...A -->", "-----^"), cut short.
  const short = (error) =>
    String(error?.message || error || "error")
      .split("\n")
      .map((s) => s.trim())
      .filter((s) => s && !/^-*\^$/.test(s) && !s.startsWith("..."))
      .slice(0, 2)
      .join(" ")
      .replace(/^(.{200}).+$/, "$1…");

  async function render(id, source, theme) {
    mermaid.initialize({ ...BASE, theme: theme === "dark" ? "dark" : "default" });
    try {
      await mermaid.parse(source);
      n += 1;
      const { svg } = await mermaid.render(`diagram-${n}`, source);
      const box = new DOMParser().parseFromString(svg, "image/svg+xml").documentElement;
      const title = box.querySelector(":scope > title")?.textContent || "";
      const description = box.querySelector(":scope > desc")?.textContent || "";
      // Its own size, so that as an image it is drawn at the size Mermaid laid it out.
      const [, , width, height] = (box.getAttribute("viewBox") || "").split(/[\s,]+/).map(Number);
      if (width > 0 && height > 0) {
        box.setAttribute("width", String(Math.ceil(width)));
        box.setAttribute("height", String(Math.ceil(height)));
      }
      const out = new XMLSerializer().serializeToString(box);
      parent.postMessage({ type: "drawn", id, svg: out, title, description }, "*");
    } catch (error) {
      parent.postMessage({ type: "drawn", id, error: short(error) }, "*");
    } finally {
      for (const stray of document.querySelectorAll("body > :not(script)")) stray.remove();
    }
  }

  window.addEventListener("message", (event) => {
    if (event.source !== parent) return;
    const { type, id, source, theme } = event.data || {};
    if (type !== "draw" || typeof id !== "number" || typeof source !== "string") return;
    queue = queue.then(() => render(id, source, theme));
  });
  parent.postMessage({ type: "ready" }, "*");
})();
