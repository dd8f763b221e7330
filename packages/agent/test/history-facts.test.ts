import { describe, expect, it } from "vitest";
import { freezeDeep, type Message } from "../../kernel/src/messages.ts";
import { extendPairState, HISTORY_FACTS_MIN, repairToolPairs } from "../../kernel/src/repair.ts";
import { extendWellFormed, wellFormedDeep } from "../../text/src/index.ts";
import { TokenCounter } from "../../tokens/src/index.ts";

/** A seeded random history step: user text, an assistant with 0-3 calls, a result (matching or stray), text with a lone surrogate. */
function randomMessages(seed: number, n: number): Message[] {
  let s = seed;
  const rand = (k: number) => ((s = (s * 1103515245 + 12345) % 2 ** 31), s % k);
  const out: Message[] = [];
  let open: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = rand(10);
    if (r < 3)
      out.push({ role: "user", content: [{ type: "text", text: rand(5) === 0 ? `lone \uD800 ${i}` : `user ${i}` }] });
    else if (r < 6) {
      const calls = Array.from({ length: rand(4) }, (_, k) => `c${i}_${k}`);
      open = calls;
      out.push({
        role: "assistant",
        content: [
          { type: "text", text: `a ${i}` },
          ...calls.map((id) => ({ type: "tool_call" as const, id, name: "t", args: { i } })),
        ],
      });
    } else {
      // Mostly the result of an open call, sometimes a stray one, sometimes a duplicate id.
      const id = open.length && rand(5) ? open.splice(rand(open.length), 1)[0]! : rand(2) ? `stray${i}` : `c${i - 1}_0`;
      out.push({
        role: "tool",
        toolCallId: id,
        toolName: "t",
        content: [{ type: "text", text: `r ${i}` }],
        isError: false,
      });
    }
  }
  return out.map((m) => freezeDeep(m));
}

/** A clean history long enough for facts to be kept (user and assistant turns, no calls). */
const base = (): readonly Message[] =>
  Object.freeze(
    Array.from(
      { length: HISTORY_FACTS_MIN + 2 },
      (_, i): Message =>
        freezeDeep(
          i % 2
            ? { role: "assistant", content: [{ type: "text", text: `a${i}` }] }
            : { role: "user", content: [{ type: "text", text: `u${i}` }] },
        ),
    ),
  );

describe("history facts carried over by appending (no rescans)", () => {
  it("pairing: a history built one message at a time is repaired exactly as a fresh scan repairs a copy of it", () => {
    for (let seed = 1; seed <= 300; seed++) {
      const all = randomMessages(seed, 30);
      let arr = base();
      repairToolPairs(arr); // seeds the state of a history past HISTORY_FACTS_MIN
      for (const m of all) {
        const next = Object.freeze([...arr, m]);
        extendPairState(arr, next, m);
        arr = next;
        const viaFacts = repairToolPairs(arr);
        const fresh = repairToolPairs([...arr]);
        expect(viaFacts.synthesized, `seed ${seed}`).toEqual(fresh.synthesized);
        expect(viaFacts.dropped, `seed ${seed}`).toEqual(fresh.dropped);
        expect(viaFacts.messages === arr, `seed ${seed}`).toBe(
          fresh.messages.length === arr.length && fresh.synthesized.length === 0 && fresh.dropped.length === 0,
        );
      }
    }
  });

  it("well-formed text: an appended message with a lone surrogate still gets repaired in the request", () => {
    let arr = base();
    expect(wellFormedDeep(arr)).toBe(arr);
    for (const m of randomMessages(5, 60)) {
      const next = Object.freeze([...arr, m]);
      extendWellFormed(arr, next, m);
      arr = next;
      const repaired = wellFormedDeep({ messages: arr }).messages;
      expect(JSON.stringify(repaired)).toBe(JSON.stringify(wellFormedDeep({ messages: [...arr] }).messages));
      expect(JSON.stringify(repaired).includes("\\ud800")).toBe(false);
    }
  });

  it("token sums: estimates and exact counts of an appended history equal a fresh count of a copy", () => {
    const c = new TokenCounter();
    const system = "sys";
    let arr = base();
    c.countRequest({ system, messages: arr, tools: [] }, { exactAbove: Number.POSITIVE_INFINITY });
    c.countMessages(arr);
    for (const m of randomMessages(9, 80)) {
      const next = Object.freeze([...arr, m]);
      c.extendCounts(arr, next, m);
      arr = next;
      const est = c.countRequest({ system, messages: arr, tools: [] }, { exactAbove: Number.POSITIVE_INFINITY });
      const freshEst = new TokenCounter().countRequest(
        { system, messages: [...arr], tools: [] },
        { exactAbove: Number.POSITIVE_INFINITY },
      );
      expect(est).toEqual(freshEst);
      const hits = c.stats.cacheHits;
      expect(c.countMessages(arr)).toBe(new TokenCounter().countMessages([...arr]));
      expect(c.stats.cacheHits).toBe(hits + 1); // one hit: the whole array's sum, not one per message
    }
  });
});
