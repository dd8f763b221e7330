/**
 * Faults through real AI SDK providers (@ai-sdk/anthropic, @ai-sdk/openai chat and responses,
 * @ai-sdk/openai-compatible) against the wire server, mirroring the native providers' fault tests:
 * retries before the stream starts (429 with retry-after, 5xx, 529/503), classified errors,
 * bounded retries with notices after it started (reset, in-band error, truncation), stalls and
 * first-byte timeouts, a capped retry-after, and aborts that close the HTTP connection.
 */
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { ModelProvider } from "@keel/kernel";
import { startWireServer, type WireServer } from "@keel/wire-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ask, FAST, run } from "../../providers/test/support/helpers.ts";
import { type AiSdkModelOptions, aiSdkModel } from "../src/index.ts";

let server: WireServer;

type Make = (o?: AiSdkModelOptions) => ModelProvider;
const flavours: Array<{ name: string; make: Make; overloadedStatus: number }> = [
  {
    name: "@ai-sdk/anthropic",
    overloadedStatus: 529,
    make: (o = {}) =>
      aiSdkModel(createAnthropic({ apiKey: "k", baseURL: `${server.anthropicBaseURL}/v1` })("claude-sonnet-4-6"), {
        ...FAST,
        ...o,
      }),
  },
  {
    name: "@ai-sdk/openai chat",
    overloadedStatus: 503,
    make: (o = {}) =>
      aiSdkModel(createOpenAI({ apiKey: "k", baseURL: server.openaiBaseURL }).chat("gpt-4o"), { ...FAST, ...o }),
  },
  {
    name: "@ai-sdk/openai responses",
    overloadedStatus: 503,
    make: (o = {}) =>
      aiSdkModel(createOpenAI({ apiKey: "k", baseURL: server.openaiBaseURL })("gpt-4o"), { ...FAST, ...o }),
  },
  {
    name: "@ai-sdk/openai-compatible",
    overloadedStatus: 503,
    make: (o = {}) =>
      aiSdkModel(
        createOpenAICompatible({ name: "wire", apiKey: "k", baseURL: server.openaiBaseURL, includeUsage: true })(
          "local-model",
        ),
        {
          ...FAST,
          ...o,
        },
      ),
  },
];

/** Requests received from now on. */
function mark(): () => typeof server.requests {
  const from = server.requests.length;
  return () => server.requests.slice(from);
}

describe.each(flavours)("$name faults", ({ make, overloadedStatus }) => {
  beforeAll(async () => {
    server = await startWireServer();
  });
  afterAll(() => server.close());

  describe("before the stream starts: re-sent as the official SDKs do", () => {
    it("re-sends after a 429 with retry-after, then streams", async () => {
      const seen = mark();
      server.enqueue({ error: "rate_limit", retryAfter: "0.01" }, { text: "after the wait" });
      const r = await run(make(), ask("hi"));
      expect(r.error).toBeUndefined();
      expect(r.text).toBe("after the wait");
      expect(seen().map((q) => q.outcome)).toEqual(["http_error", "completed"]);
      expect(seen()[1]!.body).toEqual(seen()[0]!.body);
      expect(r.notices).toEqual([]);
    });

    it(`re-sends after an overloaded ${overloadedStatus}`, async () => {
      const seen = mark();
      server.enqueue({ error: "overloaded", retryAfter: "0.01" }, { text: "capacity back" });
      const r = await run(make(), ask("hi"));
      expect(r.text).toBe("capacity back");
      expect(seen()).toHaveLength(2);
    });

    it("gives rate_limited with status and retry-after (HTTP date too) once the retries are spent", async () => {
      const seen = mark();
      server.enqueue(...Array(3).fill({ error: "rate_limit", retryAfter: "0.01" }));
      const r = await run(make({ maxRetries: 2 }), ask("hi"));
      expect(seen()).toHaveLength(3);
      expect(r.error).toMatchObject({ errorClass: "rate_limited", status: 429, retryAfterMs: 10 });
      expect(r.error!.retryable).toBe(true);
      server.enqueue({ error: "rate_limit", retryAfter: new Date(Date.now() + 3_600_000).toUTCString() });
      const dated = await run(make({ maxRetries: 0 }), ask("hi"));
      expect(dated.error).toMatchObject({ errorClass: "rate_limited", status: 429 });
      expect(dated.error!.retryAfterMs).toBeGreaterThan(3_000_000);
    });

    it(`gives overloaded (status ${overloadedStatus}) once the retries are spent`, async () => {
      server.enqueue(...Array(2).fill({ error: "overloaded", retryAfter: "0.01" }));
      const r = await run(make({ maxRetries: 1 }), ask("hi"));
      expect(r.error).toMatchObject({ errorClass: "overloaded", status: overloadedStatus });
    });

    it("gives auth for a 401, without retrying", async () => {
      const seen = mark();
      server.enqueue({ error: "auth" });
      const r = await run(make(), ask("hi"));
      expect(seen()).toHaveLength(1);
      expect(r.error).toMatchObject({ errorClass: "auth", status: 401 });
      expect(r.error!.retryable).toBe(false);
    });

    it("gives context_too_long for the provider's context-length 400, once", async () => {
      const seen = mark();
      server.enqueue({ error: "context_length" });
      const r = await run(make(), ask("hi"));
      expect(seen()).toHaveLength(1);
      expect(r.error).toMatchObject({ errorClass: "context_too_long", status: 400 });
    });

    it("gives invalid_request for another 400", async () => {
      server.enqueue({ error: "invalid_request", message: "tools.0.name: String should match pattern" });
      const r = await run(make(), ask("hi"));
      expect(r.error).toMatchObject({ errorClass: "invalid_request", status: 400 });
      expect(r.error!.message).toContain("tools.0.name");
    });

    it("gives network when nothing listens (after its retries)", async () => {
      const closed = await startWireServer();
      const url = closed.openaiBaseURL;
      await closed.close();
      const p = aiSdkModel(createOpenAI({ apiKey: "k", baseURL: url }).chat("gpt-4o"), { ...FAST, maxRetries: 0 });
      const r = await run(p, ask("hi"));
      expect(r.error).toMatchObject({ errorClass: "network", retryable: true });
    });
  });

  describe("after the stream started: bounded retries with notices", () => {
    for (const type of ["cut", "error_event", "truncate"] as const) {
      it(`retries a stream that failed by ${type}, voiding its deltas with a retry notice`, async () => {
        const seen = mark();
        server.enqueue(
          { text: "first try that breaks", chunks: 6, fault: { type, afterEvents: 6 } },
          { text: "second try" },
        );
        const r = await run(make(), ask("hi"));
        expect(r.error).toBeUndefined();
        expect(seen().map((q) => q.outcome)).toEqual([
          type === "cut" ? "cut" : type === "error_event" ? "error_event" : "truncated",
          "completed",
        ]);
        expect(r.notices).toHaveLength(1);
        expect(r.notices[0]).toMatchObject({ type: "notice", kind: "retry", data: { attempt: 2, of: 3 } });
        const noticeAt = r.events.indexOf(r.notices[0]!);
        expect(r.events.slice(0, noticeAt).filter((e) => e.type === "text_delta").length).toBeGreaterThan(0);
        expect(r.response!.message.content).toEqual([{ type: "text", text: "second try" }]);
      });
    }

    it("gives up after the configured number of retries with a classified error", async () => {
      const seen = mark();
      server.enqueue(...Array(3).fill({ text: "never finishes", fault: { type: "truncate" } }));
      const r = await run(make({ streamRetries: 2 }), ask("hi"));
      expect(seen()).toHaveLength(3);
      expect(r.notices.map((n) => n.kind)).toEqual(["retry", "retry"]);
      expect(r.error).toMatchObject({ errorClass: "network" });
      expect(r.response).toBeUndefined();
    });

    it("cuts a stalled stream after idleTimeoutMs and retries it", async () => {
      const seen = mark();
      server.enqueue({ text: "stalls here", chunks: 4, fault: { type: "hang", afterEvents: 5 } }, { text: "flowing" });
      const r = await run(make({ idleTimeoutMs: 50 }), ask("hi"));
      expect(r.error).toBeUndefined();
      expect(r.notices).toHaveLength(1);
      expect(r.notices[0]!.message).toContain("stalled");
      expect(r.response!.message.content).toEqual([{ type: "text", text: "flowing" }]);
      expect((await server.settled(seen()[0]!.index)).outcome).toBe("client_closed");
    });

    it("cuts a request whose headers never come after firstByteTimeoutMs: a `timeout` error after an info notice", async () => {
      const seen = mark();
      server.enqueue({ hang: "before_headers" });
      const r = await run(make({ firstByteTimeoutMs: 1_000 }), ask("hi"));
      expect(r.error).toMatchObject({ errorClass: "timeout", retryable: true });
      expect(r.notices.map((n) => [n.kind, n.data?.reason])).toEqual([["info", "timeout"]]);
      expect(r.notices[0]!.message).toContain("first-byte timeout");
      expect(seen()).toHaveLength(1);
      expect((await server.settled(seen()[0]!.index)).outcome).toBe("client_closed");
    });

    it("does not wait for a retry-after beyond maxRetryAfterMs: one request, a notice, the error with its retry-after", async () => {
      const seen = mark();
      server.enqueue({ error: "rate_limit", retryAfter: "3600" }, { text: "not reached" });
      const r = await run(make({ maxRetries: 2 }), ask("hi"));
      expect(seen()).toHaveLength(1);
      expect(r.error).toMatchObject({ errorClass: "rate_limited", retryAfterMs: 3_600_000 });
      expect(r.notices.map((n) => n.data?.reason)).toEqual(["retry_after_capped"]);
      expect((await run(make(), ask("hi"))).text).toBe("not reached");
    });

    it("does not retry when streamRetries is 0", async () => {
      const seen = mark();
      server.enqueue({ text: "reset me", fault: { type: "cut", afterEvents: 2 } });
      const r = await run(make({ streamRetries: 0 }), ask("hi"));
      expect(seen()).toHaveLength(1);
      expect(r.error).toMatchObject({ errorClass: "network" });
    });

    it("does not retry an in-band error that is not transient", async () => {
      const seen = mark();
      server.enqueue({ text: "bad", fault: { type: "error_event", afterEvents: 2, errorKind: "invalid_request" } });
      const r = await run(make(), ask("hi"));
      expect(seen()).toHaveLength(1);
      expect(r.notices).toEqual([]);
      expect(r.error).toMatchObject({ errorClass: "invalid_request" });
    });
  });

  describe("abort", () => {
    it("mid-stream: ends with `aborted` and the server sees the connection close", async () => {
      const seen = mark();
      server.enqueue({ text: "one two three four", chunks: 4, fault: { type: "hang", afterEvents: 6 } });
      const ac = new AbortController();
      const r = await run(make(), ask("hi"), ac.signal, (e) => {
        if (e.type === "text_delta") ac.abort();
      });
      expect(r.error).toMatchObject({ errorClass: "aborted" });
      expect(r.response).toBeUndefined();
      expect((await server.settled(seen()[0]!.index)).outcome).toBe("client_closed");
    });

    it("before the response headers: the pending request is cancelled", async () => {
      const seen = mark();
      server.enqueue({ hang: "before_headers" });
      const ac = new AbortController();
      const pending = run(make(), ask("hi"), ac.signal);
      while (seen().length === 0) await new Promise((r) => setTimeout(r, 5));
      ac.abort();
      const r = await pending;
      expect(r.error).toMatchObject({ errorClass: "aborted" });
      expect((await server.settled(seen()[0]!.index)).outcome).toBe("client_closed");
    });
  });
});
