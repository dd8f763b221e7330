/**
 * Routing and budgets: the pool a plugin may route a round to (AgentOptions.pool, chosen with
 * `request_options.options.route` at round.pre_request), the request shape it decides on, and
 * the cost a request is estimated at before it is sent (limits.maxCostUsd and friends).
 */
import { KeelError } from "./errors.ts";
import type { Limits } from "./limits.ts";
import type { Message } from "./messages.ts";
import type { ModelPriceView, ModelProvider } from "./provider.ts";
import type { Usage } from "./usage.ts";
import { addUsage, emptyUsage } from "./usage.ts";

/**
 * One member of a provider pool. Contract: `provider` serves the rounds routed to it (a chain,
 * when it is one, falls back as fallback() does); `price` (USD per million tokens) and
 * `contextWindow` default to the provider's own.
 */
export interface PoolMember {
  provider: ModelProvider;
  /** Free-form tags a router matches: e.g. `cheap`, `fast`, `tools`, `images`, `reasoning`. */
  tags?: readonly string[];
  price?: ModelPriceView;
  contextWindow?: number;
}

/** A pool member as round.pre_request handlers see it. Contract: read-only; `name` is the pool key. */
export interface PoolMemberView {
  name: string;
  /** `<provider>:<model>` of the member's first provider. */
  id: string;
  tags: readonly string[];
  price?: ModelPriceView;
  contextWindow?: number;
  /** The output ceiling of a request without `maxTokens` (ModelProvider.maxOutputTokens), when the provider declares one. */
  maxOutputTokens?: number;
}

/** What a router decides on. Contract: absent from round.pre_request when the agent has no pool. */
export interface RoutingView {
  /** The members, in the order given. */
  members: readonly PoolMemberView[];
  /** The agent's own model (what serves a round no plugin routed). */
  default: Omit<PoolMemberView, "name" | "tags">;
  /** The request's shape: `tokens` from the kernel's counter, tools sent, images present, mode. */
  shape: { tokens: number; tools: number; images: boolean; mode: "agent" | "chat"; maxTokens?: number };
  /** What the turn and the session may still spend; absent when no budget is set. */
  budget?: BudgetView;
  /** limits.contextCeiling: a member takes a request only while its tokens stay under this share of its window (else the kernel drops the route). */
  contextCeiling?: number;
}

/** Spend so far and what is left. Contract: `left*` are absent when the matching limit is not set. */
export interface BudgetView {
  turnCostUsd: number;
  sessionCostUsd: number;
  sessionTokens: number;
  leftTurnUsd?: number;
  leftSessionUsd?: number;
  leftSessionTokens?: number;
  /** The smaller of the dollar amounts left; absent when no dollar limit is set. */
  leftUsd?: number;
}

/** A plugin's routing choice: `model` names a pool member. Contract: the kernel records it with the plugin that made it. */
export interface RouteChoice {
  model: string;
  reason: string;
}

/** The route a round took, as the prompt manifest records it. */
export interface RouteRecord {
  /** The pool member's name. */
  model: string;
  /** `<provider>:<model>` of the member. */
  provider: string;
  reason: string;
  plugin: string;
}

/** The pool member serving a round (Turn.route). */
export interface ActiveRoute {
  provider: ModelProvider;
  contextWindow: number | undefined;
  price: ModelPriceView | undefined;
  record: RouteRecord;
}

/**
 * Output tokens assumed for a request without `maxTokens`, when its cost is estimated before it is
 * sent: a conservative ceiling of one answer (most provider defaults are at or below it).
 */
export const DEFAULT_OUTPUT_ESTIMATE = 4096;

/**
 * The cost of a request before it is sent: `tokens` × input price plus the output ceiling
 * (`maxTokens`: the request's, else the provider's maxOutputTokens, else DEFAULT_OUTPUT_ESTIMATE) × output price. Contract: undefined without a price;
 * never below what the request can cost when every input token is billed at the input price.
 */
export function estimateCost(
  tokens: number,
  price: ModelPriceView | undefined,
  maxTokens?: number,
): number | undefined {
  if (!price) return undefined;
  const out = maxTokens ?? DEFAULT_OUTPUT_ESTIMATE;
  return (tokens * price.input + out * price.output) / 1_000_000;
}

/**
 * A response's usage with its cost: the provider's own `costUsd` when it reported a valid one,
 * else its tokens at `price` (cache tokens at the input price), so a priced model that reports no
 * cost still spends against a budget. Contract: unchanged without a price.
 */
export function chargedUsage(usage: Partial<Usage> | undefined, price: ModelPriceView | undefined): Partial<Usage> {
  const given = usage ?? {};
  const c = given.costUsd;
  if (!price || (typeof c === "number" && Number.isFinite(c) && c >= 0)) return given;
  const u = addUsage(emptyUsage(), { ...given, costUsd: undefined });
  const tokensIn = u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens;
  return { ...given, costUsd: (tokensIn * price.input + u.outputTokens * price.output) / 1_000_000 };
}

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
