/**
 * A third-party provider that ignores the abort signal Keel passes to doStream (it never hands
 * it to fetch) must still be cut by the idle and first-byte timeouts and by an abort, and its
 * stream cancelled, as the native providers' stalls are: nothing may hang a turn.
 */
import type { LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { describe, expect, it } from "vitest";
import { ask, run } from "../../providers/test/support/helpers.ts";
import { aiSdkModel } from "../src/index.ts";

const finish: LanguageModelV3StreamPart = {
  type: "finish",
  finishReason: { unified: "stop", raw: "stop" },
  usage: {
    inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 2, text: 2, reasoning: 0 },
  },
};

/** A model whose attempts play `scripts` in turn; `hang` streams a delta then never ends. Deaf to abortSignal. */
function deafModel(scripts: Array<"hang" | "never" | "ok">) {
  const cancelled: unknown[] = [];
  let calls = 0;
  const model = {
    specificationVersion: "v3" as const,
    provider: "deaf.chat",
    modelId: "m",
    supportedUrls: {},
    doGenerate: () => Promise.reject(new Error("not used")),
    doStream: () => {
      const script = scripts[calls++];
      // "never": the request itself never answers (no headers), whatever the signal says.
      if (script === "never") return new Promise<never>(() => {});
      const stream = new ReadableStream<LanguageModelV3StreamPart>({
        start(c) {
          c.enqueue({ type: "text-start", id: "t" });
          c.enqueue({ type: "text-delta", id: "t", delta: script === "ok" ? "fine" : "stuck" });
          if (script === "ok") {
            c.enqueue({ type: "text-end", id: "t" });
            c.enqueue(finish);
            c.close();
          }
        },
        cancel(reason) {
          cancelled.push(reason ?? "cancelled");
        },
      });
      return Promise.resolve({ stream });
    },
  };
  return { model, cancelled, calls: () => calls };
}

/** Resolves with `"hung"` when `p` has not settled within `ms` (a guard, not a timing assertion). */
const orHung = <T>(p: Promise<T>, ms = 10_000) =>
  Promise.race([p, new Promise<"hung">((r) => setTimeout(() => r("hung"), ms).unref())]);

describe("a provider deaf to the abort signal", () => {
  it("a stalled stream is cut by idleTimeoutMs, cancelled, and retried", async () => {
    const deaf = deafModel(["hang", "ok"]);
    const r = await orHung(run(aiSdkModel(deaf.model, { idleTimeoutMs: 50, streamBackoffMs: 1 }), ask("hi")));
    expect(r).not.toBe("hung");
    if (r === "hung") return;
    expect(r.notices.map((n) => n.kind)).toEqual(["retry"]);
    expect(r.notices[0]!.message).toContain("stalled");
    expect(r.response!.message.content).toEqual([{ type: "text", text: "fine" }]);
    expect(deaf.calls()).toBe(2);
    expect(deaf.cancelled).toHaveLength(1);
  });

  it("a request that never answers is cut by firstByteTimeoutMs as `timeout`", async () => {
    const deaf = deafModel(["never"]);
    const r = await orHung(run(aiSdkModel(deaf.model, { firstByteTimeoutMs: 50, maxRetries: 0 }), ask("hi")));
    expect(r).not.toBe("hung");
    if (r === "hung") return;
    expect(r.error).toMatchObject({ errorClass: "timeout" });
    expect(r.notices.map((n) => n.data?.reason)).toEqual(["timeout"]);
  });

  it("an abort mid-stream ends the stream as `aborted` and cancels the provider's stream", async () => {
    const deaf = deafModel(["hang"]);
    const ac = new AbortController();
    const p = aiSdkModel(deaf.model, { idleTimeoutMs: 0, firstByteTimeoutMs: 0 });
    const r = await orHung(
      run(p, ask("hi"), ac.signal, (e) => {
        if (e.type === "text_delta") ac.abort();
      }),
    );
    expect(r).not.toBe("hung");
    if (r === "hung") return;
    expect(r.error).toMatchObject({ errorClass: "aborted" });
    expect(deaf.cancelled).toHaveLength(1);
  });

  it("a consumer that walks away (return) cancels the provider's stream without waiting on it", async () => {
    const deaf = deafModel(["hang"]);
    const it = aiSdkModel(deaf.model)
      .stream(ask("hi"), { signal: new AbortController().signal })
      [Symbol.asyncIterator]();
    expect((await it.next()).value).toMatchObject({ type: "text_delta", text: "stuck" });
    const pending = it.next();
    pending.catch(() => {});
    expect(await orHung(Promise.resolve(it.return!()))).toEqual({ done: true, value: undefined });
    expect(deaf.cancelled).toHaveLength(1);
  });
});
