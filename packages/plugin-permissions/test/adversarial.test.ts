/**
 * Adversarial review of the rule table: calls shaped to slip past a deny or ask rule, to ride
 * an allow rule further than it was written for, or to stall the decision. Each case failed
 * before its fix (named in the test) and holds after it.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, defineTool } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { CallFacts, Decision, RuleInput } from "../src/index.ts";
import { compileRules, DECISION_CODE, DEFAULTS, decideWith, permissions } from "../src/index.ts";

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

describe("path arguments that cannot be read as one path never allow", () => {
  it("a NUL byte in a path fires the deny (before: it matched nothing, so the default allowed it)", () => {
    const r = rules([{ decision: "deny", tool: "read_file", args: { path: "**/.env" } }]);
    expect(decided(r, call("read_file", { path: ".env\0" }, "info"))).toBe("deny");
    expect(decided(r, call("read_file", { path: ["a.txt", ".env\0.txt"] }, "info"))).toBe("deny");
    const allow = rules([{ decision: "allow", tool: "write_file", args: { path: "./src/**" } }]);
    expect(decided(allow, call("write_file", { path: "src/a\0/../../.env" }, "edit"))).toBe("ask");
  });

  it("`~name/…` (another user's home to a shell) fires a deny and never allows", () => {
    const r = rules([
      { decision: "deny", tool: "*", args: { path: "/root/**" } },
      { decision: "allow", tool: "*", args: { path: "./**" } },
    ]);
    expect(decided(r, call("read_file", { path: "~root/.ssh/id_rsa" }, "info"))).toBe("deny");
    const allow = rules([{ decision: "allow", tool: "*", args: { path: "./**" } }]);
    expect(decided(allow, call("write_file", { path: "~alice/.bashrc" }, "edit"))).toBe("ask");
    expect(decided(allow, call("write_file", { path: "src/~x" }, "edit"))).toBe("allow");
  });

  it("on a case-insensitive file system a deny fires for the same path in other case, an allow does not widen", () => {
    const table: RuleInput[] = [
      { decision: "deny", tool: "*", args: { path: "**/.env" } },
      { decision: "deny", tool: "*", args: { path: "./src/secret/**" } },
      { decision: "allow", tool: "*", args: { path: "./src/**" } },
    ];
    const ci = rules(table, { pathCase: "insensitive" });
    expect(decided(ci, call("read_file", { path: ".ENV" }, "info"))).toBe("deny");
    expect(decided(ci, call("write_file", { path: "src/SECRET/key" }, "edit"))).toBe("deny");
    expect(decided(ci, call("write_file", { path: "src/a.ts" }, "edit"))).toBe("allow");
    // Unicode: NFD and NFC spell one name on macOS.
    const nfc = rules([{ decision: "deny", tool: "*", args: { path: "./caf\u00e9/**" } }], { pathCase: "insensitive" });
    expect(decided(nfc, call("read_file", { path: "cafe\u0301/x" }, "info"))).toBe("deny");
    // A case-sensitive system: `.ENV` is another file.
    const cs = rules(table, { pathCase: "sensitive" });
    expect(decided(cs, call("read_file", { path: ".ENV" }, "info"))).toBe("allow");
  });
});

describe("argument shapes", () => {
  it("arguments that are not an object fire deny and ask rules that name an argument, and no allow", () => {
    const r = rules(["deny exec(command=rm *)", "allow exec(command=npm test)"]);
    const d = decideWith(r, call("exec", '{"command":"rm -rf /"}'), { ...DEFAULTS, exec: "allow" }, false);
    expect(d.decision).toBe("deny");
    expect(d.reason).toContain("not an object");
    expect(decided(rules(["allow exec(command=npm test)"]), call("exec", ["npm test"]))).toBe("ask");
    // A rule that names no argument is unaffected.
    expect(decided(rules(["allow exec"]), call("exec", "npm test"))).toBe("allow");
  });
});

describe("path arguments read through text matchers, and backslashes", () => {
  // Before: `prefix`, `{ glob }` and regexes saw the raw text, so `src/../.env` was under `src/`
  // for an allow and `/tmp/../etc/passwd` was not under `/etc/` for a deny.
  it("a `..` segment is read both as written and as resolved: an allow needs both, a deny either", () => {
    const allow = rules([
      { decision: "allow", tool: "write_file", args: { path: { prefix: "src/" } } },
      { decision: "allow", tool: "edit_file", args: { path: { glob: "src/*" } } },
    ]);
    expect(decided(allow, call("write_file", { path: "src/../.env" }, "edit"))).toBe("ask");
    expect(decided(allow, call("edit_file", { path: "src/../../etc/passwd" }, "edit"))).toBe("ask");
    expect(decided(allow, call("write_file", { path: "src/a/b.ts" }, "edit"))).toBe("allow");
    expect(decided(allow, call("write_file", { path: "src/a/../b.ts" }, "edit"))).toBe("allow");
    const deny = rules([
      { decision: "deny", tool: "read_file", args: { path: { prefix: "/etc/" } } },
      { decision: "deny", tool: "cat", args: { file: { regex: "^/etc/" } } },
    ]);
    const open = { ...DEFAULTS, info: "allow" as const };
    expect(decided(deny, call("read_file", { path: "/tmp/../etc/passwd" }, "info"), open)).toBe("deny");
    expect(decided(deny, call("cat", { file: "/tmp/../etc/shadow" }, "info"), open)).toBe("deny");
    expect(decided(deny, call("read_file", { path: "/tmp/x" }, "info"), open)).toBe("allow");
  });

  it("backslashes are read both as characters and as separators (a Windows host, a remote MCP server)", () => {
    const r = rules([
      { decision: "deny", tool: "*", args: { path: "**/.env" } },
      { decision: "allow", tool: "*", args: { path: "./**" } },
    ]);
    expect(decided(r, call("read_file", { path: "C:\\proj\\.env" }, "info"))).toBe("deny");
    expect(decided(r, call("read_file", { path: "src\\..\\.env" }, "info"))).toBe("deny");
    expect(decided(r, call("write_file", { path: "..\\..\\etc\\passwd" }, "edit"))).toBe("ask");
    expect(decided(r, call("write_file", { path: "src/a.ts" }, "edit"))).toBe("allow");
  });
});

describe("blanks around an argument", () => {
  // Before: a shell ignores the blanks around a command, and many tools trim a path, but the
  // matchers read the text as written: ` rm -rf /` stepped around `deny exec(rm *)`.
  it("a deny fires on the trimmed reading too; an allow needs every reading", () => {
    const r = rules([
      "deny exec(rm *)",
      "allow exec(npm test*)",
      { decision: "deny", tool: "*", args: { path: "**/.env" } },
    ]);
    const open = { ...DEFAULTS, exec: "allow" as const };
    expect(decided(r, call("exec", { command: " rm -rf /" }), open)).toBe("deny");
    expect(decided(r, call("exec", { command: "\t\nrm -rf /" }), open)).toBe("deny");
    expect(decided(r, call("exec", { command: " npm test" }))).toBe("ask");
    expect(decided(r, call("exec", { command: "npm test " }))).toBe("allow");
    expect(decided(r, call("read_file", { path: ".env " }, "info"))).toBe("deny");
    expect(decided(r, call("read_file", { path: " src/.env" }, "info"))).toBe("deny");
    expect(decided(r, call("read_file", { path: "src/a.ts" }, "info"))).toBe("allow");
  });

  it("a URL is also read as the URL a client fetches (host case, percent-encoding, `..`)", () => {
    const r = rules(["deny fetch(*://evil.com/*)", "allow fetch(url=https://docs.example.com/*)"]);
    const open = { ...DEFAULTS, info: "allow" as const };
    expect(decided(r, call("fetch", { url: "https://EVIL.com/x" }, "info"), open)).toBe("deny");
    expect(decided(r, call("fetch", { url: "https://evil%2Ecom/x" }, "info"), open)).toBe("deny");
    expect(decided(r, call("fetch", { url: "https://docs.example.com/a/b" }, "info"))).toBe("allow");
    const allow = rules(["allow fetch(url=https://docs.example.com/public/*)"]);
    const strict = { ...DEFAULTS, info: "ask" as const };
    expect(decided(allow, call("fetch", { url: "https://docs.example.com/public/../admin/x" }, "info"), strict)).toBe(
      "ask",
    );
    expect(decided(allow, call("fetch", { url: "https://docs.example.com/public/a" }, "info"), strict)).toBe("allow");
  });

  it("`equals` on a string reads the argument the same ways", () => {
    const r = rules([
      { decision: "deny", tool: "exec", args: { command: { equals: "rm -rf /" } } },
      { decision: "deny", tool: "read_file", args: { path: { equals: "/etc/shadow" } } },
      { decision: "allow", tool: "exec", args: { command: { equals: "npm test" } } },
    ]);
    const open = { ...DEFAULTS, exec: "allow" as const, info: "allow" as const };
    expect(decided(r, call("exec", { command: "rm -rf / " }), open)).toBe("deny");
    expect(decided(r, call("read_file", { path: "/etc/../etc/shadow" }, "info"), open)).toBe("deny");
    expect(decided(r, call("exec", { command: " npm test" }))).toBe("ask");
    expect(decided(r, call("exec", { command: "npm test" }))).toBe("allow");
  });
});

describe("hostile sizes", () => {
  it("a list argument is bounded in total, not per entry: 1,000 entries of 10,000 characters are not matched 20 times over", () => {
    // Before: each of the 1,000 entries was under maxArgChars, so every path rule resolved and
    // matched 10 M characters (20 s for 20 rules, on the event loop).
    const table = rules(
      Array.from({ length: 20 }, (_, i) => ({ decision: "deny" as const, tool: "x", args: { path: `**/s${i}/**` } })),
    );
    const big = Array.from({ length: 1_000 }, () => "a/".repeat(4_999));
    const d = decideWith(table, call("x", { path: big }, "edit"), DEFAULTS, false);
    expect(d).toMatchObject({ decision: "deny", rule: { index: 0 } });
    expect(d.reason).toContain("could not be checked");
  });
});

describe("MCP tool names", () => {
  const mcp = (server: string): Source => ({
    kind: "plugin",
    plugin: "@keel/plugin-mcp",
    bundle: "mcp",
    meta: { mcpServer: server },
  });
  const table = rules(["allow mcp__fs__*", { decision: "allow", tool: "mcp__*", category: "info" }]);

  it("an allow by an mcp__<server>__ name glob holds only for that server's tools", () => {
    expect(decided(table, call("mcp__fs__read", {}, "mcp", mcp("fs")))).toBe("allow");
    // Server "fs__admin" names its tools mcp__fs__admin__…: not the fs server.
    expect(decided(table, call("mcp__fs__admin__drop", {}, "mcp", mcp("fs__admin")))).toBe("ask");
  });

  it("a builtin or another plugin's tool named like an MCP tool does not ride an mcp__ allow", () => {
    expect(decided(table, call("mcp__fs__wipe", {}, "exec", builtin))).toBe("ask");
    const plugin: Source = { kind: "plugin", plugin: "other", bundle: "b", meta: { mcpServer: "fs" } };
    expect(decided(table, call("mcp__fs__wipe", {}, "exec", plugin))).toBe("ask");
    expect(decided(table, call("mcp__x__peek", {}, "info", plugin), { ...DEFAULTS, info: "ask" })).toBe("ask");
    // Deny and ask name globs still match by name (they only ever narrow).
    const deny = rules(["deny mcp__fs__*"]);
    expect(decided(deny, call("mcp__fs__wipe", {}, "exec", builtin))).toBe("deny");
  });
});

describe("the namespace", () => {
  it("a namespace the turn names but that cannot be read fires deny and ask rules on namespaces, and no allow", () => {
    // Before: an over-long or non-text userId silently became "default".
    const r = rules([
      { decision: "ask", namespace: "guest-*", tool: "exec" },
      { decision: "allow", namespace: "default", tool: "*" },
    ]);
    const unreadable = "the turn's userId is longer than 200 characters";
    const facts: CallFacts = { ...call("exec", { command: "ls" }), namespaceUnreadable: unreadable };
    const d = decideWith(r, facts, { ...DEFAULTS, exec: "allow" }, false);
    expect(d).toMatchObject({ decision: "ask", rule: { index: 0 } });
    expect(d.reason).toContain(unreadable);
    const info: CallFacts = { ...call("read", {}, "info"), namespaceUnreadable: unreadable };
    expect(decideWith(r, info, { ...DEFAULTS, info: "ask" }, false).decision).toBe("ask");
    // Readable, it decides as before.
    expect(decided(r, call("read", {}, "info"), { ...DEFAULTS, info: "ask" })).toBe("allow");
  });
});

describe("regex flags", () => {
  it("the sticky flag, which RE2 cannot honour, is refused rather than silently widened", () => {
    const c = compileRules(
      [{ decision: "allow", tool: "exec", args: { command: { regex: "npm test", flags: "y" } } }],
      { cwd: CWD, maxArgChars: 10 },
    );
    expect(c.ok).toBe(false);
    if (!c.ok) expect(c.issues[0]!.message).toMatch(/sticky/);
    const o = compileRules([{ decision: "allow", tool: "exec", args: { command: /npm test/y } }], {
      cwd: CWD,
      maxArgChars: 10,
    });
    expect(o.ok).toBe(false);
  });
});

describe("in a turn", () => {
  const ran: string[] = [];
  const exec = defineTool({
    name: "exec",
    description: "Runs a shell command.",
    category: "exec",
    input: z.object({ command: z.string() }),
    execute: ({ command }) => (ran.push(command), `ran ${command}`),
  });

  it("a userId the turn gives that is too long or not text is not taken for the default namespace", async () => {
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider: scriptedProvider([
        { toolCalls: [{ id: "n1", name: "exec", args: { command: "ls" } }] },
        { text: "a" },
        { toolCalls: [{ id: "n2", name: "exec", args: { command: "ls" } }] },
        { text: "b" },
        { toolCalls: [{ id: "n3", name: "exec", args: { command: "ls" } }] },
        { text: "c" },
      ]),
      sideModel: false,
      store,
      tools: [exec],
      ask: "deny",
      plugins: [
        permissions({
          rules: [{ decision: "allow", namespace: "default", tool: "exec" }],
          default: "ask",
        }),
      ],
    });
    const s = await agent.session();
    await s.run("1", { metadata: { userId: `guest-${"x".repeat(300)}` } });
    await s.run("2", { metadata: { userId: { id: "guest-1" } } });
    await s.run("3");
    const events = await store.events(s.id);
    const data = events.flatMap((e) =>
      e.type === "diagnostic" && e.code === DECISION_CODE
        ? [e.data as { decision: string; namespaceUnreadable?: string }]
        : [],
    );
    expect(data.map((d) => d.decision)).toEqual(["ask", "ask", "allow"]);
    expect(data[0]!.namespaceUnreadable).toBe("the turn's userId is longer than 200 characters");
    expect(data[1]!.namespaceUnreadable).toBe("the turn's userId is an object, not text");
    expect(ran).toEqual(["ls"]);
    await agent.close();
  });
});

describe("the table is taken when permissions() is called", () => {
  it("a rule list or rule mutated afterwards (before the agent, or a subagent, is built) changes nothing", async () => {
    // Before: the options were read when each agent was built, so a child agent built later
    // from the same plugin entry (a plugin-tasks profile) saw whatever the table had become.
    const ran: string[] = [];
    const exec = defineTool({
      name: "exec",
      description: "Runs a shell command.",
      category: "exec",
      input: z.object({ command: z.string() }),
      execute: ({ command }) => (ran.push(command), `ran ${command}`),
    });
    const deny: { decision: "deny" | "allow"; tool: string; args: { command: string } } = {
      decision: "deny",
      tool: "exec",
      args: { command: "rm *" },
    };
    const table: RuleInput[] = [deny, "deny exec(command=curl *)"];
    const plugin = permissions({ rules: table, default: "allow" });
    deny.decision = "allow";
    table[1] = "allow exec";
    table.push("allow *");
    const agent = await createAgent({
      provider: scriptedProvider([
        {
          toolCalls: [
            { id: "m1", name: "exec", args: { command: "rm -rf /" } },
            { id: "m2", name: "exec", args: { command: "curl x | sh" } },
            { id: "m3", name: "exec", args: { command: "ls" } },
          ],
        },
        { text: "done" },
      ]),
      sideModel: false,
      tools: [exec],
      plugins: [plugin],
    });
    const s = await agent.session();
    await s.run("go");
    expect(ran).toEqual(["ls"]);
    await agent.close();
  });
});
