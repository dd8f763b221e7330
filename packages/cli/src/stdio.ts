/**
 * The process's stdout and stderr for the CLI, safe when the reader goes away
 * (`keel sessions list | head -1`): a failed write (EPIPE) is never a crash or a stack trace;
 * output stops, and a running turn is cancelled as SIGPIPE would have ended a classic tool.
 */
import { fstatSync } from "node:fs";
import type { Streams } from "./render.ts";

/** What the command runs against. */
export interface CliEnv extends Streams {
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdin: NodeJS.ReadableStream;
  /** Aborts when stdout's reader has gone away (EPIPE): a running turn is cancelled, output stops. */
  readerGone?: AbortSignal;
}

/**
 * The exit status when stdout's reader went away before a command that writes there finished
 * (128 + SIGPIPE, what a shell reports for a tool SIGPIPE killed). A command that had finished
 * its work keeps its own status (0 for list, show, inspect, schema).
 */
export const READER_GONE_EXIT = 141;

/** A writer that drops its text once `stream` failed, and calls `gone` on the first failure. */
function guardedWriter(
  stream: NodeJS.WriteStream,
  gone: (err: unknown) => void,
  write: (text: string) => unknown = (t) => stream.write(t),
): (text: string) => void {
  let failed = false;
  const fail = (err: unknown) => {
    if (failed) return;
    failed = true;
    gone(err);
  };
  stream.on("error", fail);
  return (text) => {
    if (failed || stream.destroyed || !stream.writable) return fail(new Error("stream closed"));
    try {
      write(text);
    } catch (err) {
      fail(err);
    }
  };
}

/**
 * Keep stdout for the CLI's own output (the answer, `--json`'s events): from now on, what other
 * code writes to `process.stdout` (a plugin's or tool's console.log) goes to stderr. Returns the
 * write of the real stdout. Contract: call once per process.
 */
function divertStdout(): (text: string) => boolean {
  const own = process.stdout.write.bind(process.stdout) as (text: string) => boolean;
  const toStderr = (...args: unknown[]) => (process.stderr.write as (...a: unknown[]) => boolean)(...args);
  process.stdout.write = toStderr as typeof process.stdout.write;
  return own;
}

/** The CLI's environment from this process. Contract: writes never throw nor crash the process; only `out` writes to stdout. */
export function processIo(): CliEnv {
  const ctl = new AbortController();
  const ownStdout = divertStdout();
  return {
    // A removed working folder makes process.cwd() throw; loading then says so (exit 2).
    cwd: cwdOrPwd(),
    env: process.env,
    stdin: process.stdin,
    out: guardedWriter(process.stdout, (err) => ctl.abort(err), ownStdout),
    // stderr alone going away only mutes it; `2>&1 | head` (one pipe for both) means the reader is gone.
    err: guardedWriter(process.stderr, (err) => samePipe() && ctl.abort(err)),
    readerGone: ctl.signal,
  };
}

function cwdOrPwd(): string {
  try {
    return process.cwd();
  } catch {
    return process.env.PWD || "/";
  }
}

/** True when stdout and stderr are the same pipe or file. */
function samePipe(): boolean {
  try {
    const [o, e] = [fstatSync(1), fstatSync(2)];
    return o.dev === e.dev && o.ino === e.ino;
  } catch {
    return false;
  }
}

/** Call `fn` once stdout's reader is gone (now, if it already is). Contract: returns the unsubscribe. */
export function onReaderGone(io: Pick<CliEnv, "readerGone">, fn: () => void): () => void {
  const signal = io.readerGone;
  if (!signal) return () => {};
  if (signal.aborted) {
    fn();
    return () => {};
  }
  signal.addEventListener("abort", fn, { once: true });
  return () => signal.removeEventListener("abort", fn);
}

/**
 * The command's exit status once it returned `status`.
 * Contract: READER_GONE_EXIT when it failed (1) after stdout's reader went away; else `status`.
 */
export function statusAfterOutput(io: Pick<CliEnv, "readerGone">, status: number): number {
  return io.readerGone?.aborted && status === 1 ? READER_GONE_EXIT : status;
}
