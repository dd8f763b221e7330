/**
 * Nothing the user said is lost to compaction: a message steered into a running turn (and the
 * turn's own input) stays in every later request, whatever the strategy, even `truncate`,
 * which drops whole old turns. Found by an adversarial fuzz: `truncate` dropped mid-turn
 * steering in 14 of 200 seeds.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Strategy } from "../src/index.ts";
import { bigOutput, cleanupDirs, setup, textOf, gatedBash } from "./support.ts";

afterEach(cleanupDirs);

describe("steering survives compaction", () => {
  for (const strategy of ["truncate", "mask", "subgoal"] as Strategy[]) {
    it(`${strategy}: a steered message is in every request after it, under heavy pressure`, async () => {
      const { bash, began, release } = gatedBash((n) => bigOutput(`run${n}`, 60));
      const steps = Array.from({ length: 8 }, (_, i) => ({
        text: `Step ${i + 1}.`,
        toolCalls: [{ id: `c${i + 1}`, name: "bash", args: { command: `check ${i + 1}` } }],
      }));
      const { session, provider } = await setup({
        steps: [...steps, { text: "done" }],
        window: 8_000,
        tools: [bash],
        plugin: { strategy, taco: { enabled: false }, hard: 0.99, subgoals: { extractor: "heuristic" } },
      });
      const running = session.run("Run the checks one by one.");
      await began;
      await session.steer("Also report the slowest check.");
      release();
      await running;
      const after = provider.requests.slice(1);
      expect(after.length).toBeGreaterThan(3);
      for (const [i, r] of after.entries()) {
        const users = r.messages
          .filter((m) => m.role === "user")
          .map(textOf)
          .join("\n");
        expect(users, `request ${i + 2}`).toContain("Also report the slowest check.");
        expect(users, `request ${i + 2}`).toContain("Run the checks one by one.");
      }
    }, 60_000);
  }
});
