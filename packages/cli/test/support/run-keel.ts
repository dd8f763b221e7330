/** Run the real `keel` binary in a child process. */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const KEEL_BIN = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "bin", "keel.js");
export const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

/** What a run printed and how it exited. */
export interface KeelRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Env without provider keys, so runs are offline unless a test sets one. */
export function offlineEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "KEEL_OFFLINE"])
    delete env[k];
  return { ...env, ...extra };
}

/** A stdin line written once stdout or stderr contains `after` (what the line must not overtake). */
export type StdinLine = string | { line: string; after: string };

/**
 * Spawn `keel args…`; `stdin` lines are written one by one (each after `gapMs`, and a line with
 * `after` only once the output holds that text: a wait on what happened, not on time), then stdin is
 * ended, unless `keepStdin` (default: true for `chat` driven by onStderr/onStdout, which write to
 * the child's stdin themselves). `keel run` reads piped stdin, so an open one would make it wait.
 */
export function runKeel(
  args: string[],
  options: {
    cwd?: string;
    env?: NodeJS.ProcessEnv;
    stdin?: StdinLine[];
    gapMs?: number;
    keepStdin?: boolean;
    onStderr?: (chunk: string, child: ReturnType<typeof spawn>) => void;
    onStdout?: (chunk: string, child: ReturnType<typeof spawn>) => void;
  } = {},
): Promise<KeelRun> {
  const keepStdin = options.keepStdin ?? (args.includes("chat") && !!(options.onStderr || options.onStdout));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [KEEL_BIN, ...args], {
      cwd: options.cwd ?? REPO,
      env: options.env ?? offlineEnv(),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      options.onStdout?.(d.toString(), child);
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
      options.onStderr?.(d.toString(), child);
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    if (options.stdin) {
      void (async () => {
        for (const item of options.stdin!) {
          await new Promise((r) => setTimeout(r, options.gapMs ?? 0));
          const { line, after } = typeof item === "string" ? { line: item, after: undefined } : item;
          while (after !== undefined && !`${stdout}${stderr}`.includes(after) && child.exitCode === null)
            await new Promise((r) => setTimeout(r, 20));
          child.stdin.write(`${line}\n`);
        }
        if (!keepStdin) child.stdin.end();
      })();
    } else if (!keepStdin) child.stdin.end();
  });
}

/** Run `tasks` with at most `limit` at a time (2 cores: spawning all at once only adds contention). */
export async function pool<T, R>(items: readonly T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await task(items[i]!);
      }
    }),
  );
  return out;
}
