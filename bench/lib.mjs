// Shared by the benchmarks: start a runner on a free port, stop it, read its
// CPU time and memory from /proc.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

export function startRunner(config, { args = [], env = {} } = {}) {
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [join(ROOT, "tools/runner/main.mjs"), "--port", "0", "--quiet", "--config", config, ...args],
    { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, CLOUDFLARE_API_TOKEN: "", ...env } },
  );
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const match = out.match(/Ready on (http:\/\/\S+)/);
      if (match) resolve({ child, url: match[1], bootMs: performance.now() - started, stderr: () => stderr });
    });
    child.on("exit", (code) => reject(new Error(`runner exited ${code}:\n${stderr}`)));
  });
}

export function stopRunner(child) {
  return new Promise((resolve) => {
    child.removeAllListeners("exit");
    if (child.exitCode !== null) return resolve();
    child.on("exit", resolve);
    child.kill("SIGTERM");
  });
}

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

// CPU seconds (user + system) the process has used so far.
export function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

export function rssMiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(status.match(/VmRSS:\s+(\d+)/)[1]) / 1024;
}

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export function percentile(xs, p) {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}
