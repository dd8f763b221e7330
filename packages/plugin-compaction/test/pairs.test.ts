import type { Message, ToolResultMessage } from "@keel/kernel";
import { applyMessageEdits, repairToolPairs } from "@keel/kernel";
import { seededRandom } from "@keel/kernel/testing";
import { describe, expect, it } from "vitest";
import type { CompactOptions, Strategy } from "../src/index.ts";
import { compactHistory, diffEdits, SubgoalRegistry, messageKeys } from "../src/index.ts";
import { fullText } from "../src/messages.ts";
import { expectPairs } from "./support.ts";


const WORDS = "alpha beta gamma /srv/app/main.py ValueError exit 137 retry_count fooBar 0x1f build ok failed".split(" ");

/** A history with orphans, missing results, duplicates, results after user messages and stray summaries. */
function adversarialHistory(rnd: () => number): Message[] {
  const pick = <T,>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)]!;
  const text = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(" ");
  const out: Message[] = [{ role: "user", content: [{ type: "text", text: `task ${text(5)}` }] }];
  let callNo = 0;
  const n = 3 + Math.floor(rnd() * 50);
  let pending: Array<{ id: string; name: string }> = [];
  for (let k = 0; k < n; k++) {
    const r = rnd();
    if (r < 0.12) out.push({ role: "user", content: [{ type: "text", text: text(1 + Math.floor(rnd() * 30)) }] });
    else if (r < 0.45) {
      const calls = Array.from({ length: Math.floor(rnd() * 4) }, () => ({ id: rnd() < 0.05 && callNo > 0 ? `c${callNo - 1}` : `c${callNo++}`, name: pick(["bash", "read", "grep"]) }));
      out.push({ role: "assistant", content: [{ type: "text", text: text(3 + Math.floor(rnd() * 40)) }, ...calls.map((c) => ({ type: "tool_call" as const, id: c.id, name: c.name, args: { q: text(2) } }))] });
      pending = calls;
      const order = [...pending].sort(() => rnd() - 0.5);
      for (const c of order) {
        if (rnd() < 0.15) continue; // missing result
        if (rnd() < 0.1) out.push({ role: "user", content: [{ type: "text", text: "interjection" }] }); // splits the pair
        out.push(result(c.id, c.name, text(5 + Math.floor(rnd() * 400))));
        if (rnd() < 0.05) out.push(result(c.id, c.name, "duplicate"));
      }
    } else if (r < 0.55) out.push(result(`ghost${k}`, "bash", text(10))); // orphan
    else if (r < 0.6) out.push({ role: "user", content: [{ type: "text", text: `[summary of earlier conversation (3 messages, deterministic)]\n${text(20)}` }] });
    else out.push({ role: "assistant", content: [{ type: "text", text: text(5 + Math.floor(rnd() * 60)) }] });
  }
  if (out.at(-1)!.role === "assistant") out.push({ role: "user", content: [{ type: "text", text: "go on" }] });
  return out;
}

function result(id: string, name: string, text: string): ToolResultMessage {
  return { role: "tool", toolCallId: id, toolName: name, content: [{ type: "text", text }], isError: false };
}

const base: CompactOptions = { strategy: "subgoal", soft: 0.6, hard: 0.9, target: 0.45, protectedTail: { tokens: 40_000, messages: 6, share: 0.25 }, cooldownRounds: 2, minMaskTokens: 20, summaryTokens: 300, summaryTimeoutMs: 1_000, retrieveTool: "context_retrieve", stubIdentifiers: 150, maskArguments: true };

describe("pair integrity on adversarial histories", () => {
  it("3,000 seeded histories: no orphan, no split pair, pinned messages kept, edits reproduce the result", async () => {
    // Pair integrity does not depend on the tokenizer: a chars/4 count keeps 3,000 runs fast.
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
    for (let seed = 1; seed <= 3_000; seed++) {
      const rnd = seededRandom(seed);
      const history = adversarialHistory(rnd);
      const total = counter.countMessages(history);
      const registry = new SubgoalRegistry();
      registry.apply({ next: "first subgoal" }, messageKeys(history).slice(0, Math.floor(rnd() * history.length)));
      if (rnd() < 0.5) registry.apply({ completed: "done", next: "second" }, messageKeys(history).slice(-Math.floor(rnd() * 6)));
      const pinIndex = history.findLastIndex((m) => m.role === "user");
      const pinned = new Set([0, pinIndex]);
      const options = { ...base, strategy: strategies[seed % 4]!, protectedTail: { tokens: Math.floor(rnd() * 2_000), messages: Math.floor(rnd() * 8), share: 0.25 } };
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
      if (!res) expect(repairToolPairs(history).messages, `seed ${seed}: unchanged history must already be valid`).toBe(history);
      else changed++;
      if (res?.report.summary) summarised++;
      expectPairs(out);
      expect(repairToolPairs(out).messages, `seed ${seed}`).toBe(out);
      for (const i of pinned) expect(out.includes(history[i]!), `seed ${seed}: pinned message ${i} lost`).toBe(true);
      expect(out[0]).toBe(history[0]);
      if (res) {
        const replayed = applyMessageEdits(history, diffEdits(history, out));
        expect(replayed.map((m) => JSON.stringify(m)), `seed ${seed}: edits do not reproduce the result`).toEqual(out.map((m) => JSON.stringify(m)));
      }
    }
    // The generator really exercises the stages.
    expect(changed).toBeGreaterThan(2_000);
    expect(summarised).toBeGreaterThan(200);
  }, 60_000);
});
