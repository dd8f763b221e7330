/**
 * Routing and budgets: the pool a plugin may route a round to (AgentOptions.pool, chosen with
 * `request_options.options.route` at round.pre_request), the request shape it decides on, and
 * the cost a request is estimated at before it is sent (limits.maxCostUsd and friends).
 */
import type { BudgetView, Limits, Message, ModelPriceView, Usage } from "@keel/kernel";
import { DEFAULT_OUTPUT_ESTIMATE, estimateCost, KeelError } from "@keel/kernel";

/** True when any image block is in `messages` (a routing hint: not every pool member reads images). */
export function hasImages(messages: readonly Message[]): boolean {
  for (const m of messages) {
    if (typeof m.content === "string") continue;
    for (const b of m.content as ReadonlyArray<{ type: string; content?: unknown }>) {
      if (b.type === "image") return true;
      if (
        b.type === "tool_result" &&
        Array.isArray(b.content) &&
        b.content.some((c: { type?: string }) => c?.type === "image")
      )
        return true;
    }
  }
  return false;
}

/** True when some budget limit is set (the estimate runs only then). */
export function hasBudget(limits: Limits): boolean {
  return (
    limits.maxCostUsd !== undefined || limits.maxSessionCostUsd !== undefined || limits.maxSessionTokens !== undefined
  );
}

/**
 * What a session's running turn has handed to its running child sessions: the dollars and tokens
 * each may still spend, held until the child ends (then its actual spend counts instead). A
 * budget check counts spent + held, so parallel children never share one remainder.
 */
export interface Held {
  usd: number;
  tokens: number;
  children: number;
}

const ledger = new WeakMap<object, Held>();
const NONE: Held = Object.freeze({ usd: 0, tokens: 0, children: 0 });

/** What the running children of `session`'s turn hold now. */
export function heldBy(session: object): Held {
  return ledger.get(session) ?? NONE;
}

/**
 * Hold `usd` and `tokens` of `session`'s turn for one child. Returns the release, which takes
 * the held amounts back (call it once, when the child ended and its spend was added).
 */
export function reserve(
  session: object,
  usd: number,
  tokens: number,
): { release(): void; shrink(usd: number, tokens: number): void } {
  const h = { ...heldBy(session) };
  h.usd += usd;
  h.tokens += tokens;
  h.children += 1;
  ledger.set(session, h);
  let mine = { usd, tokens };
  const take = (usd: number, tokens: number, children: number) => {
    const now = ledger.get(session)!;
    const next = { usd: now.usd - usd, tokens: now.tokens - tokens, children: now.children - children };
    if (next.children <= 0) ledger.delete(session);
    else ledger.set(session, next);
  };
  let done = false;
  return {
    shrink(usd, tokens) {
      if (done) return;
      take(mine.usd - usd, mine.tokens - tokens, 0);
      mine = { usd, tokens };
    },
    release() {
      if (done) return;
      done = true;
      take(mine.usd, mine.tokens, 1);
    },
  };
}

/** What the turn and the session spent, and what the limits leave once the running children's holdings are counted. */
export function budgetView(limits: Limits, turn: Usage, session: Usage, held: Held = NONE): BudgetView {
  const turnCostUsd = turn.costUsd ?? 0;
  const sessionCostUsd = session.costUsd ?? 0;
  const sessionTokens = session.inputTokens + session.outputTokens;
  const leftTurnUsd = limits.maxCostUsd !== undefined ? limits.maxCostUsd - turnCostUsd - held.usd : undefined;
  const leftSessionUsd =
    limits.maxSessionCostUsd !== undefined ? limits.maxSessionCostUsd - sessionCostUsd - held.usd : undefined;
  const dollars = [leftTurnUsd, leftSessionUsd].filter((v): v is number => v !== undefined);
  return {
    turnCostUsd,
    sessionCostUsd,
    sessionTokens,
    ...(leftTurnUsd !== undefined ? { leftTurnUsd } : {}),
    ...(leftSessionUsd !== undefined ? { leftSessionUsd } : {}),
    ...(limits.maxSessionTokens !== undefined
      ? { leftSessionTokens: limits.maxSessionTokens - sessionTokens - held.tokens }
      : {}),
    ...(dollars.length ? { leftUsd: Math.min(...dollars) } : {}),
  };
}

/** A budget a request would break: which, the limit, what was spent, what running children hold, the request's estimate. */
export interface BudgetBreach {
  which: "maxCostUsd" | "maxSessionCostUsd" | "maxSessionTokens";
  limit: number;
  spent: number;
  held: number;
  estimate: number;
}

/**
 * The first budget the request would break, else undefined. Dollar limits need a price (a model
 * without one is held to the token limit only); the token limit counts the request's tokens plus
 * its output ceiling.
 */
export function breach(
  limits: Limits,
  view: BudgetView,
  held: Held,
  tokens: number,
  price: ModelPriceView | undefined,
  maxTokens: number | undefined,
): BudgetBreach | undefined {
  const cost = estimateCost(tokens, price, maxTokens);
  if (cost !== undefined && limits.maxCostUsd !== undefined && view.turnCostUsd + held.usd + cost > limits.maxCostUsd)
    return { which: "maxCostUsd", limit: limits.maxCostUsd, spent: view.turnCostUsd, held: held.usd, estimate: cost };
  if (
    cost !== undefined &&
    limits.maxSessionCostUsd !== undefined &&
    view.sessionCostUsd + held.usd + cost > limits.maxSessionCostUsd
  )
    return {
      which: "maxSessionCostUsd",
      limit: limits.maxSessionCostUsd,
      spent: view.sessionCostUsd,
      held: held.usd,
      estimate: cost,
    };
  const outTokens = tokens + (maxTokens ?? DEFAULT_OUTPUT_ESTIMATE);
  if (limits.maxSessionTokens !== undefined && view.sessionTokens + held.tokens + outTokens > limits.maxSessionTokens)
    return {
      which: "maxSessionTokens",
      limit: limits.maxSessionTokens,
      spent: view.sessionTokens,
      held: held.tokens,
      estimate: outTokens,
    };
  return undefined;
}

/** The message of a budget stop: what was spent, the limit, the estimate, and what to do. */
export function breachMessage(b: BudgetBreach, model: string): string {
  const usd = (n: number) => `$${n.toFixed(4)}`;
  const scope = b.which === "maxCostUsd" ? "this turn" : "this session";
  const tokens = b.which === "maxSessionTokens";
  const held = b.held > 0 ? ` (its running child sessions hold ${tokens ? `${b.held} tokens` : usd(b.held)} more)` : "";
  const said = tokens
    ? `This session used ${b.spent} tokens${held} of limits.maxSessionTokens ${b.limit}; the next request to ${model} is estimated at ${b.estimate} tokens (input plus output ceiling).`
    : `${scope === "this turn" ? "This turn" : "This session"} spent ${usd(b.spent)}${held} of limits.${b.which} ${usd(b.limit)}; the next request to ${model} is estimated at ${usd(b.estimate)}.`;
  return new KeelError("KEEL_BUDGET_EXCEEDED", said).message;
}
