/**
 * Support for the storage and kill fault scenarios: projects with a config in a temp folder,
 * the real `keel` binary as a child process, a stateless tool-using script for the wire
 * server, and readers of what is on disk.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DatabaseSync } from "node:sqlite";
import { afterAll, afterEach, beforeAll } from "vitest";
import { startWireServer } from "../../../packages/wire-server/src/index.ts";
import type { RecordedRequest, WireReply, WireServer } from "../../../packages/wire-server/src/index.ts";
import { lastUserText } from "../../../packages/wire-server/src/index.ts";
import type { Agent, AgentOptions, KeelEvent, ToolDefinition } from "../../../packages/agent/src/index.ts";
import { createAgent } from "../../../packages/agent/src/index.ts";
import { scriptedProvider } from "../../../packages/testkit/src/index.ts";
import { SqliteSessionStore, defaultSessionDbPath } from "../../../packages/store-sqlite/src/index.ts";
import { headOf } from "../../../packages/text/src/index.ts";
import { resolveModel } from "../../../packages/providers/src/index.ts";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const KEEL_BIN = join(REPO, "packages", "cli", "bin", "keel.js");

/** A fresh temp folder for one test file. */
export function tempRoot(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A folder with `agent.config.mjs` and its own KEEL_HOME (`<dir>/home`). */
export function project(root: string, name: string, config: string): { dir: string; home: string } {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "agent.config.mjs"), config);
  return { dir, home: join(dir, "home") };
}

/**
 * The config of the fault agent: Anthropic through the wire server, a `pause` tool that waits
 * `ms` (honouring its signal), or less when FAULT_PAUSE_RELEASE names a file that appears (a
 * scenario releases the pause when what it checks is done, instead of guessing a duration), and
 * the given lease.
 */
export function faultConfig(extra = ""): string {
  return `import { existsSync } from "node:fs";
export default {
  name: "fault",
  model: "anthropic:claude-sonnet-4-6",
  tools: [{
    name: "pause",
    description: "Waits ms milliseconds, then says so.",
    parameters: { type: "object", properties: { ms: { type: "number" } } },
    category: "info",
    execute: (args, ctx) => new Promise((resolve, reject) => {
      const release = process.env.FAULT_PAUSE_RELEASE;
      const stop = () => { clearTimeout(t); clearInterval(poll); };
      const t = setTimeout(() => { stop(); resolve("paused " + (args?.ms ?? 0) + " ms"); }, args?.ms ?? 0);
      const poll = release ? setInterval(() => { if (existsSync(release)) { stop(); resolve("paused until released"); } }, 50) : undefined;
      ctx.signal.addEventListener("abort", () => { stop(); reject(ctx.signal.reason); }, { once: true });
    }),
  }],
  ${extra}
};
`;
}

/** Env of a run against the wire server: no other provider key, KEEL_HOME set. */
export function wireEnv(home: string, anthropicBaseURL: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of [
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "KEEL_OFFLINE",
    "KEEL_HOME",
  ])
    delete env[k];
  // Node's compile cache only shortens each CLI's start (~1 s cold on 2 cores); Keel ignores it.
  return {
    ...env,
    KEEL_HOME: home,
    ANTHROPIC_API_KEY: "sk-test",
    ANTHROPIC_BASE_URL: anthropicBaseURL,
    NODE_COMPILE_CACHE: join(tmpdir(), "keel-fault-compile-cache"),
    ...extra,
  };
}

/** A running `keel`. */
export interface KeelProc {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves when the process is gone (after its pipes closed). */
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

const live = new Set<ChildProcess>();

/** Start `keel args…` (optionally through a command prefix such as setpriv). */
export function startKeel(
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; prefix?: string[]; keepStdin?: boolean },
): KeelProc {
  const t0 = performance.now();
  const argv = [...(options.prefix ?? []), process.execPath, KEEL_BIN, ...args];
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: options.cwd,
    env: options.env,
    stdio: [options.keepStdin ? "pipe" : "ignore", "pipe", "pipe"],
  });
  live.add(child);
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>((res) =>
    child.on("close", (code, signal) => {
      live.delete(child);
      res({ code, signal, ms: performance.now() - t0 });
    }),
  );
  return { child, stdout: () => out, stderr: () => err, exit };
}

/** Run `keel args…` to the end, SIGKILLed after `timeoutMs` (default 45 s; then `code` is null). */
export async function runKeel(
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; prefix?: string[]; timeoutMs?: number },
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; ms: number }> {
  const p = startKeel(args, options);
  // A hang detector, not a bound: a loaded machine starts and runs keel several times slower (under the 60 s test timeout).
  const timer = setTimeout(() => p.child.kill("SIGKILL"), options.timeoutMs ?? 45_000);
  const r = await p.exit;
  clearTimeout(timer);
  return { ...r, stdout: p.stdout(), stderr: p.stderr() };
}

/**
 * One wire server (answering with `toolScript`) and one temp root for a whole test file; every
 * child still running is killed after each test; the root is removed at the end.
 */
export function useSharedWire(prefix: string): { root: string; server: () => WireServer } {
  let server: WireServer | undefined;
  const root = tempRoot(prefix);
  beforeAll(async () => {
    server = await startWireServer({ onEmpty: toolScript });
  });
  afterEach(killAll);
  afterAll(async () => {
    await killAll();
    await server?.close();
    rmSync(root, { recursive: true, force: true });
  });
  return {
    root,
    server: () => {
      if (!server) throw new Error("the wire server starts in beforeAll");
      return server;
    },
  };
}

/** SIGKILL every child still running (afterEach/afterAll). */
export async function killAll(): Promise<void> {
  await Promise.all(
    [...live].map(
      (c) =>
        new Promise<void>((res) => {
          if (c.exitCode !== null || c.signalCode !== null) return res();
          c.once("close", () => res());
          c.kill("SIGCONT");
          c.kill("SIGKILL");
        }),
    ),
  );
}

/** Poll `pred` every `stepMs` until true; throws after `timeoutMs` naming `what`. */
export async function until(pred: () => boolean, what: string, timeoutMs = 30_000, stepMs = 5): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** The stored events of a session (read-only open, as `keel sessions show` does). */
export function storedEvents(home: string, sessionId: string): KeelEvent[] {
  const store = new SqliteSessionStore({ path: defaultSessionDbPath(home), readOnly: true });
  try {
    return store.events(sessionId);
  } finally {
    store.close();
  }
}

/** The ids of the stored sessions, newest first. */
export function storedSessions(home: string): string[] {
  if (!existsSync(defaultSessionDbPath(home))) return [];
  const store = new SqliteSessionStore({ path: defaultSessionDbPath(home), readOnly: true });
  try {
    return store.listSessions().map((s) => s.id);
  } finally {
    store.close();
  }
}

/** The session id a `keel run` printed on its last stderr line. */
export function sessionIdOf(stderr: string): string {
  const m = /session ([0-9a-f-]{36})/.exec(stderr);
  if (!m) throw new Error(`no session id in: ${stderr}`);
  return m[1]!;
}

/** The user texts stored in a session's log, in order. */
export function storedUserTexts(events: readonly KeelEvent[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    if (e.type !== "message.appended" || e.message.role !== "user") continue;
    out.push(e.message.content.map((b) => (b.type === "text" ? b.text : "")).join(""));
  }
  return out;
}

/**
 * Problems with tool-call pairing in an Anthropic request body: every tool_use must be answered
 * by exactly one tool_result in the next message, and no tool_result may lack its call.
 */
export function pairingProblems(body: { messages?: Array<{ role: string; content: unknown }> }): string[] {
  const problems: string[] = [];
  const msgs = body.messages ?? [];
  const blocks = (m: { content: unknown } | undefined) =>
    Array.isArray(m?.content) ? (m!.content as Array<{ type: string; id?: string; tool_use_id?: string }>) : [];
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i]!;
    const results = blocks(m)
      .filter((b) => b.type === "tool_result")
      .map((b) => b.tool_use_id!);
    const prev = msgs[i - 1];
    const calls =
      prev?.role === "assistant"
        ? blocks(prev)
            .filter((b) => b.type === "tool_use")
            .map((b) => b.id!)
        : [];
    if (m.role === "user") {
      for (const r of results) if (!calls.includes(r)) problems.push(`message ${i}: tool_result ${r} without its call`);
      for (const c of calls) {
        const n = results.filter((r) => r === c).length;
        if (n !== 1) problems.push(`message ${i}: tool_use ${c} has ${n} results`);
      }
    } else if (calls.length)
      problems.push(`message ${i}: tool_use in message ${i - 1} not followed by a user message with results`);
  }
  const last = msgs.at(-1);
  if (last?.role === "assistant" && blocks(last).some((b) => b.type === "tool_use"))
    problems.push("the request ends with unanswered tool calls");
  return problems;
}

/**
 * The stateless tool script: the last user text carries directives `tools:N pause:MS delay:MS`
 * (and `tool:NAME`, default pause). The model calls that tool until N results followed that
 * text, then answers with text.
 */
export function toolScript(request: RecordedRequest): WireReply {
  // The last text block only: after a kill, two user turns in a row are merged into one
  // message by the adapter, and only the newest one's directives count.
  const text = lastUserBlock(request);
  const num = (k: string, d: number) => Number(new RegExp(`${k}:(\\d+)`).exec(text)?.[1] ?? d);
  const rounds = num("tools", 0);
  const pause = num("pause", 0);
  const delayMs = num("delay", 0);
  const msgs = (request.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
  let results = 0;
  for (let i = msgs.length - 1; i >= 0; i--) {
    const c = msgs[i]!.content;
    const blocks = Array.isArray(c) ? (c as Array<{ type: string }>) : [{ type: "text" }];
    if (msgs[i]!.role === "user" && blocks.some((b) => b.type === "text")) break;
    results += blocks.filter((b) => b.type === "tool_result").length;
  }
  const parallel = num("parallel", 1);
  if (results < rounds * parallel) {
    return {
      toolCalls: Array.from({ length: parallel }, (_, k) => ({
        id: `toolu_${request.index}_${k}`,
        name: /tool:([a-z_]+)/.exec(text)?.[1] ?? "pause",
        args: { ms: pause },
      })),
      delayMs,
      api: "anthropic",
    };
  }
  return { text: `Done after ${results} tool results: ${headOf(text, 40)}`, chunks: 4, delayMs, api: "anthropic" };
}

function lastUserBlock(request: RecordedRequest): string {
  const msgs = (request.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
  for (let i = msgs.length - 1; i >= 0; i--) {
    const m = msgs[i]!;
    if (m.role !== "user") continue;
    if (typeof m.content === "string") return m.content;
    const texts = (m.content as Array<{ type: string; text?: string }>).filter((b) => b.type === "text");
    if (texts.length) return texts.at(-1)!.text ?? "";
  }
  return lastUserText(request);
}

/** sha256 of a file's bytes, or "absent". */
export function digest(path: string): string {
  return existsSync(path) ? createHash("sha256").update(readFileSync(path)).digest("hex") : "absent";
}

/** Overwrite the middle of `table`'s root page (a b-tree page) with junk; the file header stays valid. */
export function garbleTable(dbPath: string, table: string): void {
  const db = new DatabaseSync(dbPath);
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  const pageSize = (db.prepare("PRAGMA page_size").get() as { page_size: number }).page_size;
  const root = (db.prepare("SELECT rootpage FROM sqlite_schema WHERE name = ?").get(table) as { rootpage: number })
    .rootpage;
  db.close();
  const buf = readFileSync(dbPath);
  const at = (root - 1) * pageSize;
  // The page header (type, cell count, cell pointers) and some cells: junk everywhere.
  for (let i = 0; i < Math.min(pageSize, 64); i++) buf[at + i] = (i * 37 + 11) & 0xff;
  writeFileSync(dbPath, buf);
}

/**
 * A command prefix that runs a process as `nobody` when this one is root (so file modes bind);
 * undefined when that is impossible here, including a checkout `nobody` cannot read (a clone
 * under a private folder such as `mktemp -d`'s).
 */
export function asUnprivileged(): string[] | undefined {
  if (process.getuid?.() !== 0) return [];
  const check = `process.exit(process.getuid() === 65534 && require("node:fs").readFileSync(${JSON.stringify(KEEL_BIN)}).length > 0 ? 0 : 1)`;
  const probe = spawnSync("setpriv", [
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    process.execPath,
    "-e",
    check,
  ]);
  return probe.status === 0 ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] : undefined;
}

/** The fault config's `pause` tool, for in-process agents. */
export const pauseTool: ToolDefinition<{ ms?: number }> = {
  name: "pause",
  description: "Waits ms milliseconds, then says so.",
  parameters: { type: "object", properties: { ms: { type: "number" } } },
  category: "info",
  execute: (args, ctx) =>
    new Promise((resolve, reject) => {
      const t = setTimeout(() => resolve(`paused ${args?.ms ?? 0} ms`), args?.ms ?? 0);
      ctx.signal.addEventListener("abort", () => (clearTimeout(t), reject(ctx.signal.reason)), { once: true });
    }),
};

/**
 * The fault agent in this process, on the home's session database: the real kernel, the
 * official Anthropic SDK against the wire server and the same tool as the config.
 */
export async function inProcessAgent(
  home: string,
  anthropicBaseURL: string,
  plugins: AgentOptions["plugins"] = [],
): Promise<Agent> {
  const provider = resolveModel("anthropic:claude-sonnet-4-6", {
    env: { ANTHROPIC_API_KEY: "sk-test", ANTHROPIC_BASE_URL: anthropicBaseURL },
  });
  return createAgent({ name: "fault", provider, tools: [pauseTool], home, plugins });
}

/** A session with one completed turn per text, written in this process (offline model). */
export async function seedSession(home: string, texts: readonly string[]): Promise<string> {
  const agent = await createAgent({
    name: "fault",
    provider: scriptedProvider(texts.map((t) => ({ text: `noted: ${t}` }))),
    home,
  });
  try {
    const session = await agent.session();
    for (const t of texts) await session.run(t);
    return session.id;
  } finally {
    await agent.close();
  }
}

/** The lease row of a session (a writer running a turn or writing an answer), if any. */
export function leaseOf(home: string, sessionId: string): { owner: string; pid: number } | undefined {
  const db = new DatabaseSync(defaultSessionDbPath(home), { readOnly: true });
  try {
    return db.prepare("SELECT owner, pid FROM leases WHERE session_id = ?").get(sessionId) as
      | { owner: string; pid: number }
      | undefined;
  } finally {
    db.close();
  }
}
