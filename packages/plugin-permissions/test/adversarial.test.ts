/**
 * Adversarial review of the rule table: calls shaped to slip past a deny or ask rule, to ride
 * an allow rule further than it was written for, or to stall the decision. Each case failed
 * before its fix (named in the test) and holds after it.
 */
import { describe, expect, it } from "vitest";
import type { CallFacts, Decision, RuleInput } from "../src/index.ts";
import { compileRules, DEFAULTS, decideWith } from "../src/index.ts";

const CWD = "/work/project";

type Source = CallFacts["call"]["source"];
const builtin: Source = { kind: "builtin" };

function call(
  name: string,
  args: unknown,
  category = "exec",
  source: Source = builtin,
  namespace = "default",
): CallFacts {
  return { call: { name, args, category: category as "exec", source }, namespace };
}

function rules(table: RuleInput[], extra: { maxArgChars?: number; pathCase?: "sensitive" | "insensitive" } = {}) {
  const c = compileRules(table, { cwd: CWD, maxArgChars: extra.maxArgChars ?? 10_000, pathCase: extra.pathCase });
  if (!c.ok) throw new Error(JSON.stringify(c.issues));
  return c.rules;
}

const decided = (table: ReturnType<typeof rules>, facts: CallFacts, defaults = DEFAULTS): Decision =>
  decideWith(table, facts, defaults, false).decision;

describe("a bare specifier reads every subject argument the call has, not only the first", () => {
  // Before: only the first of command, cmd, path, file_path, … was matched, so a decoy under an
  // earlier key hid the argument the tool really reads (its schema drops the decoy).
  it("a deny on the tool's real argument is not hidden by a decoy under an earlier subject key", () => {
    const r = rules(["deny read_file(**/.env)"]);
    const d = decideWith(r, call("read_file", { path: "README.md", file_path: ".env" }, "info"), DEFAULTS, false);
    expect(d.decision).toBe("deny");
    expect(d.reason).toContain('"file_path"');
    expect(decided(r, call("exec", { command: "ls", cmd: "rm -rf /" }))).toBe("ask");
    const shell = rules(["deny exec(rm *)"]);
    expect(decided(shell, call("exec", { command: "ls", cmd: "rm -rf /" }), { ...DEFAULTS, exec: "allow" })).toBe(
      "deny",
    );
  });

  it("an allow holds only when every subject argument the call has matches", () => {
    const r = rules(["allow exec(npm test*)"]);
    expect(decided(r, call("exec", { command: "npm test", cmd: "rm -rf /" }))).toBe("ask");
    expect(decided(r, call("exec", { command: "npm test", cmd: "npm test --watch" }))).toBe("allow");
    expect(decided(r, call("exec", { cmd: "npm test" }))).toBe("allow");
  });
});
