/** whenAborted: one listener per signal, with addEventListener's once semantics. */
import { describe, expect, it } from "vitest";
import { whenAborted } from "../src/abort-watch.ts";

describe("whenAborted", () => {
  it("calls in the order added, skips what was removed before its turn, runs what is added during the abort (as EventTarget does)", () => {
    const ctrl = new AbortController();
    const seen: string[] = [];
    whenAborted(ctrl.signal, () => seen.push("a"));
    const offB = whenAborted(ctrl.signal, () => seen.push("b"));
    whenAborted(ctrl.signal, () => {
      seen.push("c");
      offD();
      whenAborted(ctrl.signal, () => seen.push("late"));
    });
    const offD = whenAborted(ctrl.signal, () => seen.push("d"));
    whenAborted(ctrl.signal, () => seen.push("e"));
    offB();
    // Another signal in between gets its own listener; both still work.
    const other = new AbortController();
    whenAborted(other.signal, () => seen.push("other"));
    whenAborted(ctrl.signal, () => seen.push("f"));
    ctrl.abort();
    expect(seen).toEqual(["a", "c", "e", "f", "late"]);
    // What addEventListener itself does, for the same steps.
    const ref = new AbortController();
    const want: string[] = [];
    ref.signal.addEventListener("abort", () => want.push("a"), { once: true });
    const b = () => want.push("b");
    ref.signal.addEventListener("abort", b, { once: true });
    const d = () => want.push("d");
    ref.signal.addEventListener(
      "abort",
      () => {
        want.push("c");
        ref.signal.removeEventListener("abort", d);
        ref.signal.addEventListener("abort", () => want.push("late"), { once: true });
      },
      { once: true },
    );
    ref.signal.addEventListener("abort", d, { once: true });
    ref.signal.addEventListener("abort", () => want.push("e"), { once: true });
    ref.signal.removeEventListener("abort", b);
    ref.signal.addEventListener("abort", () => want.push("f"), { once: true });
    ref.abort();
    expect(seen).toEqual(want);
    other.abort();
    expect(seen).toEqual([...want, "other"]);
    whenAborted(ctrl.signal, () => seen.push("after"));
    expect(seen).toEqual([...want, "other"]);
  });
});
