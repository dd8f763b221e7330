/** The provider response's quick check (model-call.ts plainAssistant) never accepts what MessageSchema rejects. */
import { describe, expect, it } from "vitest";
import { MessageSchema } from "../src/contributions.ts";
import { plainAssistant } from "../src/model-call.ts";

/** Seeded pieces of assistant-like messages, valid and not. */
function candidates(seed: number): unknown[] {
  let s = seed;
  const rand = (k: number) => ((s = (s * 1103515245 + 12345) % 2 ** 31), s % k);
  const strings = ["", "x", "call_1", "get_weather", " "];
  const values: unknown[] = [
    undefined,
    null,
    0,
    1,
    true,
    "s",
    [],
    {},
    ["a"],
    { a: 1 },
    new Date(0),
    Object.create(null),
  ];
  const pick = <T>(xs: readonly T[]): T => xs[rand(xs.length)]!;
  const block = (): unknown => {
    switch (rand(9)) {
      case 0:
        return { type: "text", text: pick([...strings, ...values]) };
      case 1:
        return {
          type: "tool_call",
          id: pick([...strings, ...values]),
          name: pick([...strings, ...values]),
          args: pick(values),
        };
      case 2:
        return { type: "tool_call", id: "c", name: "n" };
      case 3:
        return { type: "thinking", text: "t", redacted: pick(values) };
      case 4:
        return { type: pick(["image", "file", "TEXT", undefined]), text: "t", mediaType: "image/png", data: "" };
      case 5:
        return pick(values);
      case 6:
        return Object.assign(Object.create(null), { type: "text", text: "t" });
      case 7:
        return { type: "text", text: "t", extra: pick(values) };
      default:
        return Object.freeze({ type: "tool_call", id: "c1", name: "t", args: { q: 1 } });
    }
  };
  const out: unknown[] = [];
  for (let i = 0; i < 40; i++) {
    const content = rand(6) === 0 ? pick(values) : Array.from({ length: rand(4) }, block);
    const role = rand(8) === 0 ? pick(["user", "tool", undefined, "Assistant"]) : "assistant";
    out.push(rand(10) === 0 ? pick(values) : { role, content, ...(rand(4) === 0 ? { extra: 1 } : {}) });
  }
  return out;
}

describe("plainAssistant", () => {
  it("accepts only what MessageSchema accepts as an assistant message (and accepts the common shapes)", () => {
    let accepted = 0;
    for (let seed = 1; seed <= 1000; seed++)
      for (const m of candidates(seed)) {
        if (!plainAssistant(m)) continue;
        accepted++;
        expect(MessageSchema.safeParse(m).success, JSON.stringify(m)).toBe(true);
        expect((m as { role: string }).role).toBe("assistant");
      }
    expect(accepted).toBeGreaterThan(30);
    expect(plainAssistant({ role: "assistant", content: [{ type: "text", text: "Done." }] })).toBe(true);
    expect(
      plainAssistant({ role: "assistant", content: [{ type: "tool_call", id: "c1", name: "get_weather", args: {} }] }),
    ).toBe(true);
  });
});
