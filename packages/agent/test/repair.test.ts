import { describe, expect, it } from "vitest";
import type { AssistantMessage, Message, ToolResultMessage, UserMessage } from "../src/index.ts";
import { repairToolPairs, textContent, toolCallsOf } from "../src/index.ts";
import { seededRandom } from "../../testkit/src/index.ts";

const user = (text: string): UserMessage => ({ role: "user", content: textContent(text) });
const assistant = (text: string, ...calls: Array<[id: string, name: string]>): AssistantMessage => ({
  role: "assistant",
  content: [
    ...(text ? textContent(text) : []),
    ...calls.map(([id, name]) => ({ type: "tool_call" as const, id, name, args: {} })),
  ],
});
const result = (id: string, name = "t", text = `result of ${id}`): ToolResultMessage => ({
  role: "tool",
  toolCallId: id,
  toolName: name,
  content: textContent(text),
  isError: false,
});

/**
 * The invariant repair guarantees, as a list of violations (empty when the history is safe):
 * every tool call is answered by exactly one result placed after its assistant message and
 * before any non-tool message, and no result lacks its call.
 */
function violations(messages: readonly Message[]): string[] {
  const out: string[] = [];
  let pending = new Set<string>();
  messages.forEach((m, i) => {
    if (m.role === "tool") {
      if (pending.has(m.toolCallId)) pending.delete(m.toolCallId);
      else out.push(`[${i}] result ${m.toolCallId} has no open call`);
      return;
    }
    for (const id of pending) out.push(`[${i}] call ${id} unanswered before a ${m.role} message`);
    pending = new Set(toolCallsOf(m).map((c) => c.id));
  });
  for (const id of pending) out.push(`call ${id} unanswered at the end`);
  return out;
}

describe("repairToolPairs: examples", () => {
  it("returns a clean history as the very same array", () => {
    const history: Message[] = [
      user("hi"),
      assistant("", ["c1", "read"], ["c2", "grep"]),
      result("c2"),
      result("c1"),
      assistant("done"),
      user("more"),
      assistant("ok"),
    ];
    const r = repairToolPairs(history);
    expect(r.messages).toBe(history);
    expect(r.synthesized).toEqual([]);
    expect(r.dropped).toEqual([]);
  });

  it("returns an empty history as the same array", () => {
    const empty: Message[] = [];
    expect(repairToolPairs(empty).messages).toBe(empty);
  });

  it("synthesizes an error result for an unanswered call, right after its assistant message and before the next user message", () => {
    const a = assistant("let me look", ["c1", "read_file"]);
    const u = user("never mind");
    const history: Message[] = [user("hi"), a, u, assistant("ok")];
    const r = repairToolPairs(history);
    expect(r.synthesized).toEqual(["c1"]);
    expect(r.dropped).toEqual([]);
    expect(r.messages).not.toBe(history);
    expect(r.messages).toHaveLength(5);
    expect(r.messages[1]).toBe(a);
    const synth = r.messages[2] as ToolResultMessage;
    expect(synth.role).toBe("tool");
    expect(synth.toolCallId).toBe("c1");
    expect(synth.toolName).toBe("read_file");
    expect(synth.isError).toBe(true);
    expect(synth.content[0]?.type === "text" && synth.content[0].text).toMatch(/interrupted/);
    expect(r.messages[3]).toBe(u);
    expect(violations(r.messages)).toEqual([]);
    // The input is untouched.
    expect(history).toHaveLength(4);
  });

  it("synthesizes only the missing results of a partly answered call list, after the real ones", () => {
    const real = result("c2", "grep");
    const history: Message[] = [
      user("go"),
      assistant("", ["c1", "read"], ["c2", "grep"], ["c3", "ls"]),
      real,
      assistant("next"),
    ];
    const r = repairToolPairs(history);
    expect(r.synthesized).toEqual(["c1", "c3"]);
    expect(r.messages.map((m) => (m.role === "tool" ? `tool:${m.toolCallId}` : m.role))).toEqual([
      "user",
      "assistant",
      "tool:c2",
      "tool:c1",
      "tool:c3",
      "assistant",
    ]);
    expect(r.messages[2]).toBe(real);
  });

  it("synthesizes results for calls left open at the end of the history (interrupted turn)", () => {
    const history: Message[] = [user("go"), assistant("", ["c1", "read"])];
    const r = repairToolPairs(history);
    expect(r.synthesized).toEqual(["c1"]);
    expect(r.messages.at(-1)).toMatchObject({ role: "tool", toolCallId: "c1", isError: true });
    expect(violations(r.messages)).toEqual([]);
  });

  it("drops a result whose call does not exist", () => {
    const history: Message[] = [user("hi"), result("ghost"), assistant("hello")];
    const r = repairToolPairs(history);
    expect(r.dropped).toEqual(["ghost"]);
    expect(r.synthesized).toEqual([]);
    expect(r.messages).toEqual([history[0], history[2]]);
    expect(r.messages[0]).toBe(history[0]);
  });

  it("drops a duplicate result and keeps the first", () => {
    const first = result("c1", "read", "first");
    const history: Message[] = [
      user("go"),
      assistant("", ["c1", "read"]),
      first,
      result("c1", "read", "second"),
      assistant("done"),
    ];
    const r = repairToolPairs(history);
    expect(r.dropped).toEqual(["c1"]);
    expect(r.messages).toHaveLength(4);
    expect(r.messages[2]).toBe(first);
    expect(violations(r.messages)).toEqual([]);
  });

  it("handles a result misplaced after a user message: the call gets a synthesized result in place, the late one is dropped", () => {
    const u = user("wait");
    const history: Message[] = [user("go"), assistant("", ["c1", "read"]), u, result("c1", "read"), assistant("done")];
    const r = repairToolPairs(history);
    expect(r.synthesized).toEqual(["c1"]);
    expect(r.dropped).toEqual(["c1"]);
    expect(r.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "user", "assistant"]);
    expect(r.messages[3]).toBe(u);
    expect(violations(r.messages)).toEqual([]);
  });

  it("drops a result of an earlier round that appears after a later assistant message", () => {
    const history: Message[] = [
      user("go"),
      assistant("", ["c1", "read"]),
      assistant("", ["c2", "grep"]),
      result("c1"),
      result("c2"),
      assistant("done"),
    ];
    const r = repairToolPairs(history);
    expect(r.synthesized).toEqual(["c1"]);
    expect(r.dropped).toEqual(["c1"]);
    expect(violations(r.messages)).toEqual([]);
    expect(r.messages.filter((m) => m.role === "tool").map((m) => (m as ToolResultMessage).toolCallId)).toEqual([
      "c1",
      "c2",
    ]);
  });

  it("repairing a repaired history changes nothing", () => {
    const history: Message[] = [result("x"), user("go"), assistant("", ["c1", "read"]), user("hm")];
    const once = repairToolPairs(history);
    const twice = repairToolPairs(once.messages);
    expect(twice.messages).toBe(once.messages);
    expect(twice.synthesized).toEqual([]);
    expect(twice.dropped).toEqual([]);
  });
});

/**
 * A random history mixing well-formed stretches with every kind of damage: missing,
 * duplicate, orphan, late and reordered results. Call ids are unique within a history.
 */
function randomHistory(rand: () => number): Message[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const out: Message[] = [];
  const allCalls: string[] = [];
  let open: string[] = [];
  let next = 0;
  const steps = Math.floor(rand() * 14);
  for (let s = 0; s < steps; s++) {
    const r = rand();
    if (r < 0.15) {
      out.push(user(`u${s}`));
    } else if (r < 0.4) {
      const n = Math.floor(rand() * 4);
      const calls: Array<[string, string]> = [];
      for (let k = 0; k < n; k++) calls.push([`c${next++}`, pick(["read", "grep", "ls"])]);
      out.push(assistant(rand() < 0.5 ? `a${s}` : "", ...calls));
      allCalls.push(...calls.map(([id]) => id));
      open = calls.map(([id]) => id);
      // Usually answer every call, in a random order, like a healthy turn.
      if (n && rand() < 0.6) {
        const answered = [...open].sort(() => rand() - 0.5);
        for (const id of answered) out.push(result(id));
        open = [];
      }
    } else if (r < 0.75 && open.length) {
      const id = pick(open);
      out.push(result(id));
      if (rand() < 0.8) open = open.filter((x) => x !== id); // else: leave it open so a duplicate can follow
    } else if (r < 0.85 && allCalls.length) {
      out.push(result(pick(allCalls))); // possibly duplicate or late
    } else if (r < 0.92) {
      out.push(result(`ghost${s}`)); // orphan
    } else {
      out.push(user(`late user ${s}`));
    }
  }
  return out;
}

describe("repairToolPairs: property test over 2,000 seeded random histories", () => {
  it("always yields a safe, idempotent repair that only adds synthesized results and drops bad ones", () => {
    const rand = seededRandom(0x6b65656c);
    let clean = 0;
    let repaired = 0;
    let synthesizedTotal = 0;
    let droppedTotal = 0;
    for (let n = 0; n < 2000; n++) {
      const history = randomHistory(rand);
      const snapshot = [...history];
      const r = repairToolPairs(history);
      const ctx = `history #${n}: ${JSON.stringify(
        history.map((m) =>
          m.role === "tool"
            ? `T:${m.toolCallId}`
            : m.role === "assistant"
              ? `A(${toolCallsOf(m)
                  .map((c) => c.id)
                  .join(",")})`
              : "U",
        ),
      )}`;

      // The input array is never modified.
      expect(history, ctx).toEqual(snapshot);
      for (let i = 0; i < history.length; i++) expect(history[i], ctx).toBe(snapshot[i]);

      // Every call has exactly one result, placed after its call and before any non-tool message; no orphans.
      expect(violations(r.messages), ctx).toEqual([]);

      // A history that was already safe comes back as the same array.
      const wasClean = violations(history).length === 0;
      if (wasClean) {
        clean++;
        expect(r.messages, ctx).toBe(history);
      } else {
        repaired++;
        expect(r.messages, ctx).not.toBe(history);
        expect(r.synthesized.length + r.dropped.length, ctx).toBeGreaterThan(0);
      }

      // Non-tool messages are kept, same objects, same order.
      const nonTool = (ms: readonly Message[]) => ms.filter((m) => m.role !== "tool");
      const before = nonTool(history);
      const after = nonTool(r.messages);
      expect(after.length, ctx).toBe(before.length);
      for (let i = 0; i < before.length; i++) expect(after[i], ctx).toBe(before[i]);

      // Results are either originals (same object) or synthesized errors for a known call.
      const originals = new Set<Message>(history);
      const calls = new Map(history.flatMap((m) => toolCallsOf(m).map((c) => [c.id, c.name] as const)));
      let synthesizedSeen = 0;
      for (const m of r.messages) {
        if (m.role !== "tool" || originals.has(m)) continue;
        synthesizedSeen++;
        expect(m.isError, ctx).toBe(true);
        expect(m.toolName, ctx).toBe(calls.get(m.toolCallId));
      }
      expect(synthesizedSeen, ctx).toBe(r.synthesized.length);
      expect(r.messages.length, ctx).toBe(history.length + r.synthesized.length - r.dropped.length);
      synthesizedTotal += r.synthesized.length;
      droppedTotal += r.dropped.length;

      // Idempotent: the second repair returns the same array object.
      const again = repairToolPairs(r.messages);
      expect(again.messages, ctx).toBe(r.messages);
      expect(again.synthesized, ctx).toEqual([]);
      expect(again.dropped, ctx).toEqual([]);
    }
    // The generator exercised both paths and both kinds of repair.
    expect(clean).toBeGreaterThan(100);
    expect(repaired).toBeGreaterThan(100);
    expect(synthesizedTotal).toBeGreaterThan(100);
    expect(droppedTotal).toBeGreaterThan(100);
  });
});
