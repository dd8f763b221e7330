/**
 * The error table reads as sentences: no advice ends with a doubled stop, and a reason or an
 * error message interpolated with its own period ("denied by the user: Not now.") is not
 * doubled in any code's message ("Not now..", "relax its failure policy.." were printed).
 */
import { describe, expect, it } from "vitest";
import { ERROR_CODES, KeelError } from "../src/index.ts";
import type { ErrorCode } from "../src/index.ts";

const DOUBLED = /[^.]\.\.(\s|$|\))/;

describe("full stops in the error table", () => {
  const codes = Object.keys(ERROR_CODES) as ErrorCode[];

  it("no advice in the table has a doubled stop", () => {
    for (const code of codes) expect(ERROR_CODES[code], code).not.toMatch(DOUBLED);
  });

  it("a reason ending with its own period is not doubled, at the end or inside the problem, for every code", () => {
    const inner = new KeelError("KEEL_PHASE_FAILED", "The plugin threw.", { plugin: "p", phase: "tool.pre_call" });
    for (const code of codes) {
      const denied = new KeelError(code, `The call was denied by the user: ${"Not now."}.`, { tool: "deploy" });
      expect(denied.message, code).toContain("Not now. ");
      expect(denied.message, code).not.toMatch(DOUBLED);
      // A whole KeelError message (ending with the table's advice) inside another's problem.
      const nested = new KeelError(code, `Durable job "x" (k): ${inner.message}. It runs again.`);
      expect(nested.message, code).toContain("relax its failure policy. It runs again.");
      expect(nested.message, code).not.toMatch(DOUBLED);
    }
  });

  it("an ellipsis and `..` in a path are left as written", () => {
    const e = new KeelError("KEEL_TOOL_DENIED", "Wait... the path ../secrets and `cd ..` were refused.");
    expect(e.message).toContain("Wait... the path ../secrets and `cd ..` were refused.");
  });
});
