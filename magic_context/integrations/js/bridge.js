// magic-context bridge: runs `mc transform` / `mc reduce` for a harness plugin and classifies the result.
// Shared by the OpenCode plugin and the Pi extension; installed beside each by `mc setup` (plain ESM, no build
// step, Node and Bun alike). It never throws: every failure comes back as a value the caller acts on.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

export const COMMAND_ENV = "MAGIC_CONTEXT_MC"; // overrides the mc command resolved at install time
export const TIMEOUT_ENV = "MAGIC_CONTEXT_HOOK_TIMEOUT_MS";
export const DEFAULT_TIMEOUT_MS = 15000;
const EMERGENCY_EXIT = 4;

/** The install settings written by `mc setup` beside the plugin (`mc.json`), with the env overrides applied. */
export function loadSettings(moduleUrl) {
  let settings = {};
  try {
    settings = JSON.parse(readFileSync(join(dirname(fileURLToPath(moduleUrl)), "mc.json"), "utf8"));
  } catch {
    settings = {};
  }
  let command = Array.isArray(settings.command) && settings.command.length ? settings.command.map(String) : ["mc"];
  const override = (process.env[COMMAND_ENV] || "").trim();
  if (override) command = parseCommand(override);
  const timeout = Number.parseInt(process.env[TIMEOUT_ENV] || "", 10);
  return { ...settings, command, timeoutMs: timeout > 0 ? timeout : DEFAULT_TIMEOUT_MS };
}

/** A command from the environment: a JSON array of argv, or words separated by whitespace. */
export function parseCommand(text) {
  if (text.startsWith("[")) {
    try {
      const argv = JSON.parse(text);
      if (Array.isArray(argv) && argv.length) return argv.map(String);
    } catch {
      // fall through to whitespace splitting
    }
  }
  return text.split(/\s+/).filter(Boolean);
}

/** Run argv with `input` on stdin; resolves to {status, stdout, stderr, error, timedOut}; never rejects. */
export function run(argv, input, { timeoutMs = DEFAULT_TIMEOUT_MS, cwd } = {}) {
  return new Promise((resolve) => {
    let child;
    const out = [];
    const err = [];
    let settled = false;
    let timedOut = false;
    const finish = (status, error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ status, error, timedOut, stdout: Buffer.concat(out).toString("utf8"),
                stderr: Buffer.concat(err).toString("utf8") });
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill(child);
      finish(null, new Error(`timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    try {
      // Its own process group (POSIX), so a timeout takes down whatever the command started with it.
      child = spawn(argv[0], argv.slice(1),
                    { cwd, stdio: ["pipe", "pipe", "pipe"], detached: process.platform !== "win32" });
    } catch (error) {
      finish(null, error);
      return;
    }
    child.stdout.on("data", (chunk) => out.push(chunk));
    child.stderr.on("data", (chunk) => err.push(chunk));
    child.on("error", (error) => finish(null, error));
    child.on("close", (status) => finish(status, null));
    child.stdin.on("error", () => { /* mc exited before reading everything: its status tells */ });
    child.stdin.end(input);
  });
}

function kill(child) {
  if (!child) return;
  try {
    if (process.platform !== "win32" && child.pid) process.kill(-child.pid, "SIGKILL");
    else child.kill("SIGKILL");
  } catch {
    try { child.kill("SIGKILL"); } catch { /* already gone */ }
  }
  for (const stream of [child.stdin, child.stdout, child.stderr]) stream?.destroy();
}

/** mc's one-line error (`mc: error: …`) from stderr, else its last line. */
export function errorLine(stderr) {
  const lines = String(stderr || "").split("\n").map((l) => l.trim()).filter(Boolean);
  return lines.reverse().find((l) => l.startsWith("mc: error:")) || lines[0] || "";
}

/**
 * Pipe `envelope` through `mc transform --harness H`. Resolves to one of
 *   {kind: "ok", document}            exit 0 with a JSON object or array on stdout
 *   {kind: "emergency", message}      exit 4: the call must not be sent
 *   {kind: "failed", reason}          anything else: serve the messages unchanged
 */
export async function transform(settings, harness, envelope, { cwd } = {}) {
  const argv = [...settings.command, "transform", "--harness", harness];
  const result = await run(argv, JSON.stringify(envelope), { timeoutMs: settings.timeoutMs, cwd });
  if (result.timedOut) return { kind: "failed", reason: `mc transform timed out after ${settings.timeoutMs} ms` };
  if (result.error) return { kind: "failed", reason: `could not run ${argv[0]}: ${result.error.message}` };
  if (result.status === EMERGENCY_EXIT) {
    return { kind: "emergency", message: errorLine(result.stderr) || "mc: context emergency: run `mc wrapup`" };
  }
  if (result.status !== 0) {
    return { kind: "failed", reason: `mc transform exited ${result.status}: ${errorLine(result.stderr)}` };
  }
  try {
    const document = JSON.parse(result.stdout);
    if (document && typeof document === "object" && Array.isArray(document.messages)) {
      return { kind: "ok", document };
    }
    return { kind: "failed", reason: "mc transform printed JSON without a messages array" };
  } catch (error) {
    return { kind: "failed", reason: `mc transform printed unparsable output (${error.message})` };
  }
}

/** Run `mc reduce --session ID RANGES --json`; resolves to the message for the model or throws mc's error line. */
export async function reduce(settings, harness, sessionId, drop, { cwd } = {}) {
  if (typeof drop !== "string" || !drop.trim()) throw new Error('ctx_reduce needs `drop`, e.g. "3-5,9"');
  const argv = [...settings.command, "reduce", "--session", sessionId, "--harness", harness, drop.trim(), "--json"];
  if (cwd) argv.push("--project", cwd);
  const result = await run(argv, "", { timeoutMs: settings.timeoutMs, cwd });
  if (result.timedOut || result.error) throw new Error(`ctx_reduce: could not run mc (${result.error?.message})`);
  if (result.status !== 0) throw new Error(errorLine(result.stderr) || `ctx_reduce: mc exited ${result.status}`);
  try {
    const data = JSON.parse(result.stdout).data || {};
    return String(data.message || "Done.");
  } catch {
    return result.stdout.trim() || "Done.";
  }
}

/** A logger that reports each distinct message once per process (a failing mc must not flood the logs). */
export function logOnce(sink) {
  const seen = new Set();
  return (message) => {
    if (seen.has(message)) return;
    seen.add(message);
    try {
      sink(message);
    } catch {
      // logging must never break the harness
    }
  };
}

/** The text mc appended to `before` (its guidance block), or "" when it appended nothing recognisable. */
export function appended(before, after) {
  if (typeof after !== "string" || after === before) return "";
  const base = String(before || "").trimEnd();
  if (!after.startsWith(base)) return "";
  return after.slice(base.length).replace(/^\n+/, "");
}

/** Append `block` to `text` with a blank line, once (mc's own joining rule). */
export function appendOnce(text, block) {
  if (!block || String(text).includes(block)) return text;
  const base = String(text || "").trimEnd();
  return base ? `${base}\n\n${block}` : block;
}

export const REDUCE_DESCRIPTION =
  "Drop tagged context you no longer need verbatim. Every message part carries a tag like §12§; pass the " +
  'numbers to drop as `drop`, e.g. "3-5,9". Drops apply on the next cache-busting pass; the newest tags are ' +
  "protected. Use it after you have used a tool output, long text or file content.";
