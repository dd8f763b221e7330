/** What the agent of test/runtime/agent-entry.ts must have done, wherever its turn ran. */
import { fileURLToPath } from "node:url";
import { expect } from "vitest";

/** The entry the runtime tests bundle: the smallest whole agent (needs @keel/agent). */
export const AGENT_ENTRY = fileURLToPath(new URL("../agent-entry.ts", import.meta.url));

export function expectFullToolTurn(outcome: unknown): void {
  expect(outcome).toMatchObject({
    verdict: "completed",
    toolRan: true,
    systemHadSection: true,
    // The tool's result (6 × 7) reached round 2, whose model saw the plugin's section.
    text: "6 × 7 = 42. The house rules were in my prompt.",
  });
  const events = (outcome as { events: string[] }).events;
  // Two rounds, the tool between them, in the session's log.
  expect(events.filter((e) => e === "model.responded")).toHaveLength(2);
  expect(events.indexOf("tool.completed")).toBeGreaterThan(events.indexOf("tool.started"));
  expect(events.indexOf("tool.started")).toBeGreaterThan(-1);
  expect(events.at(-1)).toBe("turn.completed");
}
