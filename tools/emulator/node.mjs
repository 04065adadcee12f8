// The Node host of edgechat's Workers AI emulator: an `Ai` whose script, log
// and pacing come from environment variables, read again on every call.
//
//   EDGECHAT_AI_SCRIPT    path to a JSON script; unset or missing file -> none
//   EDGECHAT_AI_LOG       file that gets one JSON line per finished call
//   EDGECHAT_AI_DELAY_MS  ms between generated tokens (default 20; 0 = none)
import { appendFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { Ai } from "./ai.mjs";

export { Ai, countTokens, MODELS, tokenize } from "./ai.mjs";

export const DEFAULT_DELAY_MS = 20;

/**
 * Returns an emulated `Ai` binding. `env` defaults to `process.env`; it is
 * consulted on every call, so tests can change the variables between calls.
 */
export function createEmulator(env = process.env) {
  return new Ai({
    readScript() {
      const path = env.EDGECHAT_AI_SCRIPT;
      if (!path) return null;
      let text;
      try {
        text = readFileSync(path, "utf8");
      } catch (err) {
        if (err.code === "ENOENT") return null;
        throw new Error(`edgechat emulator: cannot read EDGECHAT_AI_SCRIPT=${path}: ${err.message}`);
      }
      if (text.trim() === "") return null;
      try {
        return JSON.parse(text);
      } catch (err) {
        throw new Error(`edgechat emulator: EDGECHAT_AI_SCRIPT=${path} is not valid JSON: ${err.message}`);
      }
    },
    appendLog(record) {
      const path = env.EDGECHAT_AI_LOG;
      if (!path) return;
      mkdirSync(dirname(path), { recursive: true });
      appendFileSync(path, `${JSON.stringify(record)}\n`);
    },
    delayMs() {
      const raw = env.EDGECHAT_AI_DELAY_MS;
      if (raw === undefined || raw.trim() === "") return DEFAULT_DELAY_MS;
      const n = Number(raw);
      return Number.isFinite(n) && n >= 0 ? n : DEFAULT_DELAY_MS;
    },
  });
}
