/**
 * The host's scenarios off Node (host-entry.ts) and what each must return, shared by the
 * workerd and Chromium tests: `run(name)` gives a scenario's JSON outcome in that runtime.
 */
import { fileURLToPath } from "node:url";
import { expect } from "vitest";

/** The entry the host tests bundle (needs @keel/agent). */
export const HOST_ENTRY = fileURLToPath(new URL("../host-entry.ts", import.meta.url));

export interface HostScenario {
  name: string;
  title: string;
  check(outcome: unknown): void;
}

export const HOST_SCENARIOS: HostScenario[] = [
  {
    name: "storage",
    title: "createAgent with no store keeps the log in memory, and plugins are told there is no home",
    check: (outcome) =>
      expect(outcome).toEqual({
        ok: { told: { home: "", database: { kind: "sqlite" } }, store: "MemorySessionStore", text: "ok" },
      }),
  },
  {
    name: "child",
    title: "a tool's child session runs a turn on the parent's model and its answer reaches the parent",
    check(outcome) {
      expect(outcome).toMatchObject({ ok: { verdict: "completed", text: "all done" } });
      const ok = (outcome as { ok: { results: string[]; events: string[] } }).ok;
      expect(ok.results).toEqual(["the helper said: found it"]);
      expect(ok.events).toContain("child.started");
    },
  },
  {
    name: "approval",
    title: "an approval pauses the turn; approve and resume run the tool once",
    check: (outcome) =>
      expect(outcome).toEqual({
        ok: {
          paused: { status: "paused", reason: "approval", pending: ["w1"] },
          resumed: "completed",
          text: "noted",
          results: ["wrote a"],
        },
      }),
  },
  {
    name: "job",
    title: "a durable job runs once after the turn and reads its turn from the log",
    check: (outcome) =>
      expect(outcome).toEqual({
        ok: { seen: [{ ok: 1 }, "remember the blue door"], jobs: ["job.pending", "job.started", "job.completed"] },
      }),
  },
  {
    name: "steering",
    title: "steering sent while a tool runs skips the call not yet started",
    check(outcome) {
      expect(outcome).toMatchObject({ ok: { verdict: "completed", text: "did the other thing", queued: 1 } });
      const ok = (outcome as { ok: { results: string[] } }).ok;
      expect(ok.results).toEqual(["stepped", "Skipped due to queued user message."]);
    },
  },
  {
    name: "sqlite",
    title: 'store: "sqlite" is refused with a KeelError that says to pass a store',
    check(outcome) {
      expect(outcome).toMatchObject({ ok: { refused: { name: "KeelError", code: "KEEL_AGENT_OPTIONS_INVALID" } } });
      expect((outcome as { ok: { refused: { message: string } } }).ok.refused.message).toContain("MemorySessionStore");
    },
  },
];
