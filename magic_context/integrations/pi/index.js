// magic-context for Pi: pipes the agent's messages through `mc transform` before every LLM call.
// Installed by `mc setup --harness pi` as an extension directory (this index.js, bridge.js and mc.json, the mc
// command); removed by `mc setup --harness pi --uninstall`. Plain ESM, no build step, no dependencies.
//
// - context event: envelope → `mc transform --harness pi` → `{messages}`. Pi does not keep the rewrite (the next
//   call starts from its own array again); mc replays its stored decisions, so every call is rewritten the same
//   way. Exit 4 (context emergency) aborts the turn and reports mc's one-line error (the over-limit request is
//   not sent); any other failure leaves the messages unchanged and is logged once.
// - before_provider_request: puts mc's guidance block into the system prompt of the payload.
// - tool ctx_reduce: `mc reduce --session ID RANGES --json`.
import * as bridge from "./bridge.js";

const HARNESS = "pi";

/** Replace every string equal to `from` inside a provider payload (its system prompt) with `to`. */
function replaceString(value, from, to) {
  if (value === from) return { value: to, hit: true };
  if (Array.isArray(value)) {
    let hit = false;
    const out = value.map((item) => {
      const r = replaceString(item, from, to);
      hit ||= r.hit;
      return r.value;
    });
    return hit ? { value: out, hit } : { value, hit };
  }
  if (value && typeof value === "object") {
    let hit = false;
    const out = {};
    for (const [key, item] of Object.entries(value)) {
      const r = replaceString(item, from, to);
      hit ||= r.hit;
      out[key] = r.value;
    }
    return hit ? { value: out, hit } : { value, hit };
  }
  return { value, hit: false };
}

export default function magicContext(pi) {
  const settings = bridge.loadSettings(import.meta.url);
  let pendingSystem; // {from, to}: the system prompt mc returned for the call being prepared
  let warnUi;
  const log = bridge.logOnce((message) => {
    if (warnUi) warnUi(message);
    else console.error(message);
  });

  pi.on("context", async (event, ctx) => {
    pendingSystem = undefined;
    warnUi = ctx?.hasUI ? (m) => ctx.ui.notify(m, "warning") : undefined;
    const sessionId = ctx?.sessionManager?.getSessionId?.();
    if (!sessionId || !Array.isArray(event?.messages)) return undefined;
    const envelope = { harness: HARNESS, session_id: sessionId, project_dir: ctx.cwd || process.cwd(),
                       agent: "primary", messages: event.messages };
    const model = ctx.model;
    if (model?.provider && model?.id) {
      envelope.model = { provider: model.provider, id: model.id };
      if (Number.isInteger(model.contextWindow) && model.contextWindow > 0) {
        envelope.model.context_limit = model.contextWindow;
      }
    }
    try {
      const system = ctx.getSystemPrompt?.();
      if (typeof system === "string" && system) envelope.system = system;
      const active = pi.getActiveTools?.();
      if (Array.isArray(active)) envelope.tools = active.map((t) => (typeof t === "string" ? t : t?.name)).filter(Boolean);
    } catch {
      // optional context: mc works without it
    }
    const result = await bridge.transform(settings, HARNESS, envelope, { cwd: envelope.project_dir });
    if (result.kind === "emergency") {
      try { ctx.abort?.(); } catch { /* no active turn */ }
      if (ctx?.hasUI) ctx.ui.notify(result.message, "error");
      throw new Error(result.message);
    }
    if (result.kind === "failed") {
      log(`magic-context: ${result.reason}; messages sent unchanged`);
      return undefined;
    }
    const system = result.document.system;
    if (typeof envelope.system === "string" && typeof system === "string" && system !== envelope.system) {
      pendingSystem = { from: envelope.system, to: system };
    }
    return { messages: result.document.messages };
  });

  pi.on("before_provider_request", (event) => {
    const swap = pendingSystem;
    pendingSystem = undefined;
    if (!swap || !event?.payload) return undefined;
    const r = replaceString(event.payload, swap.from, swap.to);
    return r.hit ? r.value : undefined;
  });

  pi.registerTool({
    name: "ctx_reduce",
    label: "Reduce context",
    description: bridge.REDUCE_DESCRIPTION,
    parameters: {
      type: "object",
      properties: { drop: { type: "string", description: 'Tag numbers to drop, e.g. "3-5,9".' } },
      required: ["drop"],
    },
    async execute(_toolCallId, params, _signal, _onUpdate, ctx) {
      const sessionId = ctx?.sessionManager?.getSessionId?.();
      if (!sessionId) throw new Error("ctx_reduce: no session id");
      const text = await bridge.reduce(settings, HARNESS, sessionId, params?.drop, { cwd: ctx?.cwd || process.cwd() });
      return { content: [{ type: "text", text }], details: {} };
    },
  });
}
