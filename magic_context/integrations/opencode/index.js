// magic-context for OpenCode: pipes the session's messages through `mc transform` before every LLM call.
// Installed by `mc setup --harness opencode` (which also writes mc.json, the mc command, beside this file);
// removed by `mc setup --harness opencode --uninstall`. Plain ESM, no build step, no dependencies.
//
// - experimental.chat.messages.transform: envelope → `mc transform --harness opencode` → result spliced into
//   output.messages in place (OpenCode keeps the array it passed). Exit 4 (context emergency) throws mc's
//   one-line error, which OpenCode shows as the session's error, and the over-limit request is not sent. Any
//   other failure leaves the messages unchanged and is logged once.
// - experimental.chat.system.transform: appends mc's guidance block to the system prompt. OpenCode builds its
//   system prompt after the message hook, so the message hook asks mc for the guidance alone (`system: ""`).
// - tool ctx_reduce: `mc reduce --session ID RANGES --json`.
import * as bridge from "./bridge.js";

const HARNESS = "opencode";
const SIDE_AGENTS = new Set(["compaction", "title", "summary"]);

function lastUser(messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.info?.role === "user") return messages[i].info;
  }
  return undefined;
}

/** An error OpenCode shows as the session's error: it reports `data.message` of what a hook throws. */
function shownError(message) {
  const error = new Error(message);
  error.name = "MagicContextError";
  Object.defineProperty(error, "message", { value: message, enumerable: true });
  error.data = { message };
  return error;
}

export default async function MagicContext({ client, directory }) {
  const settings = bridge.loadSettings(import.meta.url);
  const limits = new Map(); // "provider/model" → context window OpenCode knows
  const children = new Set(); // sessions with a parent: subagents
  const compacting = new Set(); // sessions whose next message hook is OpenCode's own compaction
  const guidance = new Map(); // session → mc's guidance block for the system prompt
  let tools = []; // tool ids OpenCode resolved for the coming call (tool.definition fires just before)
  const log = bridge.logOnce((message) => {
    const sent = client?.app?.log?.({ body: { service: "magic-context", level: "warn", message } });
    sent?.catch?.(() => {});
  });

  const modelOf = (messages) => {
    const info = lastUser(messages);
    const provider = info?.model?.providerID;
    const id = info?.model?.modelID;
    if (!provider || !id) return undefined;
    const limit = limits.get(`${provider}/${id}`);
    return limit ? { provider, id, context_limit: limit } : { provider, id };
  };

  return {
    config: async (cfg) => {
      for (const [provider, entry] of Object.entries(cfg?.provider ?? {})) {
        for (const [id, model] of Object.entries(entry?.models ?? {})) {
          const limit = model?.limit?.context;
          if (Number.isInteger(limit) && limit > 0) limits.set(`${provider}/${id}`, limit);
        }
      }
    },

    event: async ({ event }) => {
      const info = event?.properties?.info;
      if ((event?.type === "session.created" || event?.type === "session.updated") && info?.parentID) {
        children.add(info.id);
      }
    },

    "tool.definition": async (input) => {
      if (input?.toolID && !tools.includes(input.toolID)) tools.push(input.toolID);
    },

    "experimental.session.compacting": async (input) => {
      if (input?.sessionID) compacting.add(input.sessionID);
    },

    "experimental.chat.messages.transform": async (_input, output) => {
      const messages = output?.messages;
      const sessionId = Array.isArray(messages) ? messages[0]?.info?.sessionID : undefined;
      const toolNames = tools;
      tools = [];
      if (!sessionId) return;
      if (compacting.delete(sessionId)) return; // OpenCode's compaction summarises the raw messages itself
      const agentName = lastUser(messages)?.agent;
      const envelope = {
        harness: HARNESS,
        session_id: sessionId,
        project_dir: directory,
        agent: children.has(sessionId) ? "subagent" : SIDE_AGENTS.has(agentName) ? agentName : "primary",
        system: "",
        messages,
      };
      const model = modelOf(messages);
      if (model) envelope.model = model;
      if (toolNames.length) envelope.tools = toolNames;
      const result = await bridge.transform(settings, HARNESS, envelope, { cwd: directory });
      if (result.kind === "emergency") {
        // OpenCode 1.18 turns a hook's throw into "Unexpected server error" (mc's line goes to its log):
        // say it where the user looks too — a toast in the TUI, stderr for `opencode run`.
        client?.tui?.showToast?.({ body: { title: "magic-context", message: result.message, variant: "error" } })
          ?.catch?.(() => {});
        process.stderr.write(`${result.message}\n`);
        throw shownError(result.message);
      }
      if (result.kind === "failed") {
        log(`magic-context: ${result.reason}; messages sent unchanged`);
        return;
      }
      try {
        const block = bridge.appended("", result.document.system);
        if (block) guidance.set(sessionId, block);
        output.messages.splice(0, output.messages.length, ...result.document.messages);
      } catch (error) {
        log(`magic-context: could not apply mc's output (${error?.message}); messages sent unchanged`);
      }
    },

    "experimental.chat.system.transform": async (input, output) => {
      const model = input?.model;
      const limit = model?.limit?.context;
      if (model?.providerID && model?.id && Number.isInteger(limit) && limit > 0) {
        limits.set(`${model.providerID}/${model.id}`, limit);
      }
      const block = guidance.get(input?.sessionID);
      if (block && Array.isArray(output?.system) && output.system.length) {
        output.system[0] = bridge.appendOnce(output.system[0], block);
      }
    },

    tool: {
      ctx_reduce: {
        description: bridge.REDUCE_DESCRIPTION,
        args: { drop: { type: "string", description: 'Tag numbers to drop, e.g. "3-5,9".' } },
        async execute(args, context) {
          return bridge.reduce(settings, HARNESS, context.sessionID, args?.drop, { cwd: context.directory ?? directory });
        },
      },
    },
  };
}
