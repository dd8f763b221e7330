/**
 * Support for the secrets-and-isolation fault scenarios: a KEEL_HOME per scenario, a config
 * that loads every plugin from source (namespace from $FAULT_NS), a wire server whose answers
 * are routed by what is asked (main turn, memory extraction, active recall, skill drafting),
 * and a raw-bytes search of every file under the home (including -wal and -shm files).
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { startWireServer } from "../../../packages/wire-server/src/index.ts";
import type { RecordedRequest, WireReply, WireServer } from "../../../packages/wire-server/src/index.ts";
import { offlineEnv, REPO, runKeel } from "../../../packages/cli/test/support/run-keel.ts";
import type { KeelRun } from "../../../packages/cli/test/support/run-keel.ts";
import { limited } from "./limit.ts";
import { expect, it } from "vitest";

const src = (pkg: string) => pathToFileURL(join(REPO, "packages", pkg, "src", "index.ts")).href;
const FIXTURE_MCP = join(REPO, "packages", "plugin-mcp", "test", "fixtures", "scripted-server.mjs");
const DELAYED_MCP = join(REPO, "packages", "plugin-mcp", "test", "fixtures", "delayed-server.mjs");

/** Key-shaped test values of many providers, built at run time (no key literal in the repository). */
export function secrets() {
  const rep = (s: string, n: number) => s.repeat(n);
  return {
    awsId: `AKIA${"QWERTYUIOP234567"}`,
    awsSecret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    github: `ghp_${rep("Hq7vT2", 6)}`,
    slack: `xoxb-${"240151902381"}-${"5566778899001"}-${rep("QmZx", 6)}`,
    openai: `sk-proj-${rep("Ab3_Cd4-Ef5", 7)}T3BlbkFJ${rep("Gh6Ij7Kl8", 8)}`,
    anthropic: `sk-ant-api03-${rep("Mn9OpQ1rSt2", 8)}xyzAbcdEfAA`,
    stripe: `sk_live_${rep("Uv3Wx4Yz5", 3)}`,
    jwt: `${Buffer.from('{"alg":"HS256","typ":"JWT"}').toString("base64url")}.${Buffer.from('{"sub":"ada","role":"admin","iat":1763900000}').toString("base64url")}.${rep("Sg8kZ2pQ", 5)}`,
    dbPassword: `Pw${rep("7xQ!", 4)}`,
    privateKey: `-----BEGIN RSA PRIVATE KEY-----\n${Array.from({ length: 4 }, (_, i) => rep(`MIIEpAIBAAKCAQEA${i}x7`, 3).slice(0, 64)).join("\n")}\n-----END RSA PRIVATE KEY-----`,
  };
}

/** What the routed wire server answers. `main` is consumed by ordinary turns; the rest answer side calls. */
export interface Script {
  main: WireReply[];
  facts: unknown[];
  draftBody: string;
  queries: string[];
}

function systemOf(r: RecordedRequest): string {
  const s = r.body?.system;
  return typeof s === "string" ? s : Array.isArray(s) ? s.map((b: { text?: string }) => b.text ?? "").join("\n") : "";
}

/** True for a main-turn request (not extraction, active recall or drafting). */
export function isMain(r: RecordedRequest): boolean {
  const s = systemOf(r);
  return !/You extract durable facts|Plan memory searches|You write Agent Skills/.test(s);
}

/** Everything a request carried, as one string (system, messages, tools). */
export function sent(r: RecordedRequest): string {
  return JSON.stringify(r.body);
}

/** A scenario's world: its home, config folder, wire server and script. */
export interface World {
  home: string;
  dir: string;
  server: WireServer;
  script: Script;
  /**
   * `env`: more variables for the `keel` process (e.g. FAULT_MCP_DELAY, FAULT_MCP_RELEASE);
   * `onStdout`: each chunk of its stdout as it arrives (with `json`, its events live).
   */
  run(
    input: string,
    opts?: {
      ns?: string;
      session?: string;
      json?: boolean;
      env?: Record<string, string>;
      onStdout?: (chunk: string) => void;
    },
  ): Promise<KeelRun>;
  mainRequests(): RecordedRequest[];
  /** Files under the home whose raw bytes contain any needle (each needle also in lower case). */
  filesContaining(needles: readonly string[]): string[];
  close(): Promise<void>;
}

/** Options of the config the world writes. */
export interface WorldConfig {
  skillsThreshold?: number;
  mcp?: boolean;
  /** The MCP plugin's topK (default 10: the fixture's 6 tools are all shown). */
  mcpTopK?: number;
  /**
   * A second MCP server `slow` (delayed-server.mjs: `slow_lookup`, `slow_echo`) that starts after
   * $FAULT_MCP_DELAY ms (default 0), or, when $FAULT_MCP_RELEASE is set, once that file exists.
   */
  mcpSlow?: boolean;
  bigTool?: string;
  /** Load the compaction plugin (default: only with `bigTool`); a string is its options object (source text). */
  compaction?: boolean | string;
  /** Add one ordinary skill (so the router picks and records a pick). */
  skill?: boolean;
}

/** Start a world: a fresh KEEL_HOME, a config using every plugin, a routed wire server. */
export async function world(cfg: WorldConfig = {}): Promise<World> {
  // Memory-backed when the machine has it: these scenarios are about what is written, not
  // about fsync, and a disk's fsyncs (several SQLite files per turn) would dominate their time.
  const base = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
  const home = mkdtempSync(join(base, "keel-fault-secrets-home-"));
  const dir = mkdtempSync(join(base, "keel-fault-secrets-cfg-"));
  const script: Script = { main: [], facts: [], draftBody: "## When to use\n\nWhen asked.", queries: [] };
  const server = await startWireServer({
    onEmpty: (r) => {
      const s = systemOf(r);
      if (s.includes("You write Agent Skills")) return { text: script.draftBody };
      if (s.includes("You extract durable facts")) return { text: JSON.stringify({ facts: script.facts }) };
      if (s.includes("Plan memory searches")) return { text: JSON.stringify({ queries: script.queries }) };
      return script.main.shift() ?? { text: "ok" };
    },
  });
  const tools =
    cfg.bigTool !== undefined
      ? `tools: [defineTool({ name: "dump_config", description: "Dump the service configuration.", input: z.object({}), category: "exec", execute: () => ${JSON.stringify(cfg.bigTool)} })],`
      : "";
  const plugins = [
    `memory({ namespace: process.env.FAULT_NS ?? "default", extraction: "model" })`,
    `skills({ namespace: process.env.FAULT_NS ?? "default", autoDraft: { threshold: ${cfg.skillsThreshold ?? 50} }${cfg.skill ? `, dirs: [${JSON.stringify(join(dir, "skills"))}]` : ""} })`,
    ...(typeof cfg.compaction === "string"
      ? [`compaction(${cfg.compaction})`]
      : (cfg.compaction ?? cfg.bigTool !== undefined)
        ? [`compaction({ model: false, taco: { threshold: 200 } })`]
        : []),
    ...(cfg.mcp
      ? [
          `mcp({ servers: { fx: { command: process.execPath, args: [${JSON.stringify(FIXTURE_MCP)}] }${cfg.mcpSlow ? `, slow: { command: process.execPath, args: [${JSON.stringify(DELAYED_MCP)}], env: { DELAY_MS: process.env.FAULT_MCP_DELAY ?? "0", TOOL_PREFIX: "slow", ...(process.env.FAULT_MCP_RELEASE ? { RELEASE_FILE: process.env.FAULT_MCP_RELEASE } : {}) } }` : ""} }, topK: ${cfg.mcpTopK ?? 10} })`,
        ]
      : []),
    // Both keep text from the user's words (the goal, recurring words): every scenario's file scan covers them too.
    `goals()`,
    `userModel({ namespace: process.env.FAULT_NS ?? "default", tools: false })`,
  ];
  // @keel/kernel resolvable from the config's folder (the host's own copy), so the CLI imports
  // the config natively instead of through jiti's much slower transform.
  mkdirSync(join(dir, "node_modules", "@keel"), { recursive: true });
  symlinkSync(join(REPO, "packages", "kernel"), join(dir, "node_modules", "@keel", "kernel"), "dir");
  if (cfg.skill) {
    mkdirSync(join(dir, "skills", "deploy-checklist"), { recursive: true });
    writeFileSync(
      join(dir, "skills", "deploy-checklist", "SKILL.md"),
      "---\nname: deploy-checklist\ndescription: Steps to deploy a service and verify its tokens and credentials.\n---\n\n1. Check. 2. Deploy.\n",
    );
  }
  writeFileSync(
    join(dir, "agent.config.ts"),
    `import { defineConfig, defineTool } from ${JSON.stringify(src("kernel"))};
import memory from ${JSON.stringify(src("plugin-memory"))};
import skills from ${JSON.stringify(src("plugin-skills"))};
import compaction from ${JSON.stringify(src("plugin-compaction"))};
import mcp from ${JSON.stringify(src("plugin-mcp"))};
import goals from ${JSON.stringify(src("plugin-goals"))};
import userModel from ${JSON.stringify(src("plugin-user-model"))};
import { z } from ${JSON.stringify(pathToFileURL(join(REPO, "packages", "kernel", "node_modules", "zod", "index.js")).href)};
void mcp; void compaction; void z; void defineTool;
export default defineConfig({
  name: "fault-secrets",
  model: "anthropic:claude-sonnet-4-6",
  ${tools}
  plugins: [${plugins.join(", ")}],
});
`,
  );
  return {
    home,
    dir,
    server,
    script,
    run(input, opts = {}) {
      const args = [
        "run",
        ...(opts.json ? ["--json"] : []),
        ...(opts.session ? ["--session", opts.session] : []),
        input,
      ];
      return limited(async () => {
        const t0 = Date.now();
        const r = await runKeel(args, {
          cwd: dir,
          env: offlineEnv({
            KEEL_HOME: home,
            ANTHROPIC_API_KEY: "sk-test",
            ANTHROPIC_BASE_URL: server.anthropicBaseURL,
            ...(opts.ns ? { FAULT_NS: opts.ns } : {}),
            ...opts.env,
          }),
          ...(opts.onStdout ? { onStdout: (chunk: string) => opts.onStdout!(chunk) } : {}),
        });
        if (process.env.FAULT_TIMING) console.log(`[run ${Date.now() - t0} ms] ${input.slice(0, 30)}`);
        return r;
      });
    },
    mainRequests: () => server.requests.filter(isMain),
    filesContaining(needles) {
      const out: string[] = [];
      const all = needles.flatMap((n) => (n.toLowerCase() === n ? [n] : [n, n.toLowerCase()]));
      for (const name of readdirSync(home, { recursive: true }) as string[]) {
        const p = join(home, name);
        if (!statSync(p).isFile()) continue;
        const bytes = readFileSync(p);
        for (const n of all) if (bytes.includes(n)) out.push(`${name}: ${n.slice(0, 12)}…`);
      }
      return out;
    },
    async close() {
      await server.close();
      rmSync(home, { recursive: true, force: true });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The session id of a `--json` run (from its first event). */
export function sessionOf(run: KeelRun): string {
  for (const line of run.stdout.split("\n")) {
    try {
      const e = JSON.parse(line) as { sessionId?: string };
      if (e.sessionId) return e.sessionId;
    } catch {
      // not an event line
    }
  }
  throw new Error(`no session id in: ${run.stdout.slice(0, 300)} ${run.stderr.slice(0, 300)}`);
}

/** One scenario in its own world (closed whatever happens), run concurrently with the others. */
export function scenario(name: string, cfg: WorldConfig, fn: (w: World) => Promise<void>): void {
  it.concurrent(name, async () => {
    const w = await world(cfg);
    try {
      await fn(w);
    } finally {
      await w.close();
    }
    // The file's scenarios run at once and share the cores with each other: a hang bound, not a speed bound.
  }, 120_000);
}

/** A `keel` run that must exit 0 (its stderr is the failure message). */
export async function ok(p: Promise<{ code: number | null; stderr: string; stdout: string }>) {
  const r = await p;
  expect(r.code, r.stderr).toBe(0);
  return r;
}
