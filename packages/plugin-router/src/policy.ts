/**
 * The router's decision, a pure function of the request's shape, the pool, the policy and the
 * member the turn's previous round went to (fixture-tested): which members fit (window,
 * capabilities, budget left), which one the policy prefers, and whether the previous one stays.
 */
import type { PoolMemberView, RoutingView } from "@keel/kernel";
import { DEFAULT_OUTPUT_ESTIMATE, estimateCost } from "@keel/kernel";

/** How the router prefers among members that fit. */
export type RoutePolicy = "cheapest" | "fastest" | "strongest";

/** Tags that restrict a request to the members carrying them, once any member carries them. */
export const CAPABILITY_TAGS = ["tools", "images", "reasoning"] as const;

/** What the router decides with besides the view. */
export interface DecideInput {
  view: RoutingView;
  policy: RoutePolicy;
  /** What to do when the preferred member would pass the budget: move to a cheaper one that fits (`downgrade`) or leave it to the kernel's guard (`stop`). */
  onBudget: "downgrade" | "stop";
  /** The member the turn's previous round went to (kept while it fits: the prompt cache stays warm). */
  previous?: string;
  /** The request asks for reasoning (turn metadata `reasoning: true`). */
  reasoning?: boolean;
}

/** A decision: a member and why; undefined when no member fits (the default model serves). */
export interface Decision {
  model: string;
  reason: string;
}

/** Why `m` cannot take this request, or undefined when it fits. */
function misfit(m: PoolMemberView, need: Need, pool: readonly PoolMemberView[]): string | undefined {
  const out = outOf(m, need);
  if (m.contextWindow !== undefined && need.tokens + out > m.contextWindow)
    return `the request (${need.tokens} tokens + ${out} output) no longer fits its window of ${m.contextWindow}`;
  if (m.contextWindow !== undefined && need.tokens > m.contextWindow * need.ceiling)
    return `the request (${need.tokens} tokens) is past its context ceiling of ${Math.floor(m.contextWindow * need.ceiling)}`;
  for (const cap of need.caps)
    if (pool.some((p) => p.tags.includes(cap)) && !m.tags.includes(cap))
      return cap === "images" ? "images are in the request and it is not tagged images" : `it is not tagged ${cap}`;
  if (need.leftUsd !== undefined) {
    const cost = estimateCost(need.tokens, m.price, outOf(m, need));
    if (cost !== undefined && cost > need.leftUsd)
      return `budget: its estimate $${cost.toFixed(4)} is over the $${Math.max(0, need.leftUsd).toFixed(4)} left`;
  }
  return undefined;
}

/** The output ceiling of the request on `m`: its maxTokens, else what the member's provider asks for, else the kernel's default. */
function outOf(m: PoolMemberView, need: Need): number {
  return need.maxTokens ?? m.maxOutputTokens ?? DEFAULT_OUTPUT_ESTIMATE;
}

interface Need {
  tokens: number;
  /** The share of a window a request may fill (RoutingView.contextCeiling, else 1). */
  ceiling: number;
  maxTokens: number | undefined;
  caps: string[];
  leftUsd: number | undefined;
}

function needOf(input: DecideInput, withBudget: boolean): Need {
  const s = input.view.shape;
  const caps: string[] = [];
  if (s.tools > 0) caps.push("tools");
  if (s.images) caps.push("images");
  if (input.reasoning) caps.push("reasoning");
  const leftUsd = withBudget ? input.view.budget?.leftUsd : undefined;
  const ceiling = input.view.contextCeiling ?? 1;
  return { tokens: s.tokens, ceiling, maxTokens: s.maxTokens, caps, leftUsd };
}

const SPEED: Record<string, number> = { fast: 0, slow: 2 };
const STRENGTH: Record<string, number> = { strong: 0, reasoning: 1, cheap: 3, fast: 2 };

function rank(m: PoolMemberView, policy: RoutePolicy, need: Need): number[] {
  const cost = estimateCost(need.tokens, m.price, outOf(m, need)) ?? Number.POSITIVE_INFINITY;
  if (policy === "cheapest") return [cost];
  const table = policy === "fastest" ? SPEED : STRENGTH;
  // Own keys only: a tag such as `constructor` or `toString` is no score (a prototype's function would rank NaN).
  const scores = m.tags.flatMap((t) => (Object.hasOwn(table, t) ? [table[t]!] : []));
  const score = scores.length ? Math.min(...scores) : 1;
  return policy === "fastest" ? [score, cost] : [score, -cost];
}

function better(a: number[], b: number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return false;
}

/**
 * The member for this round. Contract: deterministic (ties go to the earlier member); the
 * previous member is kept while it fits, and a switch away from it names why; with
 * `onBudget: "stop"` the budget filters nothing.
 */
export function decide(input: DecideInput): Decision | undefined {
  const members = input.view.members;
  const need = needOf(input, input.onBudget === "downgrade");
  const prev = input.previous !== undefined ? members.find((m) => m.name === input.previous) : undefined;
  const prevMisfit = prev ? misfit(prev, need, members) : undefined;
  if (prev && !prevMisfit)
    return { model: prev.name, reason: `kept ${prev.name} for this turn (prompt cache stays warm)` };
  let best: { m: PoolMemberView; r: number[] } | undefined;
  for (const m of members) {
    if (misfit(m, need, members)) continue;
    const r = rank(m, input.policy, need);
    if (!best || better(r, best.r)) best = { m, r };
  }
  if (!best) return undefined;
  const why = policyReason(best.m, input.policy, need);
  return { model: best.m.name, reason: prev ? `switched from ${prev.name}: ${prevMisfit}; ${why}` : why };
}

function policyReason(m: PoolMemberView, policy: RoutePolicy, need: Need): string {
  const cost = estimateCost(need.tokens, m.price, outOf(m, need));
  const est = cost !== undefined ? ` (est. $${cost.toFixed(4)})` : "";
  const caps = need.caps.length ? `, needs ${need.caps.join("+")}` : "";
  const label =
    policy === "cheapest" ? "cheapest that fits" : policy === "fastest" ? "fastest that fits" : "strongest that fits";
  return `${label}: ${m.name}${est}${caps}`;
}
