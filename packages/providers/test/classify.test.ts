/** Error classification from status, type, code and message, plus option validation. */
import { isKeelError } from "@keel/kernel";
import { describe, expect, it } from "vitest";
import { anthropicProvider, classOf, classifyError, openaiProvider } from "../src/index.ts";

describe("classOf", () => {
  it.each([
    [{ status: 429, message: "rate" }, "rate_limited"],
    [{ status: undefined, type: "rate_limit_error", message: "in-band" }, "rate_limited"],
    [{ status: 529, type: "overloaded_error", message: "Overloaded" }, "overloaded"],
    [{ status: 503, message: "unavailable" }, "overloaded"],
    [{ status: 500, type: "api_error", message: "Internal" }, "overloaded"],
    [{ status: undefined, type: "error", code: "server_error", message: "in-band" }, "overloaded"],
    [{ status: 401, type: "authentication_error", message: "invalid x-api-key" }, "auth"],
    [{ status: 403, type: "permission_error", message: "no" }, "auth"],
    [{ status: 429, code: "insufficient_quota", message: "You exceeded your current quota" }, "auth"],
    [
      { status: 400, type: "invalid_request_error", message: "prompt is too long: 208512 tokens > 200000 maximum" },
      "context_too_long",
    ],
    [
      {
        status: 400,
        code: "context_length_exceeded",
        message: "This model's maximum context length is 128000 tokens.",
      },
      "context_too_long",
    ],
    [{ status: 413, type: "request_too_large", message: "Request exceeds the maximum size" }, "context_too_long"],
    [{ status: 400, message: "Your input exceeds the context window of this model." }, "context_too_long"],
    [{ status: 400, type: "invalid_request_error", message: "messages: field required" }, "invalid_request"],
    [{ status: 404, type: "not_found_error", message: "model: claude-nope" }, "invalid_request"],
    [{ status: undefined, message: "something odd" }, "unknown"],
  ] as const)("%o → %s", (facts, expected) => {
    expect(classOf(facts)).toBe(expected);
  });

  it("classifies socket failures as network and an aborted signal as aborted", () => {
    const reset = Object.assign(new TypeError("terminated"), {
      cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }),
    });
    expect(classifyError(reset, "p").errorClass).toBe("network");
    const ac = new AbortController();
    ac.abort();
    expect(classifyError(new Error("whatever"), "p", ac.signal).errorClass).toBe("aborted");
  });
});

describe("adapter options", () => {
  const codeOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return isKeelError(err) ? err.code : String(err);
    }
    return "no error";
  };
  it("rejects bad retry settings with a coded error", () => {
    expect(codeOf(() => anthropicProvider({ model: "m", apiKey: "k", streamRetries: -1 }))).toBe(
      "KEEL_PROVIDER_OPTIONS_INVALID",
    );
    expect(codeOf(() => openaiProvider({ model: "m", apiKey: "k", streamBackoffMs: Number.NaN }))).toBe(
      "KEEL_PROVIDER_OPTIONS_INVALID",
    );
    expect(codeOf(() => openaiProvider({ model: "m", apiKey: "k", idleTimeoutMs: -5 }))).toBe(
      "KEEL_PROVIDER_OPTIONS_INVALID",
    );
  });
  it("says which key is missing when an adapter is built without one", () => {
    const saved = { a: process.env.ANTHROPIC_API_KEY, o: process.env.OPENAI_API_KEY };
    delete process.env.ANTHROPIC_API_KEY;
    delete process.env.OPENAI_API_KEY;
    try {
      expect(codeOf(() => anthropicProvider({ model: "m" }))).toBe("KEEL_PROVIDER_KEY_MISSING");
      expect(codeOf(() => openaiProvider({ model: "m" }))).toBe("KEEL_PROVIDER_KEY_MISSING");
      expect(codeOf(() => openaiProvider({ model: "m", compatible: true, baseURL: "http://127.0.0.1:1/v1" }))).toBe(
        "no error",
      );
    } finally {
      if (saved.a !== undefined) process.env.ANTHROPIC_API_KEY = saved.a;
      if (saved.o !== undefined) process.env.OPENAI_API_KEY = saved.o;
    }
  });
});

describe("bounded waits by default", () => {
  it("first-byte and idle timeouts and the retry-after cap are on unless set to 0", async () => {
    const { retrySettings } = await import("../src/retry.ts");
    expect(retrySettings({}, "p")).toMatchObject({ firstByteMs: 120_000, idleMs: 60_000, maxRetryAfterMs: 30_000 });
    expect(retrySettings({ idleTimeoutMs: 0, firstByteTimeoutMs: 0, maxRetryAfterMs: 0 }, "p")).toMatchObject({
      firstByteMs: 0,
      idleMs: 0,
      maxRetryAfterMs: 0,
    });
    expect(() => retrySettings({ firstByteTimeoutMs: -1 }, "p")).toThrow(/firstByteTimeoutMs/);
    expect(() => retrySettings({ maxRetryAfterMs: Number.NaN }, "p")).toThrow(/maxRetryAfterMs/);
  });
});

describe("reasoning models get longer default timeouts", () => {
  it("the adapter passes its defaults; explicit options still win", async () => {
    const { retrySettings } = await import("../src/retry.ts");
    expect(retrySettings({}, "p", { idleMs: 300_000, firstByteMs: 300_000 })).toMatchObject({
      idleMs: 300_000,
      firstByteMs: 300_000,
    });
    expect(retrySettings({ idleTimeoutMs: 5 }, "p", { idleMs: 300_000 })).toMatchObject({ idleMs: 5 });
  });
});
