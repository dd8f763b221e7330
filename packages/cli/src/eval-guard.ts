/**
 * A `keel eval` that does not finish never exits 0. While the cases run and the report is
 * written, `process.exit()` throws KEEL_EVAL_UNFINISHED instead of exiting (a scorer that calls
 * it fails its case under its own name; a tool gets an error result), and an exit that still
 * happens before the run finished (an exit function taken before the run, the event loop left
 * with nothing to wait on) ends the process non-zero, saying how to continue.
 */
import { KeelError } from "@keel/kernel";
import { heldExit } from "./exit.ts";
import type { CliEnv } from "./stdio.ts";

/** The guard of one eval run. Contract: `finished()` once the report is out; `release()` always, in a finally. */
export interface EvalRunGuard {
  finished(): void;
  release(): void;
}

/**
 * Guard the process while an eval runs. `hint` says how to continue (the --resume command).
 * Contract: process.exit is restored by `release()`; an exit before `finished()` sets a zero
 * exit code to 1 and writes KEEL_EVAL_UNFINISHED with the hint to stderr.
 */
export function guardEvalRun(io: CliEnv, hint: () => string): EvalRunGuard {
  const original = process.exit;
  let done = false;
  let released = false;
  const refused = function exit(code?: number | string | null): never {
    throw new KeelError(
      "KEEL_EVAL_UNFINISHED",
      `process.exit(${code ?? ""}) was called while keel eval ran its cases; it was refused.`,
    );
  } as typeof process.exit;
  process.exit = refused;
  heldExit.original = original;
  const onExit = (code: number) => {
    if (done) return;
    try {
      io.err(
        `\nkeel eval: ${new KeelError("KEEL_EVAL_UNFINISHED", `the process is ending (exit code ${code}) before every case was scored; no report was written; ${hint()}.`).message}\n`,
      );
    } catch {
      // Nowhere to say it: the exit code still says it.
    }
    if (!process.exitCode) process.exitCode = 1;
  };
  process.on("exit", onExit);
  return {
    finished() {
      done = true;
    },
    release() {
      if (released) return;
      released = true;
      if (process.exit === refused) process.exit = original;
      heldExit.original = undefined;
      process.off("exit", onExit);
    },
  };
}
