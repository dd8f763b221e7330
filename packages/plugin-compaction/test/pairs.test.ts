import type { Message } from "@keel/kernel";
import { applyMessageEdits, repairToolPairs } from "@keel/kernel";
import { seededRandom } from "@keel/testkit";
import { describe, expect, it } from "vitest";
import type { CompactOptions, Strategy } from "../src/index.ts";
import { compactHistory, diffEdits, SubgoalRegistry, messageKeys } from "../src/index.ts";
import { fullText } from "../src/messages.ts";
import { adversarialHistory, expectPairs } from "./support.ts";

const base: CompactOptions = {
  strategy: "subgoal",
  soft: 0.6,
  hard: 0.9,
  target: 0.45,
  protectedTail: { tokens: 40_000, messages: 6, share: 0.25 },
  cooldownRounds: 2,
  minMaskTokens: 20,
  summaryTokens: 300,
  summaryTimeoutMs: 1_000,
  retrieveTool: "context_retrieve",
  stubIdentifiers: 150,
  maskArguments: true,
  maskText: true,
  summaryShare: 0.5,
};

describe("pair integrity on adversarial histories", () => {
  it("1,200 seeded histories: no orphan, no split pair, pinned messages kept, edits reproduce the result", async () => {
    // Pair integrity does not depend on the tokenizer: a chars/4 count keeps 1,200 runs fast.
    const cache = new WeakMap<Message, number>();
    const countText = (t: string) => Math.ceil(t.length / 4);
    const countMessage = (m: Message) => {
      let n = cache.get(m);
      if (n === undefined) cache.set(m, (n = 4 + countText(fullText(m))));
      return n;
    };
    const counter = { countMessages: (ms: readonly Message[]) => ms.reduce((a, m) => a + countMessage(m), 0) };
    const strategies: Strategy[] = ["truncate", "mask", "subgoal", "subgoal_mig"];
    let changed = 0;
    let summarised = 0;
    for (let seed = 1; seed <= 1_200; seed++) {
      const rnd = seededRandom(seed);
      const history = adversarialHistory(rnd);
      const total = counter.countMessages(history);
      const registry = new SubgoalRegistry();
      registry.apply({ next: "first subgoal" }, messageKeys(history).slice(0, Math.floor(rnd() * history.length)));
      if (rnd() < 0.5)
        registry.apply({ completed: "done", next: "second" }, messageKeys(history).slice(-Math.floor(rnd() * 6)));
      const pinIndex = history.findLastIndex((m) => m.role === "user");
      const pinned = new Set([0, pinIndex]);
      const options = {
        ...base,
        strategy: strategies[seed % 4]!,
        protectedTail: { tokens: Math.floor(rnd() * 2_000), messages: Math.floor(rnd() * 8), share: 0.25 },
      };
      const res = await compactHistory({
        messages: history,
        overhead: 100,
        window: Math.max(200, Math.floor(total * (0.3 + rnd()))),
        calibration: 1,
        pinned,
        force: rnd() < 0.2,
        state: { round: 10, lastHard: rnd() < 0.3 ? 9 : undefined, exhausted: false },
        registry,
        options,
        countText,
        countMessage,
        stash: (m) => `m-${m.toolCallId}`,
        model: undefined,
        goal: "task",
      });
      const out = res?.messages ?? history;
      if (!res)
        expect(repairToolPairs(history).messages, `seed ${seed}: unchanged history must already be valid`).toBe(
          history,
        );
      else changed++;
      if (res?.report.summary) summarised++;
      expectPairs(out);
      expect(repairToolPairs(out).messages, `seed ${seed}`).toBe(out);
      for (const i of pinned) expect(out.includes(history[i]!), `seed ${seed}: pinned message ${i} lost`).toBe(true);
      expect(out[0]).toBe(history[0]);
      if (res) {
        const replayed = applyMessageEdits(history, diffEdits(history, out));
        expect(
          replayed.map((m) => JSON.stringify(m)),
          `seed ${seed}: edits do not reproduce the result`,
        ).toEqual(out.map((m) => JSON.stringify(m)));
      }
    }
    // The generator really exercises the stages.
    expect(changed).toBeGreaterThan(1_000);
    expect(summarised).toBeGreaterThan(150);
  }, 60_000);
});
