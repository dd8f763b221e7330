/**
 * `keel worker`'s lines for an outage (issue 43, adversarial pass): the outage line names the
 * Keel code once (the store's message already starts with it), the cause, the last good poll and
 * the next try; the recovery line says how long and how many attempts.
 */
import { describe, expect, it } from "vitest";
import { KeelError } from "@keel/kernel";
import { workerLine } from "../src/worker.ts";

describe("keel worker: outage notices", () => {
  it("the outage line says the code once, the cause, the last good poll and the next try", () => {
    const err = new KeelError(
      "KEEL_STORE_FAILED",
      "Could not list the sessions: the server is not reachable (ECONNREFUSED).",
    );
    const line = workerLine({
      type: "store_unavailable",
      code: err.code,
      message: err.message,
      lastPollAt: Date.UTC(2026, 10, 29, 10, 0, 0),
      backoffMs: 500,
    })!;
    expect(line.match(/KEEL_STORE_FAILED/g)).toHaveLength(1);
    expect(line).toContain("ECONNREFUSED");
    expect(line).toContain("last successful poll 2026-11-29T10:00:00.000Z");
    expect(line).toContain("next in 500 ms");
    // A message that does not start with its code is prefixed by it.
    expect(
      workerLine({ type: "store_unavailable", code: "KEEL_STORE_FAILED", message: "refused", backoffMs: 1 }),
    ).toMatch(/^store unavailable: KEEL_STORE_FAILED: refused /);
    expect(workerLine({ type: "store_recovered", downMs: 12_000, failures: 7 })).toBe(
      "store back after 12000 ms (7 failed attempts); going on",
    );
  });
});
