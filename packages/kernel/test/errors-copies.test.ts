/**
 * Two copies of the kernel in one process (an application bundled with the kernel inside it,
 * and a store loaded by name from node_modules with its own): each copy's KeelError is a
 * KeelError to the other, so `isKeelError(err, code)` and `instanceof KeelError` decide the same
 * whichever copy threw. Node loads the two copies (one file imported under two URLs), in a
 * process of its own.
 */
import { spawnSync } from "node:child_process";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

const ERRORS = pathToFileURL(new URL("../src/errors.ts", import.meta.url).pathname).href;

/** What `body` prints, run with `a` and `b` two copies of the kernel's errors module. */
function withTwoCopies(body: string): unknown {
  const script = `const a = await import(${JSON.stringify(`${ERRORS}?copy=a`)});
const b = await import(${JSON.stringify(`${ERRORS}?copy=b`)});
if (a.KeelError === b.KeelError) throw new Error("one copy, not two");
${body}`;
  const r = spawnSync(process.execPath, ["--no-warnings", "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 30_000,
  });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

describe("KeelError across copies of the kernel", () => {
  it("a KeelError of another copy is a KeelError here, with its code, and ours is one there", () => {
    expect(
      withTwoCopies(`const theirs = new b.KeelError("KEEL_SESSION_BUSY", "held elsewhere");
const ours = new a.KeelError("KEEL_STORE_FAILED", "disk full");
console.log(JSON.stringify([
  theirs instanceof a.KeelError,
  a.isKeelError(theirs),
  a.isKeelError(theirs, "KEEL_SESSION_BUSY"),
  a.isKeelError(theirs, "KEEL_STORE_FAILED"),
  ours instanceof b.KeelError,
  b.isKeelError(ours, "KEEL_STORE_FAILED"),
]));`),
    ).toEqual([true, true, true, false, true, true]);
  });

  it("an Error that only looks like one (name and code) is not one, nor is a Proxy whose traps throw", () => {
    expect(
      withTwoCopies(`const lookalike = Object.assign(new Error("KEEL_SESSION_BUSY: x"), { name: "KeelError", code: "KEEL_SESSION_BUSY" });
const trap = () => { throw new Error("trap"); };
const hostile = new Proxy({}, { get: trap, has: trap, getPrototypeOf: trap, getOwnPropertyDescriptor: trap });
console.log(JSON.stringify([
  lookalike instanceof a.KeelError,
  a.isKeelError(lookalike, "KEEL_SESSION_BUSY"),
  a.isKeelError(hostile),
  (() => { try { return new Proxy(new Error("x"), { has: trap }) instanceof a.KeelError; } catch { return "threw"; } })(),
  a.isKeelError(null),
  a.isKeelError("KEEL_SESSION_BUSY"),
  a.errorMessage(new b.KeelError("KEEL_SESSION_BUSY", "held")).startsWith("KEEL_SESSION_BUSY"),
]));`),
    ).toEqual([false, false, false, false, false, false, true]);
  });
});
