/**
 * Support of the adversarial scenarios of classes 1, 6 and 8 (hangs, crashes, CLI hygiene):
 * the real `keel` binary with a writable stdin, raw (non-UTF-8) argv bytes, signals while it
 * runs, and a clock; at most two CLIs at once.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { REPO, scenario } from "./hangs.ts";

const KEEL_BIN = join(REPO, "packages", "cli", "bin", "keel.js");
/** Import specifier of the kernel's sources for a config in a temp folder. */
export const KERNEL = pathToFileURL(join(REPO, "packages/agent/src/node/index.ts")).href;

/** A folder holding `agent.config.mjs` (`source`, an ES module) and its own home. */
export const project = scenario;

/** How a run ended. */
export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
  killed: boolean;
  duringError?: string;
}

/** Live view of a running child for `during`. */
export interface Live {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
}

/** Options of `keel()`. */
export interface KeelOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Lines written to stdin up front; stdin stays open unless `endStdin`. */
  stdin?: string[];
  endStdin?: boolean;
  /** Raw argv bytes (any byte but NUL) after the command words, passed through /bin/sh. */
  rawArgs?: Buffer[];
  /** Destroy our end of stdout before the child writes. */
  closeStdout?: boolean;
  capMs?: number;
  during?: (live: Live) => unknown;
}

let busy = 0;
const queue: Array<() => void> = [];
async function slot(): Promise<void> {
  if (busy < 2) {
    busy++;
    return;
  }
  await new Promise<void>((r) => queue.push(r));
}
function release(): void {
  const next = queue.shift();
  if (next) next();
  else busy--;
}

/** Spawn `keel args…` (SIGKILLed after `capMs`, so a hang fails the test instead of hanging it). */
export async function keel(args: string[], options: KeelOptions): Promise<Run> {
  await slot();
  try {
    return await new Promise<Run>((resolve, reject) => {
      const t0 = performance.now();
      const raw = options.rawArgs ?? [];
      // Raw bytes reach keel's argv through the shell: printf expands octal escapes into the bytes themselves.
      const octal = (b: Buffer) => [...b].map((x) => `\\${x.toString(8).padStart(3, "0")}`).join("");
      const [cmd, argv] = raw.length
        ? [
            "/bin/sh",
            [
              "-c",
              `exec "$0" "$@" ${raw.map((b) => `"$(printf '${octal(b)}')"`).join(" ")}`,
              process.execPath,
              KEEL_BIN,
              ...args,
            ],
          ]
        : [process.execPath, [KEEL_BIN, ...args]];
      const child = spawn(cmd, argv, { cwd: options.cwd, env: options.env, stdio: ["pipe", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      let killed = false;
      let duringError: string | undefined;
      if (options.closeStdout) child.stdout.destroy();
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.stdin.on("error", () => {});
      for (const line of options.stdin ?? []) child.stdin.write(`${line}\n`);
      if (options.endStdin ?? !options.stdin) child.stdin.end();
      const cap = setTimeout(() => {
        killed = true;
        child.kill("SIGKILL");
      }, options.capMs ?? 20_000);
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
      Promise.resolve(options.during?.({ child, stdout: () => stdout, stderr: () => stderr })).catch((err: unknown) => {
        duringError = String(err);
        child.kill("SIGKILL");
      });
    });
  } finally {
    release();
  }
}

/** No Node stack frame and no crash banner. */
export const STACK = /^\s+at .*:\d+:\d+\)?$|node:internal|Node\.js v\d+/m;
