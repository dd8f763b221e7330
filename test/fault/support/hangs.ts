/** Support of the "hangs" fault scenarios: a config folder per scenario, the real `keel` binary with a clock, the stored events. */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { SqliteSessionStore, defaultSessionDbPath } from "../../../packages/store-sqlite/src/index.ts";
import type { KeelEvent } from "../../../packages/kernel/src/index.ts";
import { afterAll } from "vitest";
import { startWireServer } from "../../../packages/wire-server/src/index.ts";
import type { WireServer } from "../../../packages/wire-server/src/index.ts";

export const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const KEEL_BIN = join(REPO, "packages", "cli", "bin", "keel.js");

/** A temp root for one test file. */
export function tempRoot(prefix = "keel-fault-hangs-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * A temp root for the file and a wire server per scenario (so scenarios can run two at a time),
 * all closed and removed after the file; `online` is the env pointing both SDKs at one of them.
 */
export function useWirePerScenario(
  prefix: string,
  defaults: Record<string, string> = {},
): {
  root: string;
  wire: () => Promise<WireServer>;
  online: (server: WireServer, home: string, extra?: Record<string, string>) => NodeJS.ProcessEnv;
} {
  const root = tempRoot(prefix);
  const servers: WireServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    rmSync(root, { recursive: true, force: true });
  });
  return {
    root,
    wire: async () => {
      const s = await startWireServer();
      servers.push(s);
      return s;
    },
    online: (server, home, extra = {}) =>
      cleanEnv({
        KEEL_HOME: home,
        ANTHROPIC_API_KEY: "sk-test",
        ANTHROPIC_BASE_URL: server.anthropicBaseURL,
        OPENAI_API_KEY: "sk-test",
        OPENAI_BASE_URL: server.openaiBaseURL,
        ...defaults,
        ...extra,
      }),
  };
}

/** A folder holding `agent.config.mjs` with `source` (an ES module body) and its own home. */
export function scenario(root: string, name: string, source: string): { dir: string; config: string; home: string } {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const config = join(dir, "agent.config.mjs");
  writeFileSync(config, source);
  return { dir, config, home: join(dir, "home") };
}

/** What a run printed, how it exited, and how long it took. */
export interface TimedRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** True when the test's own cap had to kill it (a hang). */
  killed: boolean;
  /** What went wrong in `during` (it then killed the child). */
  duringError?: string;
}

/** Env without provider keys or settings of the developer's shell. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of [
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "KEEL_OFFLINE",
    "KEEL_HOME",
    "KEEL_EXIT_GRACE_MS",
  ])
    delete env[k];
  return { ...env, ...extra };
}

/**
 * Spawn `keel args…` and time it; the child is SIGKILLed after `capMs` (so a hang fails the
 * test instead of hanging it). `during` may signal the child while it runs.
 */
export async function timedKeel(
  args: string[],
  options: {
    cwd: string;
    env: NodeJS.ProcessEnv;
    capMs?: number;
    during?: (child: ChildProcess, out: { stdout: () => string; stderr: () => string }) => unknown;
  },
): Promise<TimedRun> {
  await slot();
  try {
    return await spawnTimed(args, options);
  } finally {
    release();
  }
}

// At most two CLIs at once (2 cores): scenarios may run concurrently, their CLIs queue here.
let busy = 0;
const queue: Array<() => void> = [];
function slot(): Promise<void> {
  if (busy < 2) {
    busy++;
    return Promise.resolve();
  }
  return new Promise((r) => queue.push(r));
}
function release(): void {
  const next = queue.shift();
  if (next) next();
  else busy--;
}

function spawnTimed(args: string[], options: Parameters<typeof timedKeel>[1]): Promise<TimedRun> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [KEEL_BIN, ...args], {
      cwd: options.cwd,
      env: options.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let killed = false;
    let duringError: string | undefined;
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const cap = setTimeout(() => {
      killed = true;
      child.kill("SIGKILL");
    }, options.capMs ?? 30_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(cap);
      resolve({
        code,
        signal,
        stdout,
        stderr,
        ms: performance.now() - t0,
        killed,
        ...(duringError ? { duringError } : {}),
      });
    });
    Promise.resolve(options.during?.(child, { stdout: () => stdout, stderr: () => stderr })).catch((err: unknown) => {
      duringError = String(err);
      child.kill("SIGKILL");
    });
  });
}

/** Resolve once `check()` is true (polled every 20 ms), or reject after `ms`. */
export async function until(check: () => boolean, ms = 25_000): Promise<void> {
  const t0 = performance.now();
  while (!check()) {
    if (performance.now() - t0 > ms) throw new Error("until(): condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Every stored event of every session in `home`, by session, newest session first. */
export async function storedSessions(home: string): Promise<KeelEvent[][]> {
  const store = new SqliteSessionStore({ path: defaultSessionDbPath(home) });
  try {
    const list = await store.listSessions({ limit: 100 });
    return Promise.all(list.map((s) => store.events(s.id)));
  } finally {
    store.close();
  }
}

/** The one session's events in `home`. */
export async function onlySession(home: string): Promise<KeelEvent[]> {
  const all = await storedSessions(home);
  if (all.length !== 1) throw new Error(`expected one session in ${home}, found ${all.length}`);
  return all[0]!;
}

/** Tool calls and tool results of the stored messages: every call must have exactly one result. */
export function pairing(events: readonly KeelEvent[]): {
  calls: string[];
  results: Map<string, number>;
  texts: Map<string, string>;
} {
  const calls: string[] = [];
  const results = new Map<string, number>();
  const texts = new Map<string, string>();
  for (const e of events) {
    if (e.type !== "message.appended") continue;
    const m = e.message;
    if (m.role === "assistant") for (const b of m.content) if (b.type === "tool_call") calls.push(b.id);
    if (m.role === "tool") {
      results.set(m.toolCallId, (results.get(m.toolCallId) ?? 0) + 1);
      texts.set(m.toolCallId, m.content.map((b) => (b.type === "text" ? b.text : "")).join(""));
    }
  }
  return { calls, results, texts };
}
