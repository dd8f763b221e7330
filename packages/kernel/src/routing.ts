/**
 * What routing and budgets look like to the loop and to plugins: the pool a plugin may route a
 * round to (request_options.options.route at round.pre_request), the view of it plugins read,
 * and the route a round took. The choosing and the budget checks are the host's (TurnSeams.round);
 * the kernel only carries these shapes.
 */
import type { ModelProvider } from "./provider.ts";
import type { ModelPriceView } from "./usage.ts";

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
