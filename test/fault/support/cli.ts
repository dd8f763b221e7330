/**
 * Support for the CLI-hygiene fault scenarios: a config written into a temp folder, the real
 * `keel` binary spawned against it (at most two at once), and the checks every scenario shares.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { expect } from "vitest";
import { KEEL_BIN, offlineEnv } from "../../../packages/cli/test/support/run-keel.ts";
import { limited } from "./limit.ts";

/** Root of every scenario's temp folder (removed by the test file). */
export const ROOT = mkdtempSync(join(tmpdir(), "keel-fault-cli-"));

/** Config loading deadline used by the scenarios (the CLI's default is 10 s). */
export const LOAD_TIMEOUT_MS = 1_000;

/** A fresh folder holding `files` (path → text). */
export function project(files: Record<string, string>): string {
  const dir = mkdtempSync(join(ROOT, "p-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

/** How a run ended, and how long it took. */
export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** Milliseconds from our closing stdout (closeStdoutAfterLines) to the child's exit. */
  msAfterClose?: number;
}

/** What to do with the child's stdout/stderr. */
export interface RunOptions {
  cwd: string;
  env?: Record<string, string>;
  /** Close our end of stdout before the child writes (`keel … | true`). */
  closeStdout?: boolean;
  /** Close our end of stderr too. */
  closeStderr?: boolean;
  /** Close our end of stdout once this many lines arrived (`keel … | head -n N`). */
  closeStdoutAfterLines?: number;
  /** Remove the (empty) working folder just before keel starts in it. */
  removeCwdFirst?: boolean;
  /** Kill the child after this long (a scenario that hangs fails instead of stalling the suite). */
  killAfterMs?: number;
}

/** The env every scenario runs with: no provider keys, its own home, a short loading deadline. */
export function scenarioEnv(cwd: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return offlineEnv({ KEEL_HOME: join(cwd, ".keel-home"), KEEL_CONFIG_TIMEOUT_MS: String(LOAD_TIMEOUT_MS), ...extra });
}

/** Spawn the real `keel args…` in `options.cwd`. */
export function keel(args: string[], options: RunOptions): Promise<Run> {
  return limited(
    () =>
      new Promise<Run>((resolve, reject) => {
        const started = performance.now();
        const [cmd, argv] = options.removeCwdFirst
          ? ["/bin/sh", ["-c", 'rmdir "$PWD" && exec "$0" "$@"', process.execPath, KEEL_BIN, ...args]]
          : [process.execPath, [KEEL_BIN, ...args]];
        const child = spawn(cmd, argv, {
          cwd: options.cwd,
          env: scenarioEnv(options.cwd, options.env),
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        let closedAt: number | undefined;
        if (options.closeStdout) child.stdout.destroy();
        if (options.closeStderr) child.stderr.destroy();
        child.stdout.on("data", (d: Buffer) => {
          stdout += d.toString();
          if (
            options.closeStdoutAfterLines !== undefined &&
            stdout.split("\n").length > options.closeStdoutAfterLines &&
            closedAt === undefined
          ) {
            closedAt = performance.now();
            child.stdout.destroy();
          }
        });
        child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        const killer = setTimeout(() => child.kill("SIGKILL"), options.killAfterMs ?? 30_000);
        child.on("error", reject);
        child.on("close", (code, signal) => {
          clearTimeout(killer);
          const now = performance.now();
          resolve({
            code,
            signal,
            stdout,
            stderr,
            ms: now - started,
            ...(closedAt !== undefined ? { msAfterClose: now - closedAt } : {}),
          });
        });
      }),
  );
}

/** No stack trace: no `    at fn (file:line:col)` frame and no Node crash banner. */
export function expectNoStack(text: string): void {
  expect(text).not.toMatch(/^\s+at .*:\d+:\d+\)?$/m);
  expect(text).not.toContain("node:internal");
  expect(text).not.toMatch(/Unhandled 'error' event|Node\.js v\d+/);
}

/**
 * A config scenario's promise: exit 2 within `withinMs` (default 15 s: a bound against hangs,
 * loose enough for a loaded 2-core machine), nothing on stdout, and stderr gives the
 * code, the file, the path (`at <path>`) and each of `says`, with no stack trace.
 */
export function expectLocated(
  run: Run,
  want: { code: string; file: string; path?: string; says?: string[]; withinMs?: number },
): void {
  expect(run.code, run.stderr).toBe(2);
  expect(run.ms).toBeLessThan(want.withinMs ?? 15_000);
  expect(run.stdout).toBe("");
  expect(run.stderr).toContain(want.code);
  expect(run.stderr).toContain(want.file);
  if (want.path !== undefined) expect(run.stderr).toContain(`at ${want.path}`);
  for (const s of want.says ?? []) expect(run.stderr).toContain(s);
  expectNoStack(run.stderr);
}
