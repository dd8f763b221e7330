/**
 * errorMessage, the one reading of a thrown value: errors JSON cannot see (a list of them, an
 * AggregateError's, another realm's, a non-enumerable message) are read by their messages, never
 * printed as `{}` or `[{}]` (an observer's failure was).
 */
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { errorMessage } from "../src/index.ts";

describe("errorMessage", () => {
  it("reads errors wherever they are", () => {
    expect(errorMessage(new Error("boom"))).toBe("boom");
    expect(errorMessage([new Error("exporter down"), new TypeError("queue full")])).toBe("exporter down; queue full");
    expect(errorMessage(new AggregateError([new Error("a"), new Error("b")]))).toBe("a; b");
    expect(errorMessage(new AggregateError([new Error("a")], "all failed"))).toBe("all failed: a");
    expect(errorMessage(Array.from({ length: 8 }, (_, i) => new Error(`e${i}`)))).toBe(
      "e0; e1; e2; e3; e4; and 3 more",
    );
    expect(errorMessage(runInNewContext('new Error("from another realm")'))).toBe("from another realm");
    expect(errorMessage(Object.defineProperty({}, "message", { value: "hidden message" }))).toBe("hidden message");
    expect(errorMessage({ code: "E1", inner: new Error("deep") })).toBe('{"code":"E1","inner":"deep"}');
    expect(errorMessage(new Error("", { cause: new Error("the cause") }))).toBe("Error: the cause");
    expect(errorMessage(new RangeError())).toBe("RangeError");
    expect(errorMessage({})).toBe("[object Object]");
    expect(errorMessage([])).toBe("[]");
  });

  it("other values as before, and never throws", () => {
    expect(errorMessage("text")).toBe("text");
    expect(errorMessage(undefined)).toBe("undefined");
    expect(errorMessage(null)).toBe("null");
    expect(errorMessage(42)).toBe("42");
    expect(errorMessage(10n)).toBe("10");
    expect(errorMessage(function load() {})).toBe("a function (load)");
    const trap = new Proxy(
      {},
      {
        get: () => {
          throw new Error("trap");
        },
        getPrototypeOf: () => {
          throw new Error("trap");
        },
      },
    );
    expect(typeof errorMessage(trap)).toBe("string");
    expect(
      errorMessage({
        toJSON: () => {
          throw new Error("x");
        },
      }),
    ).toBe("[object Object]");
  });
});
