/**
 * Adversarial cases of the router's decision: tags that are prototype keys of a plain object, a
 * request past a member's context ceiling (the kernel would drop that route), and hostile names.
 */
import { describe, expect, it } from "vitest";
import type { PoolMemberView, RoutingView } from "../../kernel/src/index.ts";
import { decide } from "../src/index.ts";

const view = (
  members: PoolMemberView[],
  shape: Partial<RoutingView["shape"]> = {},
  extra: Partial<RoutingView> = {},
): RoutingView => ({
  members,
  default: { id: "x:default" },
  shape: { tokens: 1000, tools: 0, images: false, mode: "chat", ...shape },
  ...extra,
});

describe("router decisions under hostile input", () => {
  it("a tag that is a prototype key (constructor, toString) does not beat a member tagged fast or strong", () => {
    for (const tag of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
      const members: PoolMemberView[] = [
        { name: "odd", id: "x:odd", tags: [tag], price: { input: 1, output: 1 } },
        { name: "quick", id: "x:quick", tags: ["fast"], price: { input: 1, output: 1 } },
        { name: "brains", id: "x:brains", tags: ["strong"], price: { input: 1, output: 1 } },
      ];
      expect(decide({ view: view(members), policy: "fastest", onBudget: "downgrade" })?.model, tag).toBe("quick");
      expect(decide({ view: view(members), policy: "strongest", onBudget: "downgrade" })?.model, tag).toBe("brains");
    }
  });
});

describe("the member's output ceiling", () => {
  it("a member whose provider asks for a larger output ceiling is over the budget left: the router downgrades", () => {
    const members: PoolMemberView[] = [
      { name: "roomy", id: "x:roomy", tags: [], price: { input: 1, output: 10 }, maxOutputTokens: 32_000 },
      { name: "tight", id: "x:tight", tags: [], price: { input: 1, output: 20 } },
    ];
    // roomy: 32,000 × $10/M = $0.32; tight: 4096 × $20/M ≈ $0.082; $0.10 left.
    const budget = { turnCostUsd: 0, sessionCostUsd: 0, sessionTokens: 0, leftTurnUsd: 0.1, leftUsd: 0.1 };
    const d = decide({ view: view(members, {}, { budget }), policy: "cheapest", onBudget: "downgrade" });
    expect(d?.model).toBe("tight");
  });
});

describe("the context ceiling", () => {
  it("a member whose window takes the request but not under the ceiling is not chosen (the kernel would drop the route)", () => {
    const members: PoolMemberView[] = [
      { name: "small", id: "x:small", tags: [], price: { input: 0.1, output: 0.1 }, contextWindow: 10_000 },
      { name: "large", id: "x:large", tags: [], price: { input: 1, output: 1 }, contextWindow: 200_000 },
    ];
    // 8,500 + 1,000 output fits 10,000, but 8,500 is past 0.8 × 10,000.
    const v = view(members, { tokens: 8500, maxTokens: 1000 }, { contextCeiling: 0.8 });
    expect(decide({ view: v, policy: "cheapest", onBudget: "downgrade" })).toEqual({
      model: "large",
      reason: "cheapest that fits: large (est. $0.0095)",
    });
    const kept = decide({ view: v, policy: "cheapest", onBudget: "downgrade", previous: "small" });
    expect(kept?.model).toBe("large");
    expect(kept?.reason).toContain(
      "switched from small: the request (8500 tokens) is past its context ceiling of 8000",
    );
  });
});
