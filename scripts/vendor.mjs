// Builds static/vendor/ — the page's third-party libraries — from the pinned
// npm packages in node_modules (package-lock.json holds their integrity
// hashes), with esbuild (pinned the same way) where a library ships no browser
// module. Run by scripts/setup.sh, which rebuilds it when this script or the
// packages' versions change, so a fresh clone, CI and `npm run deploy` all
// serve what the lock file names; static/vendor/ is not committed (.gitignore).
//
// Why generated and not committed: the libraries are several MB of minified
// code (Mermaid alone ~5.5 MB) that nobody reviews line by line; committing
// them would add that to the history at every upgrade and let the copy drift
// from the package. Here an upgrade is one line in package.json, and
// `node scripts/vendor.mjs --check` (run by `npm test`) proves static/vendor/
// is what this script makes from the installed packages.
//
//   node scripts/vendor.mjs          build (or rebuild) static/vendor/
//   node scripts/vendor.mjs --check  exit 1 unless static/vendor/ is up to date
//
// What it makes (each file is loaded only after the first paint or on demand):
//   markdown-it.js        markdown-it's own browser ES module, copied
//   highlight/common.js   highlight.js core + the common languages, one ES module
//   highlight/<name>.js   every other language, one ES module each (on demand)
//   highlight/index.js    alias -> module name, for the on-demand languages
//   katex/katex.js        KaTeX as a minified ES module (+ copy-tex), its CSS and woff2 fonts
//   mermaid/mermaid.min.js  Mermaid's own browser bundle, copied (the diagram frame's)
//   uplot/uPlot.js, uplot/uPlot.min.css  uPlot's ES module minified, its CSS copied (the usage page's)

import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = join(ROOT, "static", "vendor");
const NM = join(ROOT, "node_modules");
const require = createRequire(join(ROOT, "package.json"));

/** The languages bundled with the renderer; every other one loads when a fence names it. */
export const COMMON_LANGUAGES = [
  "bash",
  "c",
  "cpp",
  "csharp",
  "css",
  "diff",
  "go",
  "ini",
  "java",
  "javascript",
  "json",
  "kotlin",
  "markdown",
  "php",
  "plaintext",
  "python",
  "ruby",
  "rust",
  "shell",
  "sql",
  "swift",
  "typescript",
  "xml",
  "yaml",
];

const PACKAGES = ["markdown-it", "highlight.js", "katex", "mermaid", "uplot", "esbuild"];

function version(name) {
  return JSON.parse(readFileSync(join(NM, name, "package.json"), "utf8")).version;
}

/** What the output depends on: this script and the installed versions. */
function inputs() {
  const hash = createHash("sha256");
  hash.update(readFileSync(fileURLToPath(import.meta.url)));
  for (const name of PACKAGES) hash.update(`${name}@${version(name)}\n`);
  return hash.digest("hex");
}

function files(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...files(path));
    else out.push(path);
  }
  return out;
}

/** A digest of every file under `dir` but the stamp. */
function outputDigest(dir = OUT) {
  const hash = createHash("sha256");
  for (const path of files(dir)) {
    const name = relative(dir, path);
    if (name === "STAMP") continue;
    hash.update(`${name}\n`);
    hash.update(readFileSync(path));
  }
  return hash.digest("hex");
}

async function build(OUT) {
  const esbuild = await import(pathToFileURL(require.resolve("esbuild")).href);
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  const banner = (name) => ({ js: `/* ${name} ${version(name)} — built by scripts/vendor.mjs; see its LICENSE */` });

  // markdown-it: its own minified browser ES module (entities, linkify-it, punycode inside).
  // Without its source-map comment: the map is not served.
  const markdownIt = readFileSync(join(NM, "markdown-it/dist/browser/markdown-it.esm.min.mjs"), "utf8");
  writeFileSync(join(OUT, "markdown-it.js"), markdownIt.replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n"));

  // highlight.js: the core and the common languages in one module…
  const hl = join(NM, "highlight.js");
  const entry = [
    'import hljs from "highlight.js/lib/core";',
    ...COMMON_LANGUAGES.map((name, k) => `import l${k} from "highlight.js/lib/languages/${name}";`),
    ...COMMON_LANGUAGES.map((name, k) => `hljs.registerLanguage(${JSON.stringify(name)}, l${k});`),
    "export default hljs;",
  ].join("\n");
  await esbuild.build({
    stdin: { contents: entry, resolveDir: ROOT, sourcefile: "highlight-common.js" },
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    legalComments: "none",
    banner: banner("highlight.js"),
    outfile: join(OUT, "highlight/common.js"),
    logLevel: "warning",
  });
  // …and each other language alone, with an index of names and aliases.
  const core = require("highlight.js/lib/core");
  const index = {};
  const others = readdirSync(join(hl, "lib/languages"))
    .filter((f) => f.endsWith(".js") && !f.endsWith(".js.js"))
    .map((f) => f.slice(0, -3))
    .filter((name) => !COMMON_LANGUAGES.includes(name));
  for (const name of others) {
    core.registerLanguage(name, require(`highlight.js/lib/languages/${name}`));
    for (const alias of [name, ...(core.getLanguage(name)?.aliases || [])]) index[alias.toLowerCase()] ??= name;
  }
  await esbuild.build({
    entryPoints: Object.fromEntries(others.map((name) => [name, join(hl, "es/languages", `${name}.js`)])),
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    legalComments: "none",
    outdir: join(OUT, "highlight"),
    logLevel: "warning",
  });
  writeFileSync(
    join(OUT, "highlight/index.js"),
    `// Generated by scripts/vendor.mjs: language alias -> module in this folder.\nexport default ${JSON.stringify(index)};\n`,
  );

  // KaTeX: its ES module minified, with the copy-tex extension (copying math copies its LaTeX).
  await esbuild.build({
    stdin: {
      contents: 'export { default } from "katex";\nimport "katex/contrib/copy-tex";\n',
      resolveDir: ROOT,
      sourcefile: "katex-entry.js",
    },
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    legalComments: "none",
    banner: banner("katex"),
    outfile: join(OUT, "katex/katex.js"),
    logLevel: "warning",
  });
  // The CSS names woff2, woff and ttf for each font; every browser the page supports takes woff2.
  const css = readFileSync(join(NM, "katex/dist/katex.min.css"), "utf8").replace(
    /src:url\((fonts\/[^)]+\.woff2)\) format\("woff2"\)[^;}]*/g,
    'src:url($1) format("woff2")',
  );
  writeFileSync(join(OUT, "katex/katex.css"), css);
  mkdirSync(join(OUT, "katex/fonts"), { recursive: true });
  for (const font of readdirSync(join(NM, "katex/dist/fonts")).filter((f) => f.endsWith(".woff2")))
    cpSync(join(NM, "katex/dist/fonts", font), join(OUT, "katex/fonts", font));

  // Mermaid: its own browser bundle, a classic script (the sandboxed diagram frame's).
  mkdirSync(join(OUT, "mermaid"), { recursive: true });
  cpSync(join(NM, "mermaid/dist/mermaid.min.js"), join(OUT, "mermaid/mermaid.min.js"));

  // uPlot: its own ES module, minified, and its stylesheet (the usage page's charts only).
  await esbuild.build({
    entryPoints: [join(NM, "uplot/dist/uPlot.esm.js")],
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    legalComments: "none",
    banner: banner("uplot"),
    outfile: join(OUT, "uplot/uPlot.js"),
    logLevel: "warning",
  });
  cpSync(join(NM, "uplot/dist/uPlot.min.css"), join(OUT, "uplot/uPlot.min.css"));

  for (const name of ["markdown-it", "highlight.js", "katex", "mermaid", "uplot"])
    cpSync(join(NM, name, "LICENSE"), join(OUT, "licenses", `${name}.LICENSE`));
  writeFileSync(join(OUT, "STAMP"), `${inputs()} ${outputDigest(OUT)}\n`);
}

/** True when static/vendor/ is what build() makes from the installed packages. */
function upToDate() {
  const stamp = join(OUT, "STAMP");
  if (!existsSync(stamp)) return false;
  const [made, digest] = readFileSync(stamp, "utf8").trim().split(" ");
  return made === inputs() && digest === outputDigest();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--check")) {
    // A fresh build beside it, file for file.
    const fresh = mkdtempSync(join(tmpdir(), "edgechat-vendor-"));
    try {
      await build(fresh);
      if (!existsSync(OUT) || outputDigest(fresh) !== outputDigest(OUT)) {
        console.error("static/vendor/ is missing or differs from what scripts/vendor.mjs makes: run `npm run setup`");
        process.exit(1);
      }
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
    console.log(`static/vendor/ is what the pinned packages make (${files(OUT).length} files)`);
  } else if (process.argv.includes("--if-needed") && upToDate()) {
    // nothing to do
  } else {
    await build(OUT);
    console.log(`vendor: built static/vendor/ (${files(OUT).length} files)`);
  }
}
