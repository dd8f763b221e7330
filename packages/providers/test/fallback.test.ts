/**
 * The fallback chain with real adapters against the wire server: a rate-limited or overloaded
 * provider is frozen with growing backoff, the next one serves, notices say so; other errors
 * and failures after deltas are raised as they are.
 */
import { startWireServer, type WireServer } from "@keel/wire-server";
import { isKeelError, ProviderError, type ModelEvent, type ModelProvider } from "@keel/kernel";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anthropicProvider, fallback, openaiProvider } from "../src/index.ts";
import { ask, run } from "./support/helpers.ts";

let server: WireServer;
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(() => server.close());

const noSdkRetry = { maxRetries: 0, streamRetries: 0 };
const claude = () =>
  anthropicProvider({ model: "claude-sonnet-4-6", apiKey: "k", baseURL: server.anthropicBaseURL, ...noSdkRetry });
const gpt = () =>
  openaiProvider({ model: "gpt-4o", api: "chat", apiKey: "k", baseURL: server.openaiBaseURL, ...noSdkRetry });
const clock = () => {
  const c = { t: 1_000_000, now: () => c.t };
  return c;
};
const apis = (from: number) => server.requests.slice(from).map((r) => r.api);

describe("fallback chain", () => {
  it("fails over on a first-byte timeout of the first provider (a `timeout` error is retryable)", async () => {
    const c = clock();
    const slow = anthropicProvider({
      model: "claude-sonnet-4-6",
      apiKey: "k",
      baseURL: server.anthropicBaseURL,
      ...noSdkRetry,
      // The server never answers; the timeout must still outlast sending the request on a loaded machine.
      firstByteTimeoutMs: 1_500,
    });
    const chain = fallback([slow, gpt()], { baseFreezeMs: 1000, now: c.now });
    const from = server.requests.length;
    server.enqueue({ hang: "before_headers", api: "anthropic" }, { text: "served by gpt", api: "chat" });
    const r = await run(chain, ask("hi"));
    expect(r.error).toBeUndefined();
    expect(r.text).toBe("served by gpt");
    expect(apis(from)).toEqual(["anthropic", "chat"]);
    expect(r.notices.map((n) => n.kind)).toEqual(["info", "fallback"]);
    expect(r.notices[1]).toMatchObject({ data: { action: "freeze", errorClass: "timeout" } });
  });

  it("freezes a rate-limited provider and lets the next one serve, with notices", async () => {
    const c = clock();
    const chain = fallback([claude(), gpt()], { baseFreezeMs: 1000, maxFreezeMs: 8000, now: c.now });
    const from = server.requests.length;
    server.enqueue({ error: "rate_limit", api: "anthropic" }, { text: "served by gpt", api: "chat" });
    const r = await run(chain, ask("hi"));
    expect(r.error).toBeUndefined();
    expect(r.text).toBe("served by gpt");
    expect(apis(from)).toEqual(["anthropic", "chat"]);
    expect(r.notices).toHaveLength(1);
    expect(r.notices[0]).toMatchObject({
      kind: "fallback",
      provider: "anthropic:claude-sonnet-4-6",
      data: { action: "freeze", errorClass: "rate_limited", freezeMs: 1000, strikes: 1, next: "openai:gpt-4o" },
    });
    expect(chain.states()[0]).toMatchObject({ frozenUntil: c.t + 1000, strikes: 1 });
  });

  it("skips a frozen provider, retries it once thawed, and doubles the freeze on each strike up to the cap", async () => {
    const c = clock();
    const chain = fallback([claude(), gpt()], { baseFreezeMs: 1000, maxFreezeMs: 3000, now: c.now });
    server.enqueue({ error: "overloaded", api: "anthropic" }, { text: "1", api: "chat" });
    await run(chain, ask("a"));
    // Frozen: served by gpt directly, with a skip notice.
    let from = server.requests.length;
    server.enqueue({ text: "2", api: "chat" });
    let r = await run(chain, ask("b"));
    expect(apis(from)).toEqual(["chat"]);
    expect(r.notices.map((n) => n.data?.action)).toEqual(["skip"]);
    // Thawed, fails again: 2 s; then 3 s (capped, not 4 s).
    const freezes: unknown[] = [];
    for (const _ of [1, 2]) {
      c.t = chain.states()[0]!.frozenUntil;
      server.enqueue({ error: "overloaded", api: "anthropic" }, { text: "x", api: "chat" });
      r = await run(chain, ask("c"));
      freezes.push(r.notices.find((n) => n.data?.action === "freeze")!.data!.freezeMs);
    }
    expect(freezes).toEqual([2000, 3000]);
    // Thawed and healthy: it serves and its strikes are cleared.
    c.t = chain.states()[0]!.frozenUntil;
    from = server.requests.length;
    server.enqueue({ text: "claude is back", api: "anthropic" });
    r = await run(chain, ask("d"));
    expect(r.text).toBe("claude is back");
    expect(apis(from)).toEqual(["anthropic"]);
    expect(chain.states()[0]).toMatchObject({ strikes: 0, frozenUntil: 0 });
  });

  it("respects a retry-after longer than the backoff", async () => {
    const c = clock();
    const chain = fallback([claude(), gpt()], { baseFreezeMs: 100, maxFreezeMs: 60_000, now: c.now });
    server.enqueue({ error: "rate_limit", retryAfter: 20, api: "anthropic" }, { text: "ok", api: "chat" });
    const r = await run(chain, ask("hi"));
    expect(r.notices[0]!.data).toMatchObject({ freezeMs: 20_000 });
  });

  it("when every provider is frozen, tries the one whose freeze ends first; raises the error if it fails", async () => {
    const c = clock();
    const chain = fallback([claude(), gpt()], { baseFreezeMs: 1000, maxFreezeMs: 60_000, now: c.now });
    server.enqueue(
      { error: "rate_limit", retryAfter: 5, api: "anthropic" },
      { error: "rate_limit", retryAfter: 2, api: "chat" },
    );
    const r1 = await run(chain, ask("a"));
    expect(r1.error).toMatchObject({ errorClass: "rate_limited" });
    expect(r1.notices.map((n) => n.data?.action)).toEqual(["freeze", "freeze"]);
    c.t += 1000;
    const from = server.requests.length;
    server.enqueue({ text: "gpt thawed first", api: "chat" });
    const r2 = await run(chain, ask("b"));
    expect(apis(from)).toEqual(["chat"]);
    expect(r2.text).toBe("gpt thawed first");
    expect(r2.notices.map((n) => n.data?.action)).toEqual(["try_least_frozen"]);
    expect(r2.notices[0]).toMatchObject({ provider: "openai:gpt-4o" });
  });

  it("raises other errors at once, without trying the next provider", async () => {
    const chain = fallback([claude(), gpt()], { baseFreezeMs: 1000 });
    const from = server.requests.length;
    server.enqueue({ error: "auth", api: "anthropic" });
    const r = await run(chain, ask("hi"));
    expect(r.error).toMatchObject({ errorClass: "auth", status: 401 });
    expect(apis(from)).toEqual(["anthropic"]);
    expect(chain.states()[0]!.strikes).toBe(0);
  });

  it("raises a failure that comes after deltas were streamed (the answer cannot switch mid-way)", async () => {
    const streamedThenOverloaded: ModelProvider = {
      id: "fake:partial",
      async *stream(): AsyncGenerator<ModelEvent> {
        yield { type: "text_delta", text: "partial" };
        throw new ProviderError("overloaded", "went away");
      },
    };
    const chain = fallback([streamedThenOverloaded, gpt()]);
    const from = server.requests.length;
    const r = await run(chain, ask("hi"));
    expect(r.error).toMatchObject({ errorClass: "overloaded" });
    expect(apis(from)).toEqual([]);
  });

  it("reports the smallest known context window and rejects an empty list", () => {
    expect(fallback([claude(), gpt()]).contextWindow).toBe(128_000);
    try {
      fallback([]);
      expect.unreachable();
    } catch (err) {
      expect(isKeelError(err, "KEEL_PROVIDER_OPTIONS_INVALID")).toBe(true);
    }
  });
});
