/**
 * The child processes of stdio MCP servers, and how they end.
 *
 * On POSIX a server starts in a process group of its own (`detached`), so ending it ends what
 * it started too (`npx` → sh → node): a signal goes to the whole group. Ending a server: its
 * stdin is closed (a well-behaved server exits at the end of its input), after `stopGraceMs`
 * its group gets SIGTERM, after `stopGraceMs` more SIGKILL. Whatever is still running when
 * this process exits is ended synchronously in the `exit` event (SIGTERM, at most
 * EXIT_WAIT_MS, SIGKILL), and on SIGINT, SIGTERM or SIGHUP that nothing else in the process
 * listens to (whose default action would end the process with no `exit` event) the same is
 * done before the signal's default action is let happen.
 *
 * What no code can cover: SIGKILL of this process (or a crash of Node itself) runs nothing;
 * the servers then only see their stdin close, and one that ignores it keeps running.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { PassThrough } from "node:stream";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

/** How long a server has to exit after its stdin closes, and again after SIGTERM, before the next step (ms). */
export const DEFAULT_STOP_GRACE_MS = 1_000;

/** How long the synchronous last resort at exit waits between SIGTERM and SIGKILL (ms). */
export const EXIT_WAIT_MS = 100;

/** Process groups exist (POSIX); on Windows the MCP SDK's own transport starts servers. */
export const PROCESS_GROUPS = process.platform !== "win32";

/** The MCP SDK's line framing (`@modelcontextprotocol/sdk/shared/stdio.js`), passed in so it loads only with the SDK. */
export interface StdioCodec {
  ReadBuffer: new () => { append(chunk: Buffer): void; readMessage(): JSONRPCMessage | null; clear(): void };
  serializeMessage(message: JSONRPCMessage): string;
}

/** How to start a server. Contract: `env` is the whole environment (nothing else is inherited). */
export interface ServerProcessOptions {
  command: string;
  args: readonly string[];
  env: Record<string, string>;
  cwd?: string | undefined;
  /** See DEFAULT_STOP_GRACE_MS. */
  stopGraceMs: number;
  codec: StdioCodec;
}

/**
 * An MCP server over stdio in its own process group: the MCP SDK's `Transport`.
 * Contract: `close()` (idempotent; every call gets the same promise) resolves once the server's
 * group is empty, at most about 2 × `stopGraceMs` + 1 s after the first call (stdin closed,
 * then SIGTERM, then SIGKILL to the group); when the server exits by itself, whatever it left
 * in its group is ended the same way; `onclose` fires once, when its stdio has closed; from
 * the spawn until its group is empty the server is ended at process exit (see the module).
 */
export class ServerProcess implements Transport {
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: (<T extends JSONRPCMessage>(message: T) => void) | undefined;
  /** The server's stderr, readable before `start`. */
  readonly stderr = new PassThrough();
  readonly #o: ServerProcessOptions;
  readonly #reader: InstanceType<StdioCodec["ReadBuffer"]>;
  #child: ChildProcess | undefined;
  #exited = false;
  #stopping: Promise<void> | undefined;
  #markEnded!: () => void;
  readonly #ended = new Promise<void>((r) => (this.#markEnded = r));

  constructor(options: ServerProcessOptions) {
    this.#o = options;
    this.#reader = new options.codec.ReadBuffer();
  }

  /** Resolves once `close` has finished, whoever called it (the owner, or this transport when the server exited by itself). Contract: never rejects. */
  get ended(): Promise<void> {
    return this.#ended;
  }

  /** The server's pid (its group's id on POSIX), once spawned. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  start(): Promise<void> {
    if (this.#child) return Promise.reject(new Error("This MCP server process was started already."));
    return new Promise((resolve, reject) => {
      const child = spawn(this.#o.command, [...this.#o.args], {
        env: this.#o.env,
        ...(this.#o.cwd ? { cwd: this.#o.cwd } : {}),
        stdio: ["pipe", "pipe", "pipe"],
        detached: PROCESS_GROUPS,
        shell: false,
        windowsHide: true,
      });
      this.#child = child;
      let spawned = false;
      child.once("spawn", () => {
        spawned = true;
        track(child.pid!);
        resolve();
      });
      child.on("error", (err) => {
        if (!spawned) reject(err);
        this.onerror?.(err);
      });
      child.once("exit", () => {
        this.#exited = true;
        // It ended by itself: what it left in its group is ended too.
        void this.close();
      });
      child.once("close", () => this.onclose?.());
      child.stdin!.on("error", (err) => this.onerror?.(err));
      child.stdout!.on("error", (err) => this.onerror?.(err));
      child.stdout!.on("data", (chunk: Buffer) => this.#read(chunk));
      child.stderr!.pipe(this.stderr);
    });
  }

  #read(chunk: Buffer): void {
    try {
      this.#reader.append(chunk);
    } catch (err) {
      // Over the SDK's buffer limit: the connection cannot go on.
      this.onerror?.(err as Error);
      void this.close();
      return;
    }
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.#reader.readMessage();
      } catch (err) {
        // A line that is not JSON-RPC: said, and skipped.
        this.onerror?.(err as Error);
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.#child?.stdin;
    if (!stdin || this.#stopping || !stdin.writable) return Promise.reject(new Error("Not connected"));
    return new Promise((resolve) => {
      if (stdin.write(this.#o.codec.serializeMessage(message))) resolve();
      else stdin.once("drain", resolve);
    });
  }

  close(): Promise<void> {
    this.#stopping ??= this.#stop().finally(() => this.#markEnded());
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const child = this.#child;
    const pid = child?.pid;
    if (!child || pid === undefined) return;
    const grace = this.#o.stopGraceMs;
    const ended = () => this.#exited && !running(pid);
    try {
      child.stdin?.end();
    } catch {
      // Already closed.
    }
    if (!(await waitFor(ended, grace))) {
      signal(pid, "SIGTERM");
      if (!(await waitFor(ended, grace))) {
        signal(pid, "SIGKILL");
        await waitFor(ended, 1_000);
      }
    }
    untrack(pid);
    this.#reader.clear();
  }
}

/** Resolves true once `done()` holds (checked every 20 ms), false after `ms`. */
async function waitFor(done: () => boolean, ms: number): Promise<boolean> {
  const end = performance.now() + ms;
  while (!done()) {
    if (performance.now() >= end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

// ---- the servers of this process that are not known to have ended, and the last resort ----

/** Pids of the servers spawned and not yet known ended (each leads its own group). */
const live = new Set<number>();
/** Marks this module's listeners, so that copies of it (two versions loaded) tell theirs from the host's. */
const OURS = Symbol.for("keel.plugin-mcp.endServers");
const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
type Sig = (typeof SIGNALS)[number];
const ours = (fn: () => void) => Object.assign(fn, { [OURS]: true });
const onSignal: Record<Sig, () => void> = {
  SIGINT: ours(() => lastResortOnSignal("SIGINT")),
  SIGTERM: ours(() => lastResortOnSignal("SIGTERM")),
  SIGHUP: ours(() => lastResortOnSignal("SIGHUP")),
};
const onExit = ours(() => endServersNow());
let hooked = false;
/**
 * The async context this module was loaded in (the config's import, outside any plugin's
 * code). The first listener of a signal creates the handle every listener of that signal then
 * runs in: made in a plugin's fault scope, the host's own `process.exit` in its SIGINT
 * handler would be blamed on that plugin (KEEL_PROCESS_FAULT).
 */
const outsidePlugins = AsyncLocalStorage.snapshot();

function track(pid: number): void {
  live.add(pid);
  if (hooked) return;
  hooked = true;
  outsidePlugins(() => {
    process.on("exit", onExit);
    // First in line: when it runs, every other listener of the signal is still registered (a `once` one too).
    for (const s of SIGNALS) process.prependListener(s, onSignal[s]);
  });
}

function untrack(pid: number): void {
  live.delete(pid);
  if (!live.size) unhook();
}

function unhook(): void {
  if (!hooked) return;
  hooked = false;
  process.off("exit", onExit);
  for (const s of SIGNALS) process.off(s, onSignal[s]);
}

/**
 * A signal arrived. When the host listens to it too, the host decides (its way out runs the
 * `exit` event); otherwise its default action would end the process at once, with no `exit`
 * event: end the servers first, then let that action happen.
 */
function lastResortOnSignal(sig: Sig): void {
  if (process.listeners(sig).some((l) => !(l as { [OURS]?: boolean })[OURS])) return;
  endServersNow();
  unhook();
  // Another copy of this module may still listen: the last one lets the default action happen.
  if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
}

/**
 * End every server of this process not known to have ended, synchronously: SIGTERM to each
 * group, up to EXIT_WAIT_MS for them to go, SIGKILL to what is left.
 * Contract: returns within EXIT_WAIT_MS plus the time of the checks; never throws.
 */
export function endServersNow(): void {
  if (!live.size) return;
  const pids = [...live];
  live.clear();
  for (const pid of pids) signal(pid, "SIGTERM");
  const end = Date.now() + EXIT_WAIT_MS;
  while (pids.some(running) && Date.now() < end) sleepSync(5);
  for (const pid of pids) signal(pid, "SIGKILL");
}

/** Pids of the servers this process has spawned and not yet seen end (for tests and diagnostics). */
export function liveServerPids(): number[] {
  return [...live];
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(PROCESS_GROUPS ? -pid : pid, sig);
  } catch {
    // Gone already.
  }
}

/**
 * Whether anything of server `pid` still runs: on POSIX any process of its group (on Linux
 * not counting zombies, which have ended but not been reaped), else the process itself.
 */
function running(pid: number): boolean {
  try {
    process.kill(PROCESS_GROUPS ? -pid : pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  return process.platform === "linux" ? liveInGroup(pid) : true;
}

/** Linux: a process of group `pgid` that is not a zombie. */
function liveInGroup(pgid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true;
  }
  for (const e of entries) {
    if (e.charCodeAt(0) < 48 || e.charCodeAt(0) > 57) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, "latin1");
      // Fields after the command name (which may hold spaces and parentheses): state ppid pgrp …
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ", 3);
      if (Number(pgrp) === pgid && state !== "Z" && state !== "X") return true;
    } catch {
      // Gone meanwhile.
    }
  }
  return false;
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}
