/**
 * Child sessions (ToolContext.child): the one primitive delegation needs. A tool runs a turn
 * of a new durable session of a child agent that shares the parent's store, linked both ways
 * in the logs, within what the parent turn has left; its usage counts as the parent turn's.
 * What to delegate, to whom and how deep is a plugin's business (@keel/plugin-tasks).
 */
import { createAgent } from "./agent.ts";
import type { Agent, Limits, Session } from "./agent.ts";
import { errorMessage, KeelError } from "./errors.ts";
import { headOf } from "./text.ts";
import type { ChildOptions, ChildRun, TurnBudget } from "./tools.ts";
import type { Usage } from "./usage.ts";

const NAME = /^[a-z0-9_.-]{1,64}$/;

/** Run one child turn for the tool call `callId` of `parent`'s turn `turnId`. */
export async function runChild<O>(parent: Session, turnId: string, callId: string, signal: AbortSignal, options: ChildOptions<O>, budget: TurnBudget, addToParent: (usage: Usage) => void): Promise<ChildRun<O>> {
  const name = options?.name;
  if (typeof name !== "string" || !NAME.test(name)) throw new KeelError("KEEL_CHILD_INVALID", `name ${JSON.stringify(typeof name === "string" ? headOf(name, 70) : typeof name)} must match ${NAME.source}.`, { path: "name" });
  const limits = clamp(options.limits, budget);
  const host = parent.agent;
  const agent = await childAgent(host, name, options.agent);
  signal.throwIfAborted();
  const depth = host.depth + 1;
  const session = await agent.session(undefined, { parent: { sessionId: parent.id, turnId, callId, name, depth } });
  try {
    // The link is in the parent's log before the child does anything, so a crash leaves it findable.
    await parent.emit({ type: "child.started", callId, name, childSessionId: session.id }, turnId, true);
    const result = await session.runAsChild(options.input, { signal, ...(options.output ? { output: options.output } : {}), metadata: { ...options.metadata, parent: { sessionId: parent.id, turnId, callId } } }, cappedBy(agent.limits, limits));
    addToParent(result.usage);
    return { sessionId: session.id, result };
  } finally {
    await session.close().catch(() => {});
  }
}

/** The child's limits: the smallest of the options', and what the parent has left. */
function clamp(given: ChildOptions["limits"], budget: TurnBudget): Pick<Limits, "maxRounds" | "maxToolCalls" | "tokenBudget" | "wallTimeMs"> {
  const left = { maxRounds: budget.rounds, maxToolCalls: budget.toolCalls, tokenBudget: budget.tokens, wallTimeMs: budget.wallMs };
  for (const [k, v] of Object.entries(left)) if (!(v > 0)) throw new KeelError("KEEL_CHILD_BUDGET", `The parent turn has no ${k} left (${v}).`, { path: `limits.${k}` });
  const out = { ...left };
  for (const k of Object.keys(left) as Array<keyof typeof left>) {
    const v = given?.[k];
    if (v === undefined) continue;
    if (typeof v !== "number" || !(v > 0)) throw new KeelError("KEEL_CHILD_INVALID", `limits.${k} must be a positive number (got ${String(v)}).`, { path: `limits.${k}` });
    out[k] = Math.min(out[k], v);
  }
  return out;
}

/** The child agent's own limits count too: the turn gets the minimum. */
function cappedBy(own: Limits, limits: Pick<Limits, "maxRounds" | "maxToolCalls" | "tokenBudget" | "wallTimeMs">): Partial<Limits> {
  return { maxRounds: Math.min(own.maxRounds, limits.maxRounds), maxToolCalls: Math.min(own.maxToolCalls, limits.maxToolCalls), tokenBudget: Math.min(own.tokenBudget, limits.tokenBudget), wallTimeMs: Math.min(own.wallTimeMs, limits.wallTimeMs) };
}

/** The child agent named `name`, built once from the first options given for it. */
function childAgent(host: Agent, name: string, options: ChildOptions["agent"]): Promise<Agent> {
  let made = host.children.get(name);
  if (!made) {
    const given = options ?? {};
    made = createAgent({
      ...given,
      name: host.name,
      provider: given.provider ?? host.options.provider,
      ...(given.sideModel === undefined && host.options.sideModel !== undefined ? { sideModel: host.options.sideModel } : {}),
      ...(given.approve === undefined && host.options.approve ? { approve: host.options.approve } : {}),
      ...(given.ask === undefined && host.options.ask ? { ask: host.options.ask } : {}),
      store: host.store,
    }).then(
      (a) => {
        a.depth = host.depth + 1;
        return a;
      },
      (err: unknown) => {
        host.children.delete(name);
        throw new KeelError("KEEL_CHILD_INVALID", `Child agent "${name}": ${headOf(errorMessage(err), 500)}`, { path: "agent" }, { cause: err });
      },
    );
    host.children.set(name, made);
  }
  return made;
}
