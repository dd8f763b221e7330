import { createAgent, KeelError } from "@keel/agent";
import { scriptedProvider } from "@keel/testkit";
import { describe, expect, it } from "vitest";
import type { RuleInput } from "../src/index.ts";
import { compileRules, permissions } from "../src/index.ts";

const settings = { cwd: "/p", maxArgChars: 10_000 };

/** [rule, where the issue is, what the message says]. */
const BAD: Array<[unknown, string, RegExp]> = [
  ["permit exec", "rules.0", /unknown decision "permit"/],
  ["allow", "rules.0", /expected "<allow\|ask\|deny> <tool glob>"/],
  ["allow exec(command=a\\)", "rules.0", /\(args\.command\): .*lone `\\`/],
  ["allow exec(a***b)", "rules.0", /\(specifier\): `\*\*\*` is not a glob/],
  ["allow ex/ec", "rules.0", /can never match/],
  [{ decision: "maybe", tool: "x" }, "rules.0.decision", /expected allow, ask or deny, found "maybe"/],
  [{ decision: "deny", tool: "x", args: { q: { regex: "(?=a)" } } }, "rules.0.args.q", /regex does not compile/],
  [{ decision: "deny", tool: "x", args: { q: { regex: "(" } } }, "rules.0.args.q", /regex does not compile/],
  [{ decision: "deny", tool: "x", args: { q: { like: "a" } } }, "rules.0.args.q", /found keys \["like"\]/],
  [{ decision: "deny", tool: ["x", 3] }, "rules.0.tool.1", /expected a glob string/],
  [{ decision: "deny", category: "shell" }, "rules.0.category", /expected one of exec, mcp, info, edit/],
  [{ decision: "deny", source: ["mcp", "npm"] }, "rules.0.source.1", /builtin, plugin, mcp/],
  [{ decision: "deny", tools: "x" }, "rules.0.tools", /unknown field/],
  [{ decision: "deny", tool: [] }, "rules.0.tool", /empty list/],
  [42, "rules.0", /found number/],
  [{ decision: "deny", tool: "x", args: { q: { regex: "a".repeat(1_001) } } }, "rules.0.args.q", /longer than 1000/],
  [{ decision: "deny", tool: "x", args: { q: { prefix: "" } } }, "rules.0.args.q", /`prefix` is empty/],
];

describe("a malformed rule is a located issue", () => {
  for (const [rule, path, message] of BAD)
    it(`${JSON.stringify(rule)} → ${path}`, () => {
      const r = compileRules(["allow ok", rule], settings);
      expect(r.ok).toBe(false);
      if (r.ok) return;
      expect(r.issues).toHaveLength(1);
      expect(r.issues[0]!.path.join(".")).toBe(path.replace("rules.0", "rules.1"));
      expect(r.issues[0]!.message).toMatch(message);
      expect(r.issues[0]!.message.startsWith("rules[1]")).toBe(true);
    });

  it("every malformed rule is listed, and the table stays as written", () => {
    const r = compileRules(["nope x", "allow ok", { decision: "ask", args: 3 }], settings);
    expect(r.ok ? [] : r.issues.map((i) => i.path.join("."))).toEqual(["rules.0", "rules.2.args"]);
  });
});

describe("the table is checked when the agent is created", () => {
  it("KEEL_PLUGIN_OPTIONS_INVALID at plugins[i].options.rules.<n>.<field>, before any model call", async () => {
    const provider = scriptedProvider([{ text: "never" }]);
    const err = await createAgent({
      provider,
      plugins: [
        permissions({
          rules: ["allow read_*", { decision: "deny", tool: "exec", args: { command: { regex: "a(" } } }],
        }),
      ],
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KeelError);
    expect((err as KeelError).code).toBe("KEEL_PLUGIN_OPTIONS_INVALID");
    expect((err as KeelError).message).toContain("plugins[0].options.rules.1.args.command");
    expect((err as KeelError).message).toContain("rules[1]: the regex does not compile");
    expect((err as KeelError).message).toContain("@keel/plugin-permissions");
  });

  it("a rule table whose getter throws is an options error, not a crash", async () => {
    const rules: RuleInput[] = [
      "allow ok",
      Object.defineProperty({}, "decision", {
        enumerable: true,
        get() {
          throw new Error("boom");
        },
      }) as RuleInput,
    ];
    const err = await createAgent({
      provider: scriptedProvider([]),
      plugins: [permissions({ rules })],
    }).catch((e: unknown) => e);
    expect((err as KeelError).code).toBe("KEEL_PLUGIN_OPTIONS_INVALID");
    expect((err as KeelError).message).toMatch(/boom/);
  });

  it("an unknown option or a bad default is located too", async () => {
    const err = await createAgent({
      provider: scriptedProvider([]),
      plugins: [permissions({ default: "maybe" as "ask" })],
    }).catch((e: unknown) => e);
    expect((err as KeelError).message).toContain("plugins[0].options.default");
  });
});
