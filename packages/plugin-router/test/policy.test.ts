/**
 * The router's policies, fixture-driven: each case gives a request shape, a policy, the member
 * the turn's previous round went to and the budget left, and the exact member and reason.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { PoolMemberView, RoutingView } from "../../kernel/src/index.ts";
import { decide } from "../src/index.ts";
import type { RoutePolicy } from "../src/index.ts";

interface Case {
  name: string;
  shape: RoutingView["shape"];
  policy: RoutePolicy;
  onBudget?: "downgrade" | "stop";
  previous?: string;
  reasoning?: boolean;
  budget?: RoutingView["budget"];
  pick: string | null;
  reason?: string;
}
const fixture = JSON.parse(readFileSync(new URL("./fixtures/pool.json", import.meta.url), "utf8")) as {
  members: PoolMemberView[];
  cases: Case[];
};

describe("router policies", () => {
  for (const c of fixture.cases) {
    it(c.name, () => {
      const view: RoutingView = {
        members: fixture.members,
        default: { id: "anthropic:claude-sonnet-4-5" },
        shape: c.shape,
        ...(c.budget ? { budget: c.budget } : {}),
      };
      const d = decide({
        view,
        policy: c.policy,
        onBudget: c.onBudget ?? "downgrade",
        ...(c.previous ? { previous: c.previous } : {}),
        ...(c.reasoning ? { reasoning: true } : {}),
      });
      if (c.pick === null) expect(d).toBeUndefined();
      else expect(d).toEqual({ model: c.pick, reason: c.reason });
    });
  }

  it("a tie goes to the earlier member; an unpriced member ranks last under cheapest", () => {
    const members: PoolMemberView[] = [
      { name: "a", id: "x:a", tags: [] },
      { name: "b", id: "x:b", tags: [], price: { input: 1, output: 1 } },
      { name: "c", id: "x:c", tags: [], price: { input: 1, output: 1 } },
    ];
    const view: RoutingView = {
      members,
      default: { id: "x:d" },
      shape: { tokens: 10, tools: 0, images: false, mode: "chat" },
    };
    expect(decide({ view, policy: "cheapest", onBudget: "downgrade" })?.model).toBe("b");
  });
});
