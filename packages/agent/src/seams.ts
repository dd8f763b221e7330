/**
 * What the host adds to the kernel's turn (TurnSeams): routing and budgets each round, the
 * optional preflight plan, and request digests as the log stores content.
 */
import type { DigestSeam, PreflightPlan, RequestDigest, Turn, TurnSeams } from "@keel/kernel";
import { addUsage, chargedUsage, hashText } from "@keel/kernel";
import type { AgentOptions } from "./agent-options.ts";
import { runPreflight } from "./preflight.ts";
import { roundSeam } from "./round-route.ts";

/**
 * Digests without a secret scanner (a runtime without Node: its log lives in memory): content
 * hashed as it is. On Node the runtime's digests hash content as its log stores it (redacted).
 */
const plainDigest: DigestSeam = {
  text: hashText,
  request: (system, tools, messages, options) => {
    // Options may change after the request is sent: read now; the rest is immutable.
    const o = hashText(JSON.stringify(options) ?? "");
    let digest: RequestDigest | undefined;
    return () => {
      if (digest) return digest;
      const s = hashText(system);
      const t = hashText(JSON.stringify(tools) ?? "");
      const m = hashText(JSON.stringify(messages) ?? "");
      digest = { system: s, tools: t, messages: m, options: o, request: hashText(s + t + m + o) };
      return digest;
    };
  },
};

/** Contract: the preflight seam is installed only when `options.preflight` asks for one. */
export function seamsOf(options: AgentOptions, digest: DigestSeam = plainDigest): TurnSeams {
  return {
    round: roundSeam,
    digest,
    ...(options.preflight ? { preflight: (t: Turn) => preflight(t, options) } : {}),
  };
}

/** The preflight plan: one bounded tool-less request that may reveal hidden tools; its spend is the turn's and the session's. */
async function preflight(t: Turn, o: AgentOptions): Promise<PreflightPlan | undefined> {
  const pf = o.preflight === true ? {} : o.preflight || undefined;
  const hidden = pf ? [...t.tools.values()].filter((x) => !t.visible.has(x.def.name)).map((x) => x.def) : [];
  if (!pf || !hidden.length) return undefined;
  const model = pf.model ?? (o.sideModel || o.provider);
  const ran = await runPreflight(model, t.input, hidden, pf, t.signal);
  const outcome = { ...ran, usage: chargedUsage(ran.usage, model.price) };
  addUsage(t.usage, outcome.usage);
  addUsage(t.session.spend, outcome.usage);
  for (const n of outcome.revealed) t.visible.add(n);
  void t.session.emit({ type: "preflight.completed", ...outcome }, t.turnId);
  return outcome;
}
