/**
 * Faults, for each wire format (Anthropic, Chat Completions, Responses) through the real SDKs:
 * SDK-level retries before the stream starts (429 with retry-after, 5xx, 529/503), classified
 * errors, bounded retries with notices after the stream started (reset, in-band error,
 * truncation), and aborts that close the HTTP connection.
 */
import { startWireServer, type WireApi, type WireServer } from "@keel/wire-server";
import type { ModelProvider } from "@keel/kernel";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anthropicProvider, openaiProvider } from "../src/index.ts";
import { ask, FAST, run } from "./support/helpers.ts";

let server: WireServer;

type Make = (o?: {
  streamRetries?: number;
  maxRetries?: number;
  idleTimeoutMs?: number;
  firstByteTimeoutMs?: number;
  maxRetryAfterMs?: number;
}) => ModelProvider;
const flavours: Array<{ api: WireApi; make: Make; overloadedStatus: number }> = [
  {
    api: "anthropic",
    overloadedStatus: 529,
    make: (o = {}) =>
      anthropicProvider({ model: "claude-sonnet-4-6", apiKey: "k", baseURL: server.anthropicBaseURL, ...FAST, ...o }),
  },
  {
    api: "chat",
    overloadedStatus: 503,
    make: (o = {}) =>
      openaiProvider({ model: "gpt-4o", api: "chat", apiKey: "k", baseURL: server.openaiBaseURL, ...FAST, ...o }),
  },
  {
    api: "responses",
    overloadedStatus: 503,
    make: (o = {}) =>
      openaiProvider({ model: "gpt-5", api: "responses", apiKey: "k", baseURL: server.openaiBaseURL, ...FAST, ...o }),
  },
];

/** Requests received from now on. */
function mark(): () => typeof server.requests {
  const from = server.requests.length;
  return () => server.requests.slice(from);
}

describe.each(flavours)("$api faults", ({ api, make, overloadedStatus }) => {
  // One server per wire format, so a failure cannot leave answers queued for the next one.
  beforeAll(async () => {
    server = await startWireServer();
  });
  afterAll(() => server.close());

  describe("before the stream starts: the SDK retries", () => {
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

    it("re-sends after a 500 (default backoff, no retry-after)", async () => {
      const seen = mark();
      server.enqueue({ error: "server_error" }, { text: "recovered" });
      const r = await run(make(), ask("hi"));
      expect(r.text).toBe("recovered");
      expect(seen().map((q) => q.outcome)).toEqual(["http_error", "completed"]);
    });

    it(`re-sends after an overloaded ${overloadedStatus}`, async () => {
      const seen = mark();
      server.enqueue({ error: "overloaded", retryAfter: "0.01" }, { text: "capacity back" });
      const r = await run(make(), ask("hi"));
      expect(r.text).toBe("capacity back");
      expect(seen()).toHaveLength(2);
    });

    it("gives rate_limited with status and retry-after once the SDK's retries are spent", async () => {
      const seen = mark();
      server.enqueue(...Array(3).fill({ error: "rate_limit", retryAfter: "0.01" }));
      const r = await run(make({ maxRetries: 2 }), ask("hi"));
      expect(seen()).toHaveLength(3);
      expect(r.error).toMatchObject({ errorClass: "rate_limited", status: 429, retryAfterMs: 10 });
      expect(r.error!.retryable).toBe(true);
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

    it("gives context_too_long for the provider's context-length 400, once (the kernel decides about compaction)", async () => {
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

    it("a stream that stalls on every attempt ends in a `timeout` error after its retries", async () => {
      const seen = mark();
      server.enqueue(...Array(2).fill({ text: "stalls", chunks: 4, fault: { type: "hang", afterEvents: 3 } }));
      const r = await run(make({ idleTimeoutMs: 60, streamRetries: 1 }), ask("hi"));
      expect(seen()).toHaveLength(2);
      expect(r.notices.map((n) => n.kind)).toEqual(["retry", "info"]);
      expect(r.error).toMatchObject({ errorClass: "timeout" });
    });

    it("does not wait for a retry-after beyond maxRetryAfterMs: one request, a notice, the error with its retry-after", async () => {
      const seen = mark();
      server.enqueue({ error: "rate_limit", retryAfter: "3600" }, { text: "not reached" });
      const t0 = performance.now();
      const r = await run(make({ maxRetries: 2 }), ask("hi"));
      expect(performance.now() - t0).toBeLessThan(5_000);
      expect(seen()).toHaveLength(1);
      expect(r.error).toMatchObject({ errorClass: "rate_limited", retryAfterMs: 3_600_000 });
      expect(r.notices.map((n) => n.data?.reason)).toEqual(["retry_after_capped"]);
      expect(r.notices[0]!.message).toContain("not waiting");
      // The unused answer would serve the next test: take it here.
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
      const settled = await server.settled(seen()[0]!.index);
      expect(settled.outcome).toBe("client_closed");
      expect(seen()).toHaveLength(1);
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

    it("during the backoff before a stream retry", async () => {
      const seen = mark();
      server.enqueue({ text: "breaks", fault: { type: "truncate" } }, { text: "never asked" });
      const ac = new AbortController();
      const p = anthropicOrOpenAIWithSlowBackoff(api);
      const r = await run(p, ask("hi"), ac.signal, (e) => {
        if (e.type === "notice") ac.abort();
      });
      expect(r.error).toMatchObject({ errorClass: "aborted" });
      expect(seen()).toHaveLength(1);
      expect(server.pending()).toBe(1); // the second answer was never asked for; drain it
      await run(make(), ask("drain"));
    });
  });
});

function anthropicOrOpenAIWithSlowBackoff(api: WireApi): ModelProvider {
  const o = { maxRetries: 0, streamRetries: 2, streamBackoffMs: 60_000 };
  if (api === "anthropic")
    return anthropicProvider({ model: "claude-sonnet-4-6", apiKey: "k", baseURL: server.anthropicBaseURL, ...o });
  return openaiProvider({
    model: api === "chat" ? "gpt-4o" : "gpt-5",
    api,
    apiKey: "k",
    baseURL: server.openaiBaseURL,
    ...o,
  });
}

describe("responses api: response.failed", () => {
  beforeAll(async () => {
    server = await startWireServer();
  });
  afterAll(() => server.close());

  it("is an in-band failure: retried when transient", async () => {
    server.enqueue(
      { text: "x", fault: { type: "error_event", responsesFailed: true, errorKind: "server_error" } },
      { text: "fine" },
    );
    const r = await run(flavours[2]!.make(), ask("hi"));
    expect(r.notices).toHaveLength(1);
    expect(r.text.endsWith("fine")).toBe(true);
    expect(r.response!.message.content).toEqual([{ type: "text", text: "fine" }]);
  });
});
