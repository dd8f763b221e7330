/** resolveModel: specs, keys and base URLs from options or the environment, coded errors, context windows. */
import { startWireServer, type WireServer } from "@keel/wire-server";
import { isKeelError } from "@keel/kernel";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveModel } from "../src/index.ts";
import { ask, run } from "./support/helpers.ts";

let server: WireServer;
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(() => server.close());

function codeOf(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (isKeelError(err)) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error("expected a KeelError");
}

describe("resolveModel", () => {
  it("rejects specs it does not know", () => {
    for (const spec of ["claude-sonnet-4-6", "google:gemini", "anthropic:", ":gpt-4o", ""]) {
      expect(codeOf(() => resolveModel(spec, { env: {} })).code).toBe("KEEL_PROVIDER_SPEC_INVALID");
    }
  });

  it("says which environment variable to set when a key is missing", () => {
    const a = codeOf(() => resolveModel("anthropic:claude-sonnet-4-6", { env: {} }));
    expect(a.code).toBe("KEEL_PROVIDER_KEY_MISSING");
    expect(a.message).toContain("ANTHROPIC_API_KEY");
    const o = codeOf(() => resolveModel("openai:gpt-5", { env: { ANTHROPIC_API_KEY: "x" } }));
    expect(o.code).toBe("KEEL_PROVIDER_KEY_MISSING");
    expect(o.message).toContain("OPENAI_API_KEY");
  });

  it("needs a base URL for an openai-compatible server, but no key", () => {
    const e = codeOf(() => resolveModel("openai-compatible:llama3.1", { env: {} }));
    expect(e.code).toBe("KEEL_PROVIDER_BASE_URL_MISSING");
    expect(e.message).toContain("OPENAI_BASE_URL");
    expect(resolveModel("openai-compatible:llama3.1", { env: { OPENAI_BASE_URL: "http://127.0.0.1:1/v1" } }).id).toBe(
      "openai-compatible:llama3.1",
    );
  });

  it("knows common context windows and takes an override", () => {
    const env = { ANTHROPIC_API_KEY: "a", OPENAI_API_KEY: "o" };
    expect(resolveModel("anthropic:claude-opus-4-5", { env }).contextWindow).toBe(200_000);
    expect(resolveModel("openai:gpt-4o-mini", { env }).contextWindow).toBe(128_000);
    expect(resolveModel("openai:gpt-4.1", { env }).contextWindow).toBe(1_047_576);
    expect(resolveModel("openai:some-future-model", { env }).contextWindow).toBeUndefined();
    expect(resolveModel("openai:gpt-4o", { env, contextWindow: 64_000 }).contextWindow).toBe(64_000);
  });

  it("honours ANTHROPIC_BASE_URL and OPENAI_BASE_URL from the env, and keys from the env", async () => {
    const env = {
      ANTHROPIC_API_KEY: "env-anthropic",
      OPENAI_API_KEY: "env-openai",
      ANTHROPIC_BASE_URL: server.anthropicBaseURL,
      OPENAI_BASE_URL: server.openaiBaseURL,
    };
    server.enqueue({ text: "a" }, { text: "b" }, { text: "c" });
    const from = server.requests.length;
    expect((await run(resolveModel("anthropic:claude-haiku-4-5", { env }), ask("x"))).text).toBe("a");
    expect((await run(resolveModel("openai:gpt-5", { env }), ask("x"))).text).toBe("b");
    expect((await run(resolveModel("openai-compatible:qwen2.5:7b", { env }), ask("x"))).text).toBe("c");
    const seen = server.requests.slice(from);
    expect(seen.map((r) => r.path)).toEqual(["/v1/messages", "/v1/responses", "/v1/chat/completions"]);
    expect(seen[0]!.headers["x-api-key"] ?? seen[0]!.headers.authorization).toMatch(/env-anthropic/);
    expect(seen[1]!.headers.authorization).toBe("Bearer env-openai");
    expect(seen[2]!.body.model).toBe("qwen2.5:7b");
  });

  it("takes one `<url>/v1` base URL for every kind of spec (the Anthropic SDK adds /v1 itself)", async () => {
    server.enqueue({ text: "a" }, { text: "b" });
    const from = server.requests.length;
    const opts = { env: { ANTHROPIC_API_KEY: "a", OPENAI_API_KEY: "o" }, baseURL: server.openaiBaseURL };
    expect((await run(resolveModel("anthropic:claude-haiku-4-5", opts), ask("x"))).text).toBe("a");
    expect((await run(resolveModel("openai:gpt-4o", opts), ask("x"))).text).toBe("b");
    expect(server.requests.slice(from).map((r) => r.path)).toEqual(["/v1/messages", "/v1/responses"]);
  });

  it("lets options override the env (baseURL, apiKey, api)", async () => {
    const env = { OPENAI_API_KEY: "env-key", OPENAI_BASE_URL: "http://127.0.0.1:1/v1" };
    server.enqueue({ text: "via options" });
    const from = server.requests.length;
    const p = resolveModel("openai:gpt-5", { env, baseURL: server.openaiBaseURL, apiKey: "opt-key", api: "chat" });
    expect((await run(p, ask("x"))).text).toBe("via options");
    expect(server.requests[from]!.path).toBe("/v1/chat/completions");
    expect(server.requests[from]!.headers.authorization).toBe("Bearer opt-key");
  });
});
