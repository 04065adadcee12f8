// Math typeset by KaTeX (static/vendor/katex/, from the pinned npm package),
// loaded the first time an answer has math. KaTeX builds DOM nodes (its
// sizes set through element.style, which the CSP's style-src allows) with
// MathML beside them for screen readers; copying rendered math copies its
// LaTeX (KaTeX's copy-tex). \href and the like stay off (trust: false).

let katex = null;
let loading = null;

/** Fetches KaTeX and its stylesheet (once): as soon as an answer shows math, before it closes. */
export function load() {
  loading ||= (async () => {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = new URL("../vendor/katex/katex.css", import.meta.url).href;
    document.head.append(link);
    katex = (await import("../vendor/katex/katex.js")).default;
  })();
  return loading;
}

const OPTIONS = {
  throwOnError: true,
  trust: false,
  strict: "ignore",
  output: "htmlAndMathml",
  maxExpand: 500,
  maxSize: 50,
};

/** Typesets every `.math` under `root` (or `root` itself) that is not typeset yet. */
export async function typeset(root) {
  await load();
  const nodes = root.matches?.(".math") ? [root] : [...root.querySelectorAll(".math")];
  let since = performance.now();
  for (const node of nodes) {
    // Many formulas at once (a whole answer shown again): a few at a time, in tasks of their own.
    if (performance.now() - since > 8) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      since = performance.now();
    }
    if (node.dataset.typeset || !node.isConnected) continue;
    const tex = node.dataset.tex;
    const display = node.classList.contains("math-display");
    const target = document.createElement(display ? "div" : "span");
    try {
      katex.render(tex, target, { ...OPTIONS, displayMode: display });
      node.replaceChildren(...target.childNodes);
      node.dataset.typeset = "ok";
    } catch (error) {
      // What the model wrote stays, marked, with KaTeX's reason on hover.
      node.dataset.typeset = "error";
      node.title = String(error?.message || error).replace(/^KaTeX parse error: /, "");
    }
  }
}
