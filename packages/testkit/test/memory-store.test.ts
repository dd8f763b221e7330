/** The in-memory store's append: a repeated seq is refused whatever order the seqs came in; the turn state follows the log. */
import { describe, expect, it } from "vitest";
import type { KeelEvent } from "@keel/kernel";
import { MemorySessionStore } from "../src/index.ts";

const ev = (seq: number, type = "diagnostic", extra: object = {}): KeelEvent =>
  ({ type, sessionId: "s", seq, ts: seq, turnId: null, level: "info", code: "X", message: "m", ...extra }) as KeelEvent;

describe("MemorySessionStore.append", () => {
  it("refuses a seq it holds, in order or not, and keeps the events in seq order", () => {
    const store = new MemorySessionStore();
    store.createSession({ id: "s", agent: "a", createdAt: 0 });
    store.appendMany([ev(1), ev(2), ev(5)]);
    expect(() => store.append(ev(2))).toThrow(/already has an event with seq 2/);
    expect(() => store.append(ev(5))).toThrow(/already has an event with seq 5/);
    store.append(ev(3));
    expect(() => store.append(ev(3))).toThrow(/already has an event with seq 3/);
    store.append(ev(7));
    expect(() => store.append(ev(7))).toThrow(/already has an event with seq 7/);
    store.append(ev(4));
    expect(store.events("s").map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 7]);
    expect(store.getSession("s")?.eventCount).toBe(6);
  });

  it("follows the turn state: running, paused, answered by the host, idle", () => {
    const store = new MemorySessionStore();
    store.createSession({ id: "s", agent: "a", createdAt: 0 });
    const state = () => store.unfinished().find((u) => u.sessionId === "s")?.state;
    store.append(ev(1, "turn.started", { input: "hi", metadata: {} }));
    expect(state()).toBe("running");
    store.append(ev(2, "turn.paused"));
    expect(state()).toBeUndefined();
    store.append(ev(3, "approval.resolved", { by: "host" }));
    expect(state()).toBe("answered");
    store.append(ev(4, "turn.completed"));
    expect(state()).toBeUndefined();
  });
});
