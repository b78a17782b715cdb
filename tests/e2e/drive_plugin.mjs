// Drive an installed mc plugin directory the way its harness would, without the harness: the OpenCode plugin's
// message hook (plus the system hook and ctx_reduce), or the Pi extension's `context` handler and ctx_reduce.
// usage: node drive_plugin.mjs opencode|pi PLUGIN_DIR < {"messages": [...], "directory": "...", "calls": N,
//                                                      "reduce": "3-5"?}
// prints {outcome: "changed"|"unchanged"|"threw", error?, messages, logs, system?, aborted?, tool?}
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [harness, dir] = process.argv.slice(2);
const input = JSON.parse(readFileSync(0, "utf8"));
const plugin = (await import(pathToFileURL(join(dir, "index.js")).href)).default;
const logs = [];
const result = { calls: [] };

async function attempt(fn, original) {
  try {
    const messages = await fn();
    const changed = JSON.stringify(messages) !== original;
    return { outcome: changed ? "changed" : "unchanged", messages };
  } catch (error) {
    return { outcome: "threw", error: error.message };
  }
}

async function tool(execute) {
  try {
    return { text: await execute() };
  } catch (error) {
    return { error: error.message };
  }
}

if (harness === "opencode") {
  const client = { app: { log: async ({ body }) => logs.push(body.message) }, tui: { showToast: async () => true } };
  const hooks = await plugin({ client, directory: input.directory });
  for (let i = 0; i < (input.calls ?? 1); i++) {
    const output = { messages: structuredClone(input.messages) };
    const original = JSON.stringify(output.messages);
    result.calls.push(await attempt(async () => {
      await hooks["experimental.chat.messages.transform"]({}, output);
      return output.messages;
    }, original));
  }
  const system = { system: ["You are OpenCode."] };
  await hooks["experimental.chat.system.transform"]({ sessionID: input.messages?.[0]?.info?.sessionID }, system);
  result.system = system.system;
  if (input.reduce !== undefined) {
    result.tool = await tool(() => hooks.tool.ctx_reduce.execute({ drop: input.reduce },
      { sessionID: input.sessionId, directory: input.directory }));
  }
} else {
  const handlers = {};
  const tools = {};
  let aborted = false;
  const pi = { on: (name, fn) => { handlers[name] = fn; }, registerTool: (def) => { tools[def.name] = def; },
               getActiveTools: () => ["read", "bash", "ctx_reduce"] };
  plugin(pi);
  const ctx = { hasUI: false, cwd: input.directory, model: { provider: "fake", id: "fake-model", contextWindow: 200000 },
                sessionManager: { getSessionId: () => input.sessionId }, getSystemPrompt: () => "You are Pi.",
                abort: () => { aborted = true; } };
  const originalError = console.error;
  console.error = (...args) => logs.push(args.join(" "));
  for (let i = 0; i < (input.calls ?? 1); i++) {
    const original = JSON.stringify(input.messages);
    result.calls.push(await attempt(async () => {
      const answer = await handlers.context({ type: "context", messages: structuredClone(input.messages) }, ctx);
      return answer?.messages ?? JSON.parse(original);
    }, original));
  }
  const payload = { system: [{ type: "text", text: "You are Pi." }] };
  result.system = (handlers.before_provider_request({ payload }, ctx) ?? payload).system.map((b) => b.text);
  if (input.reduce !== undefined) {
    result.tool = await tool(async () => (await tools.ctx_reduce.execute("call_1", { drop: input.reduce }, undefined,
      undefined, ctx)).content[0].text);
  }
  console.error = originalError;
  result.aborted = aborted;
}
result.logs = logs;
process.stdout.write(JSON.stringify(result));
