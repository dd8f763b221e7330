/**
 * Class 18, adversarial pass (@keel/plugin-permissions), through the real `keel` binary against
 * the wire server: calls shaped to slip past a deny. A decoy `command` beside the `cmd` the tool
 * really runs no longer hides it from `deny exec(rm *)` nor lets `allow exec(npm test*)` run it;
 * a path ending in a NUL byte, which a tool that strips NULs reads as `.env`, is denied by
 * `**∕.env` (it matched nothing, so the information default ran it and the secret reached the
 * model). Unit level: plugin-permissions/test/adversarial.test.ts.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RecordedRequest, WireReply, WireServer } from "../../packages/wire-server/src/index.ts";
import { lastUserText, startWireServer } from "../../packages/wire-server/src/index.ts";
import { killAll, project, REPO, runKeel, sessionIdOf, storedEvents, tempRoot, wireEnv } from "./support/storage.ts";

const PLUGIN = pathToFileURL(join(REPO, "packages", "plugin-permissions", "src", "index.ts")).href;
const SECRET = "sk-adv-perm-0123456789";

const CALLS: Record<string, Array<{ name: string; args: unknown }>> = {
  decoy: [
    { name: "exec", args: { command: "npm test", cmd: "rm -rf build" } },
    { name: "exec", args: { command: "ls", cmd: "rm -rf dist" } },
    { name: "exec", args: { cmd: "npm test -- --run" } },
  ],
  nul: [
    { name: "read_file", args: { path: ".env\u0000" } },
    { name: "read_file", args: { path: "notes.txt" } },
  ],
};

function reply(request: RecordedRequest): WireReply {
  const scenario = /scenario:(\w+)/.exec(lastUserText(request))?.[1] ?? "decoy";
  const msgs = (request.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
  const results = msgs
    .flatMap((m) => (Array.isArray(m.content) ? (m.content as Array<{ type: string; content?: unknown }>) : []))
    .filter((b) => b.type === "tool_result");
  if (!results.length)
    return {
      toolCalls: (CALLS[scenario] ?? []).map((c, i) => ({ id: `toolu_${scenario}_${i}`, ...c })),
      api: "anthropic",
    };
  return {
    text: `RESULTS\n${results.map((r) => JSON.stringify(r.content).slice(0, 600)).join("\n")}`,
    api: "anthropic",
  };
}

let server: WireServer;
const root = tempRoot("keel-fault-adv-perms-");
beforeAll(async () => {
  server = await startWireServer({ onEmpty: reply });
});
afterEach(killAll);
afterAll(async () => {
  await killAll();
  await server?.close();
});

/** `exec` runs `cmd` (a `command` is accepted and ignored, as tools with aliases do); `read_file` strips NULs, as many servers do. */
function config(rules: string): string {
  return `import { appendFileSync, readFileSync } from "node:fs";
import permissions from ${JSON.stringify(PLUGIN)};
export default {
  name: "adv-perms",
  model: "anthropic:claude-sonnet-4-6",
  tools: [
    {
      name: "exec",
      description: "Runs a shell command.",
      parameters: { type: "object", properties: { cmd: { type: "string" }, command: { type: "string" } }, required: ["cmd"] },
      category: "exec",
      execute: (args) => { appendFileSync(new URL("./ran.log", import.meta.url), args.cmd + "\\n"); return "ran " + args.cmd; },
    },
    {
      name: "read_file",
      description: "Reads a file.",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
      category: "info",
      execute: (args) => readFileSync(new URL("./" + args.path.replaceAll("\\u0000", ""), import.meta.url), "utf8"),
    },
  ],
  plugins: [permissions({ rules: ${rules} })],
};
`;
}

const ran = (dir: string) => (existsSync(join(dir, "ran.log")) ? readFileSync(join(dir, "ran.log"), "utf8") : "");

type Decided = { callId: string; decision: string; rule: { index: number } | null; uncertain?: string[] };
const decided = (home: string, id: string): Decided[] =>
  storedEvents(home, id).flatMap((e) =>
    e.type === "diagnostic" && e.code === "permissions.decision" ? [e.data as Decided] : [],
  );

describe("class 18, adversarial: calls shaped to slip past a deny", () => {
  it("a decoy `command` beside the `cmd` the tool runs neither hides it from a deny nor rides an allow", async () => {
    const p = project(root, "decoy", config(`["allow exec(npm test*)", "deny exec(rm *)"]`));
    const r = await runKeel(["run", "scenario:decoy"], { cwd: p.dir, env: wireEnv(p.home, server.anthropicBaseURL) });
    expect(r.code, r.stderr).toBe(0);
    // Only the call whose every subject argument is `npm test…` ran.
    expect(ran(p.dir)).toBe("npm test -- --run\n");
    const d = decided(p.home, sessionIdOf(r.stderr));
    expect(d.map((x) => [x.callId, x.decision, x.rule?.index ?? null])).toEqual([
      ["toolu_decoy_0", "deny", 1],
      ["toolu_decoy_1", "deny", 1],
      ["toolu_decoy_2", "allow", 0],
    ]);
    expect(d[0]!.uncertain?.join(" ")).toContain('matches argument "cmd" but not "command"');
  });

  it("a path ending in a NUL byte is denied by `**/.env`, and the secret never reaches the model", async () => {
    const p = project(root, "nul", config(`[{ decision: "deny", tool: "read_file", args: { path: "**/.env" } }]`));
    writeFileSync(join(p.dir, ".env"), `KEY=${SECRET}\n`);
    writeFileSync(join(p.dir, "notes.txt"), "plain notes\n");
    const r = await runKeel(["run", "scenario:nul"], { cwd: p.dir, env: wireEnv(p.home, server.anthropicBaseURL) });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("plain notes");
    expect(r.stdout).toContain("denied by @keel/plugin-permissions");
    expect(r.stdout + r.stderr).not.toContain(SECRET);
    expect(JSON.stringify(server.requests.map((q) => q.body))).not.toContain(SECRET);
    const d = decided(p.home, sessionIdOf(r.stderr));
    expect(d.map((x) => [x.callId, x.decision])).toEqual([
      ["toolu_nul_0", "deny"],
      ["toolu_nul_1", "allow"],
    ]);
  });
});
