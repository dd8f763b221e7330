/**
 * The budget ledger (route.ts): what a turn's running children hold counts as spent in every
 * check of that turn — its own next request (breach), its routing view and what a further child
 * may get (budgetView) — until each child releases it; releases are idempotent and per session.
 */
import { describe, expect, it } from "vitest";
import { emptyUsage } from "@keel/kernel";
import type { Limits, Usage } from "@keel/kernel";
import { breach, breachMessage, budgetView, heldBy, reserve } from "../src/route.ts";

const limits = { maxCostUsd: 0.5, maxSessionTokens: 100_000 } as Limits;
const spent = (costUsd: number, tokens = 0): Usage => ({ ...emptyUsage(), inputTokens: tokens, costUsd });
const price = { input: 3, output: 15 };

describe("budget ledger", () => {
  it("a request that fits what was spent but not spent + held is refused, and says what the children hold", () => {
    const session = {};
    const turn = spent(0.1, 1_000);
    // $0.0315 estimated: 10,000 tokens in, 100 out.
    expect(
      breach(limits, budgetView(limits, turn, turn, heldBy(session)), heldBy(session), 10_000, price, 100),
    ).toBeUndefined();
    const a = reserve(session, 0.2, 20_000);
    const b = reserve(session, 0.18, 20_000);
    expect(heldBy(session)).toEqual({ usd: 0.38, tokens: 40_000, children: 2 });
    const view = budgetView(limits, turn, turn, heldBy(session));
    expect(view.leftUsd).toBeCloseTo(0.02, 9);
    expect(view.leftSessionTokens).toBe(100_000 - 1_000 - 40_000);
    const over = breach(limits, view, heldBy(session), 10_000, price, 100)!;
    expect(over).toMatchObject({ which: "maxCostUsd", spent: 0.1, estimate: 0.0315 });
    expect(over.held).toBeCloseTo(0.38, 9);
    expect(breachMessage(over, "m")).toContain(
      "This turn spent $0.1000 (its running child sessions hold $0.3800 more) of limits.maxCostUsd $0.5000",
    );
    // A child that ends gives back what it held; a second release changes nothing.
    a.release();
    a.release();
    expect(heldBy(session)).toEqual({ usd: expect.closeTo(0.18, 9), tokens: 20_000, children: 1 });
    expect(
      breach(limits, budgetView(limits, turn, turn, heldBy(session)), heldBy(session), 10_000, price, 100),
    ).toBeUndefined();
    // Shrinking a hold (the child agent's own limit was lower) gives the difference back at once.
    b.shrink(0.05, 5_000);
    expect(heldBy(session)).toEqual({ usd: expect.closeTo(0.05, 9), tokens: 5_000, children: 1 });
    b.release();
    expect(heldBy(session)).toEqual({ usd: 0, tokens: 0, children: 0 });
    // Another session's holds are its own.
    expect(heldBy({})).toEqual({ usd: 0, tokens: 0, children: 0 });
  });

  it("held tokens count against maxSessionTokens too", () => {
    const session = {};
    const used = spent(0, 50_000);
    const hold = reserve(session, 0, 45_000);
    const over = breach(
      limits,
      budgetView(limits, used, used, heldBy(session)),
      heldBy(session),
      2_000,
      undefined,
      4_000,
    );
    expect(over).toMatchObject({ which: "maxSessionTokens", spent: 50_000, held: 45_000, estimate: 6_000 });
    hold.release();
    expect(
      breach(limits, budgetView(limits, used, used, heldBy(session)), heldBy(session), 2_000, undefined, 4_000),
    ).toBeUndefined();
  });
});
