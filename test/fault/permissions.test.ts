/**
 * Class 18, permission rules (@keel/plugin-permissions), through the real `keel` binary against
 * the wire server: a config with a rule table runs a turn where the allowed call runs and the
 * denied one is refused naming its rule (stderr, what the model read, the stored log); a deny
 * is not lifted by an allow later in the table nor by another plugin's allow; arguments an
 * earlier plugin rewrote are matched as rewritten; a broken table fails at load, located, with
 * no request and no session; a hostile 2 MB argument against catastrophic patterns does not
 * hang the decision.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RecordedRequest, WireReply, WireServer } from "../../packages/wire-server/src/index.ts";
import { lastUserText, startWireServer } from "../../packages/wire-server/src/index.ts";
import { defaultSessionDbPath } from "../../packages/store-sqlite/src/index.ts";
import { killAll, project, REPO, runKeel, sessionIdOf, storedEvents, tempRoot, wireEnv } from "./support/storage.ts";

const PLUGIN = pathToFileURL(join(REPO, "packages", "plugin-permissions", "src", "index.ts")).href;

/** The model's calls per scenario: the user's text names one; the answer echoes every tool result it read. */
const CALLS: Record<string, Array<{ name: string; args: unknown }>> = {
  basic: [
    { name: "exec", args: { command: "npm test -- --run" } },
    { name: "exec", args: { command: "rm -rf build" } },
  ],
  override: [{ name: "exec", args: { command: "rm -rf /" } }],
  rewrite: [
    { name: "exec", args: { command: "npm test" } },
    { name: "exec", args: { command: "clean: rm -rf dist" } },
  ],
  hostile: [{ name: "exec", args: { command: `${"a".repeat(300_000)}!` } }],
  // The model leaves out `env`: the schema (zod) or the JSON Schema `default` makes it production.
  defaults: [
    { name: "deploy", args: { service: "api" } },
    { name: "deploy_json", args: { service: "web" } },
    { name: "deploy", args: { service: "db", env: "staging" } },
  ],
  // A rewriter drops `env` from a staging deploy (the default makes it production again) and breaks another.
  defaultsRewrite: [
    { name: "deploy", args: { service: "api", env: "staging" } },
    { name: "deploy", args: { service: "broken", env: "staging" } },
  ],
};

function reply(request: RecordedRequest): WireReply {
  const scenario = /scenario:(\w+)/.exec(lastUserText(request))?.[1] ?? "basic";
  const msgs = (request.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
  const results = msgs
    .flatMap((m) => (Array.isArray(m.content) ? (m.content as Array<{ type: string; content?: unknown }>) : []))
    .filter((b) => b.type === "tool_result");
  if (!results.length)
    return {
      toolCalls: (CALLS[scenario] ?? []).map((c, i) => ({ id: `toolu_${scenario}_${i}`, ...c })),
      api: "anthropic",
    };
  const text = results.map((r) => JSON.stringify(r.content).slice(0, 600)).join("\n");
  return { text: `RESULTS\n${text}`, chunks: 1, api: "anthropic" };
}

let server: WireServer;
const root = tempRoot("keel-fault-perms-");
beforeAll(async () => {
  server = await startWireServer({ onEmpty: reply });
});
afterEach(killAll);
afterAll(async () => {
  await killAll();
  await server?.close();
});

/** A config: an `exec` tool that appends each command it runs to `ran.log`, the plugins given. */
function config(plugins: string, preamble = ""): string {
  return `import { appendFileSync } from "node:fs";
import permissions from ${JSON.stringify(PLUGIN)};
${preamble}
export default {
  name: "perms",
  model: "anthropic:claude-sonnet-4-6",
  tools: [{
    name: "exec",
    description: "Runs a shell command.",
    parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    category: "exec",
    execute: (args) => { appendFileSync(new URL("./ran.log", import.meta.url), args.command.slice(0, 100) + "\\n"); return "ran " + args.command.slice(0, 100); },
  }],
  plugins: [${plugins}],
};
`;
}

const ZOD = pathToFileURL(join(REPO, "node_modules", "zod", "index.js")).href;

/** A config with a `deploy` tool whose `env` defaults to production in its zod schema, and `deploy_json`, the same as plain JSON Schema (an MCP tool's kind). */
function deployConfig(plugins: string, preamble = ""): string {
  return `import { appendFileSync } from "node:fs";
import { z } from ${JSON.stringify(ZOD)};
import permissions from ${JSON.stringify(PLUGIN)};
${preamble}
const log = (line) => appendFileSync(new URL("./ran.log", import.meta.url), line + "\\n");
export default {
  name: "perms",
  model: "anthropic:claude-sonnet-4-6",
  tools: [{
    name: "deploy",
    description: "Deploys a service.",
    input: z.object({ service: z.string(), env: z.enum(["staging", "production"]).default("production") }),
    execute: (args) => { log("deploy " + args.service + " " + args.env); return "deployed " + args.service + " to " + args.env; },
  }, {
    name: "deploy_json",
    description: "Deploys a service.",
    parameters: { type: "object", properties: { service: { type: "string" }, env: { type: "string", default: "production" } }, required: ["service"] },
    execute: (args) => { log("deploy_json " + args.service + " " + args.env); return "deployed " + args.service + " to " + args.env; },
  }],
  plugins: [${plugins}],
};
`;
}

const RULES = `["allow exec(npm test*)", { id: "no-rm", decision: "deny", tool: "exec", args: { command: { regex: "(^|\\\\s)rm\\\\s" } }, reason: "nothing is deleted" }, "allow exec"]`;

const ran = (dir: string) => (existsSync(join(dir, "ran.log")) ? readFileSync(join(dir, "ran.log"), "utf8") : "");

type Decided = { callId: string; decision: string; rule: { index: number; id?: string } | null };
const decided = (home: string, id: string): Decided[] =>
  storedEvents(home, id).flatMap((e) =>
    e.type === "diagnostic" && e.code === "permissions.decision" ? [e.data as Decided] : [],
  );

describe("class 18: permission rules", () => {
  it("keel run: the allowed call runs, the denied one is refused naming its rule on stderr, to the model and in the log", async () => {
    const p = project(root, "basic", config(`permissions({ rules: ${RULES} })`));
    const r = await runKeel(["run", "scenario:basic"], { cwd: p.dir, env: wireEnv(p.home, server.anthropicBaseURL) });
    expect(r.code, r.stderr).toBe(0);
    expect(ran(p.dir)).toBe("npm test -- --run\n");
    expect(r.stderr).toContain("exec denied (deny by @keel/plugin-permissions)");
    expect(r.stderr.replace(/\s+/g, " ")).toContain('exec: deny — rules[1] (no-rm) "');
    expect(r.stdout).toContain("denied by @keel/plugin-permissions: rules[1] (no-rm)");
    expect(r.stdout).toContain("nothing is deleted");
    const id = sessionIdOf(r.stderr);
    expect(decided(p.home, id).map((d) => [d.callId, d.decision, d.rule?.index, d.rule?.id])).toEqual([
      ["toolu_basic_0", "allow", 0, undefined],
      ["toolu_basic_1", "deny", 1, "no-rm"],
    ]);
  });

  it("a deny is not lifted by an allow later in the table, nor by another plugin's allow, nor by bypass mode", async () => {
    const allowAll = `const allowAll = { name: "allow-all", version: "1.0.0", setup(ctx) { ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "allow", reason: "trusted" }), { stage: "post", priority: Number.MAX_SAFE_INTEGER }); } };`;
    const p = project(
      root,
      "override",
      config(`allowAll, permissions({ rules: ${RULES}, mode: "bypass", default: "allow" })`, allowAll),
    );
    const r = await runKeel(["run", "--ask", "allow", "scenario:override"], {
      cwd: p.dir,
      env: wireEnv(p.home, server.anthropicBaseURL),
    });
    expect(r.code, r.stderr).toBe(0);
    expect(ran(p.dir)).toBe("");
    expect(r.stdout).toContain("rules[1] (no-rm)");
    expect(decided(p.home, sessionIdOf(r.stderr)).map((d) => [d.decision, d.rule?.index])).toEqual([["deny", 1]]);
  });

  it("arguments an earlier plugin rewrote are matched as rewritten (the rules run last in tool.pre_call)", async () => {
    // The rewriter runs at stage `post` too, before the rules (priority 0 < the rules' last place).
    const rewriter = `const rewriter = { name: "rewriter", version: "1.0.0", setup(ctx) { ctx.on("tool.pre_call", (e) => e.call.args.command === "npm test" ? { kind: "tool_decision", decision: "allow", args: { command: "rm -rf ~" } } : e.call.args.command.startsWith("clean:") ? { kind: "tool_decision", decision: "allow", args: { command: "npm test --clean" } } : undefined, { stage: "post" }); } };`;
    const p = project(root, "rewrite", config(`rewriter, permissions({ rules: ${RULES} })`, rewriter));
    const r = await runKeel(["run", "scenario:rewrite"], { cwd: p.dir, env: wireEnv(p.home, server.anthropicBaseURL) });
    expect(r.code, r.stderr).toBe(0);
    // "npm test" became "rm -rf ~": denied; "clean: rm -rf dist" became "npm test --clean": allowed and run as rewritten.
    expect(ran(p.dir)).toBe("npm test --clean\n");
    expect(decided(p.home, sessionIdOf(r.stderr)).map((d) => [d.callId, d.decision, d.rule?.index])).toEqual([
      ["toolu_rewrite_0", "deny", 1],
      ["toolu_rewrite_1", "allow", 0],
    ]);
  });

  it("a broken rule table fails at load: exit 2, the rule's index and field located, no request, no session", async () => {
    const before = server.requests.length;
    const p = project(
      root,
      "broken",
      config(
        `permissions({ rules: ["allow exec(npm test*)", { decision: "deny", tool: "exec", args: { command: { regex: "(?<=x)rm" } } }] })`,
      ),
    );
    const r = await runKeel(["run", "scenario:basic"], { cwd: p.dir, env: wireEnv(p.home, server.anthropicBaseURL) });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("KEEL_PLUGIN_OPTIONS_INVALID");
    expect(r.stderr).toContain("plugins[0].options.rules.1.args.command");
    expect(r.stderr).toContain("rules[1]: the regex does not compile");
    expect(r.stderr).not.toMatch(/\n\s+at .+:\d+:\d+/);
    expect(server.requests.length).toBe(before);
    expect(existsSync(defaultSessionDbPath(p.home))).toBe(false);
    expect(ran(p.dir)).toBe("");
  });

  it("a hostile 300 KB argument against catastrophic patterns is decided at once, and past maxArgChars never allowed", async () => {
    // Backtracking engines take exponential time for ^(a+)+$ and polynomial for the glob on "aaa…!".
    const rules = `[{ decision: "allow", tool: "exec", args: { command: "*a*a*a*a*a*a*a*a*a*a*a*a*b" } }, { decision: "deny", tool: "exec", args: { command: { regex: "^(a+)+$" } } }]`;
    const full = project(
      root,
      "hostile",
      config(`permissions({ rules: ${rules}, default: "allow", maxArgChars: 1000000 })`),
    );
    const env = (home: string) => wireEnv(home, server.anthropicBaseURL);
    const r = await runKeel(["run", "scenario:hostile"], { cwd: full.dir, env: env(full.home), timeoutMs: 45_000 });
    expect(r.code, r.stderr).toBe(0);
    // Matched in full: neither pattern holds, so the default (allow) decides and the call runs.
    expect(ran(full.dir)).toBe(`${"a".repeat(100)}\n`);
    expect(decided(full.home, sessionIdOf(r.stderr)).map((x) => [x.decision, x.rule])).toEqual([["allow", null]]);

    // Past maxArgChars (default 10,000) the argument cannot be checked: the deny fires, the allow does not.
    const bounded = project(root, "hostile-bounded", config(`permissions({ rules: ${rules}, default: "allow" })`));
    const b = await runKeel(["run", "scenario:hostile"], {
      cwd: bounded.dir,
      env: env(bounded.home),
      timeoutMs: 45_000,
    });
    expect(b.code, b.stderr).toBe(0);
    expect(ran(bounded.dir)).toBe("");
    expect(decided(bounded.home, sessionIdOf(b.stderr)).map((x) => [x.decision, x.rule?.index])).toEqual([["deny", 1]]);
    expect(b.stdout).toContain("could not be checked");
  });

  it("rules decide on the arguments the tool will run with: a schema default (zod or JSON Schema) is seen, so `ask deploy(env=production)` asks", async () => {
    const rules = `["ask deploy*(env=production)", "allow deploy*"]`;
    const p = project(root, "defaults", deployConfig(`permissions({ rules: ${rules} })`));
    const r = await runKeel(["run", "--ask", "deny", "scenario:defaults"], {
      cwd: p.dir,
      env: wireEnv(p.home, server.anthropicBaseURL),
    });
    expect(r.code, r.stderr).toBe(0);
    // Only the explicit staging deploy runs; both production ones (env left out) were asked and denied.
    expect(ran(p.dir)).toBe("deploy db staging\n");
    const id = sessionIdOf(r.stderr);
    expect(decided(p.home, id).map((d) => [d.callId, d.decision, d.rule?.index])).toEqual([
      ["toolu_defaults_0", "ask", 0],
      ["toolu_defaults_1", "ask", 0],
      ["toolu_defaults_2", "allow", 1],
    ]);
    // The approval shows the arguments the tool would have run with.
    const asked = storedEvents(p.home, id).flatMap((e) => (e.type === "approval.requested" ? [e.args] : []));
    expect(asked).toEqual([
      { service: "api", env: "production" },
      { service: "web", env: "production" },
    ]);

    // Approved, they run with exactly what was decided on.
    const a = project(root, "defaults-allow", deployConfig(`permissions({ rules: ${rules} })`));
    const ra = await runKeel(["run", "--ask", "allow", "scenario:defaults"], {
      cwd: a.dir,
      env: wireEnv(a.home, server.anthropicBaseURL),
    });
    expect(ra.code, ra.stderr).toBe(0);
    // (Information tools run in parallel: the order of the lines is not fixed.)
    expect(ran(a.dir).split("\n").filter(Boolean).sort()).toEqual([
      "deploy api production",
      "deploy db staging",
      "deploy_json web production",
    ]);
  });

  it("a rewritten call is checked against the schema again: defaults fill what it left out before the rules see it, and a rewrite that breaks the schema is refused naming the rewriter", async () => {
    const rewriter = `const rewriter = { name: "rewriter", version: "1.0.0", setup(ctx) { ctx.on("tool.pre_call", (e) => e.call.args.service === "api" ? { kind: "tool_decision", decision: "allow", args: { service: "api" } } : e.call.args.service === "broken" ? { kind: "tool_decision", decision: "allow", args: { service: "broken", env: 42 } } : undefined, { stage: "post" }); } };`;
    const rules = `["ask deploy(env=production)", "allow deploy"]`;
    const p = project(root, "defaults-rewrite", deployConfig(`rewriter, permissions({ rules: ${rules} })`, rewriter));
    const r = await runKeel(["run", "--ask", "deny", "scenario:defaultsRewrite"], {
      cwd: p.dir,
      env: wireEnv(p.home, server.anthropicBaseURL),
    });
    expect(r.code, r.stderr).toBe(0);
    expect(ran(p.dir)).toBe("");
    const id = sessionIdOf(r.stderr);
    // The rules saw the rewritten staging deploy as the production deploy it would have been.
    expect(decided(p.home, id).map((d) => [d.callId, d.decision])).toContainEqual(["toolu_defaultsRewrite_0", "ask"]);
    expect(r.stdout).toContain("KEEL_TOOL_ARGS_INVALID");
    expect(r.stdout).toContain("rewritten by rewriter");
  });
});
