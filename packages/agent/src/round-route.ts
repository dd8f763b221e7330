/**
 * The routing seam of a round: what round.pre_request handlers see of the pool (only when the
 * agent has one), the route a plugin chose (taken off the request options, checked against the
 * pool), and the budget check before the request is sent. No pool and no budget: none of it runs.
 */
import type { ContributionOf } from "@keel/kernel";
import type { Contributed } from "@keel/kernel";
import { KeelError } from "@keel/kernel";
import type { Message } from "@keel/kernel";
import type { ModelPriceView, ModelProvider, RequestOptions } from "@keel/kernel";
import type { PoolMemberView, RoundSeam, RoutingView } from "@keel/kernel";
import type { AgentOptions } from "./agent-options.ts";
import { breach, breachMessage, budgetView, hasBudget, hasImages, heldBy } from "./route.ts";
import type { RequestTokenCount } from "@keel/kernel";
import type { Turn } from "@keel/kernel";
import { TurnFailure } from "@keel/kernel";

/** What round.pre_request handlers decide on; undefined without a pool (nothing is computed then). */
export function routingView(
  t: Turn,
  tokens: number,
  tools: number,
  messages: readonly Message[],
  options: RequestOptions,
): RoutingView | undefined {
  const pool = poolOf(t);
  if (!pool) return undefined;
  const members: PoolMemberView[] = Object.entries(pool).map(([name, m]) => ({
    name,
    id: m.provider.id,
    tags: [...(m.tags ?? [])],
    ...priceAndWindow(m.price ?? m.provider.price, m.contextWindow ?? m.provider.contextWindow),
    ...ceilingOf(m.provider),
  }));
  const own = t.agent.options.provider;
  return {
    members,
    default: { id: own.id, ...priceAndWindow(own.price, own.contextWindow), ...ceilingOf(own) },
    shape: {
      tokens,
      tools,
      images: hasImages(messages),
      mode: t.mode,
      ...(options.maxTokens !== undefined ? { maxTokens: options.maxTokens } : {}),
    },
    ...(hasBudget(t.limits) ? { budget: budgetView(t.limits, t.usage, t.session.spend, heldBy(t.session)) } : {}),
    contextCeiling: t.limits.contextCeiling,
  };
}

/** A provider's declared output ceiling, when it is a positive integer. */
function ceilingOf(p: ModelProvider): { maxOutputTokens?: number } {
  const n = p.maxOutputTokens;
  return typeof n === "number" && Number.isInteger(n) && n > 0 ? { maxOutputTokens: n } : {};
}

function priceAndWindow(
  price: ModelPriceView | undefined,
  contextWindow: number | undefined,
): { price?: ModelPriceView; contextWindow?: number } {
  return {
    ...(price ? { price: { input: price.input, output: price.output } } : {}),
    ...(contextWindow !== undefined ? { contextWindow } : {}),
  };
}

/**
 * The options without `route`, and the route taken (t.route). A route to a model the pool does
 * not have (or with no pool) is a located diagnostic and the default model serves.
 */
export function takeRoute(
  t: Turn,
  options: RequestOptions,
  items: readonly Contributed<ContributionOf<"request_options">>[],
): RequestOptions {
  t.route = undefined;
  if (options.route === undefined) return options;
  const { route, ...rest } = options;
  const plugin = [...items].reverse().find((c) => c.value.options.route === route)?.plugin ?? "requestOptions";
  const pool = poolOf(t);
  const member = pool && Object.hasOwn(pool, route.model) ? pool[route.model] : undefined;
  if (!member) {
    const all = Object.keys(poolOf(t) ?? {});
    // A few names, not a huge pool's every one (this diagnostic can repeat each round).
    const names = all.length > 10 ? [...all.slice(0, 10), `and ${all.length - 10} more`] : all;
    const message = new KeelError(
      "KEEL_ROUTE_UNKNOWN",
      `${plugin} routed round ${t.rounds} to "${route.model}", which is not in the pool (${names.length ? names.join(", ") : "the agent has no pool"}); ${t.agent.options.provider.id} served it.`,
      { plugin, phase: "round.pre_request" },
    ).message;
    void t.session.emit(
      { type: "diagnostic", level: "warn", code: "KEEL_ROUTE_UNKNOWN", message, plugin, phase: "round.pre_request" },
      t.turnId,
    );
    return rest;
  }
  t.route = {
    provider: member.provider,
    contextWindow: member.contextWindow ?? member.provider.contextWindow,
    price: member.price ?? member.provider.price,
    record: { model: route.model, provider: member.provider.id, reason: route.reason, plugin },
  };
  return rest;
}

/**
 * A route the request does not fit (past the member's context ceiling, counted exactly when the
 * estimate's bound is near it) is dropped with a located diagnostic and the default model serves:
 * a plugin's route never turns a round final nor fails the turn. Returns the count to check on.
 */
export function fitRoute(t: Turn, estimate: RequestTokenCount, exact: () => RequestTokenCount): RequestTokenCount {
  const window = t.route?.contextWindow;
  if (!t.route || !window) return estimate;
  const ceiling = window * t.limits.contextCeiling;
  const count = !estimate.exact && (estimate.bound ?? estimate.total) > ceiling ? exact() : estimate;
  if (count.total <= ceiling) return count;
  const { plugin, model } = t.route.record;
  const message = new KeelError(
    "KEEL_ROUTE_UNFIT",
    `${plugin} routed round ${t.rounds} to "${model}", whose context window of ${window} (ceiling ${Math.floor(ceiling)}) cannot take the request's ${count.total} tokens; ${t.agent.options.provider.id} served it.`,
    { plugin, phase: "round.pre_request" },
  ).message;
  void t.session.emit(
    { type: "diagnostic", level: "warn", code: "KEEL_ROUTE_UNFIT", message, plugin, phase: "round.pre_request" },
    t.turnId,
  );
  t.route = undefined;
  return count;
}

/**
 * Before the request is sent: when a budget is set and the request's estimate, on top of what the
 * turn spent and its running children hold, would pass it, the turn stops (`budget`, with a guard.tripped event) and nothing is sent.
 */
export function checkBudget(t: Turn, tokens: number, options: RequestOptions): void {
  if (!hasBudget(t.limits)) return;
  const provider = t.route?.provider ?? t.agent.options.provider;
  const price = t.route ? t.route.price : provider.price;
  const out = options.maxTokens ?? ceilingOf(provider).maxOutputTokens;
  // Spent plus what this turn's running children hold: a request never spends a child's share.
  const held = heldBy(t.session);
  const b = breach(t.limits, budgetView(t.limits, t.usage, t.session.spend, held), held, tokens, price, out);
  if (!b) return;
  void t.session.emit(
    { type: "guard.tripped", guard: "budget", limit: b.limit, value: b.spent + b.estimate },
    t.turnId,
  );
  throw new TurnFailure({ status: "stopped", reason: "budget", detail: breachMessage(b, provider.id) });
}

/** The pool of the agent a turn runs in: the host built that agent, so its options are AgentOptions. */
function poolOf(t: Turn): AgentOptions["pool"] {
  return (t.agent.options as AgentOptions).pool;
}

/** Routing and budgets as the kernel's round seam. Contract: installed on every agent; without a pool it gives no routing view, without a limit it checks nothing. */
export const roundSeam: RoundSeam = {
  view: routingView,
  take: takeRoute,
  fit: fitRoute,
  check: checkBudget,
  leftUsd: (t) => budgetView(t.limits, t.usage, t.session.spend, heldBy(t.session)).leftUsd,
};
