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

/** What the turn and the session spent, and what the limits leave. */
export function budgetView(limits: Limits, turn: Usage, session: Usage): BudgetView {
  const turnCostUsd = turn.costUsd ?? 0;
  const sessionCostUsd = session.costUsd ?? 0;
  const sessionTokens = session.inputTokens + session.outputTokens;
  const leftTurnUsd = limits.maxCostUsd !== undefined ? limits.maxCostUsd - turnCostUsd : undefined;
  const leftSessionUsd = limits.maxSessionCostUsd !== undefined ? limits.maxSessionCostUsd - sessionCostUsd : undefined;
  const dollars = [leftTurnUsd, leftSessionUsd].filter((v): v is number => v !== undefined);
  return {
    turnCostUsd,
    sessionCostUsd,
    sessionTokens,
    ...(leftTurnUsd !== undefined ? { leftTurnUsd } : {}),
    ...(leftSessionUsd !== undefined ? { leftSessionUsd } : {}),
    ...(limits.maxSessionTokens !== undefined ? { leftSessionTokens: limits.maxSessionTokens - sessionTokens } : {}),
    ...(dollars.length ? { leftUsd: Math.min(...dollars) } : {}),
  };
}

/** A budget a request would break: which, the limit, what was spent, the request's estimate. */
export interface BudgetBreach {
  which: "maxCostUsd" | "maxSessionCostUsd" | "maxSessionTokens";
  limit: number;
  spent: number;
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
  tokens: number,
  price: ModelPriceView | undefined,
  maxTokens: number | undefined,
): BudgetBreach | undefined {
  const cost = estimateCost(tokens, price, maxTokens);
  if (cost !== undefined && limits.maxCostUsd !== undefined && view.turnCostUsd + cost > limits.maxCostUsd)
    return { which: "maxCostUsd", limit: limits.maxCostUsd, spent: view.turnCostUsd, estimate: cost };
  if (
    cost !== undefined &&
    limits.maxSessionCostUsd !== undefined &&
    view.sessionCostUsd + cost > limits.maxSessionCostUsd
  )
    return { which: "maxSessionCostUsd", limit: limits.maxSessionCostUsd, spent: view.sessionCostUsd, estimate: cost };
  const outTokens = tokens + (maxTokens ?? DEFAULT_OUTPUT_ESTIMATE);
  if (limits.maxSessionTokens !== undefined && view.sessionTokens + outTokens > limits.maxSessionTokens)
    return {
      which: "maxSessionTokens",
      limit: limits.maxSessionTokens,
      spent: view.sessionTokens,
      estimate: outTokens,
    };
  return undefined;
}

/** The message of a budget stop: what was spent, the limit, the estimate, and what to do. */
export function breachMessage(b: BudgetBreach, model: string): string {
  const usd = (n: number) => `$${n.toFixed(4)}`;
  const scope = b.which === "maxCostUsd" ? "this turn" : "this session";
  const said =
    b.which === "maxSessionTokens"
      ? `This session used ${b.spent} tokens of limits.maxSessionTokens ${b.limit}; the next request to ${model} is estimated at ${b.estimate} tokens (input plus output ceiling).`
      : `${scope === "this turn" ? "This turn" : "This session"} spent ${usd(b.spent)} of limits.${b.which} ${usd(b.limit)}; the next request to ${model} is estimated at ${usd(b.estimate)}.`;
  return new KeelError("KEEL_BUDGET_EXCEEDED", said).message;
}
