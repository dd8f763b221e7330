/** `anthropic:<model>`, `openai:<model>`, `openai-compatible:<model>` → a ModelProvider. */
import { KeelError, type ModelProvider } from "@keel/kernel";
import { anthropicProvider } from "./anthropic.ts";
import { openaiProvider } from "./openai.ts";
import type { StreamRetryOptions } from "./retry.ts";
import { assertSdk, PROVIDER_SDKS } from "./sdk.ts";

/** Options of resolveModel. Contract: explicit options win over the environment. */
export interface ResolveModelOptions extends StreamRetryOptions {
  /** Where keys and base URLs are read. Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Overrides ANTHROPIC_BASE_URL / OPENAI_BASE_URL. A trailing `/v1` is dropped for Anthropic (its SDK adds it). */
  baseURL?: string;
  /** Overrides ANTHROPIC_API_KEY / OPENAI_API_KEY. */
  apiKey?: string;
  /** Overrides the known context window of the model. */
  contextWindow?: number;
  /** Overrides the known price of the model (USD per million tokens), for `costUsd` and budgets. */
  price?: { input: number; output: number };
  /** OpenAI API flavour (default: `responses` for openai, `chat` for openai-compatible). */
  api?: "chat" | "responses";
  /** SDK retries before the stream starts. Default 2. */
  maxRetries?: number;
}

/**
 * A provider for a model spec. Contract: throws KEEL_PROVIDER_SPEC_INVALID for an unknown
 * prefix or an empty model, then KEEL_PROVIDER_SDK_MISSING naming the package to install when
 * the spec's SDK (`@anthropic-ai/sdk`, `openai`) is not installed, KEEL_PROVIDER_KEY_MISSING
 * naming the env var to set, and KEEL_PROVIDER_BASE_URL_MISSING for an openai-compatible spec
 * without a URL. Nothing is sent: the SDK is imported on the first request.
 */
export function resolveModel(spec: string, opts: ResolveModelOptions = {}): ModelProvider {
  const env = opts.env ?? process.env;
  const colon = typeof spec === "string" ? spec.indexOf(":") : -1;
  const kind = colon > 0 ? spec.slice(0, colon) : "";
  const model = colon > 0 ? spec.slice(colon + 1).trim() : "";
  if (!model || (kind !== "anthropic" && kind !== "openai" && kind !== "openai-compatible")) {
    throw new KeelError("KEEL_PROVIDER_SPEC_INVALID", `Cannot resolve the model spec ${JSON.stringify(spec)}.`, {
      path: "model",
    });
  }
  // What to install comes before what to set: both are needed, the package first.
  assertSdk(spec, PROVIDER_SDKS[kind]);
  const common = {
    model,
    ...(opts.contextWindow !== undefined ? { contextWindow: opts.contextWindow } : {}),
    ...(opts.price !== undefined ? { price: opts.price } : {}),
    ...(opts.maxRetries !== undefined ? { maxRetries: opts.maxRetries } : {}),
    ...(opts.streamRetries !== undefined ? { streamRetries: opts.streamRetries } : {}),
    ...(opts.streamBackoffMs !== undefined ? { streamBackoffMs: opts.streamBackoffMs } : {}),
    ...(opts.idleTimeoutMs !== undefined ? { idleTimeoutMs: opts.idleTimeoutMs } : {}),
    ...(opts.firstByteTimeoutMs !== undefined ? { firstByteTimeoutMs: opts.firstByteTimeoutMs } : {}),
    ...(opts.maxRetryAfterMs !== undefined ? { maxRetryAfterMs: opts.maxRetryAfterMs } : {}),
  };
  if (kind === "anthropic") {
    const apiKey = opts.apiKey ?? env.ANTHROPIC_API_KEY;
    if (!apiKey)
      throw new KeelError("KEEL_PROVIDER_KEY_MISSING", `${spec} needs an API key: set ANTHROPIC_API_KEY.`, {
        path: "ANTHROPIC_API_KEY",
      });
    // The SDK appends /v1/messages itself, so one ".../v1" URL can serve both kinds of spec.
    const baseURL = (opts.baseURL ?? env.ANTHROPIC_BASE_URL)?.replace(/\/v1\/?$/, "");
    return anthropicProvider({ ...common, apiKey, ...(baseURL ? { baseURL } : {}) });
  }
  const baseURL = opts.baseURL ?? env.OPENAI_BASE_URL;
  const apiKey = opts.apiKey ?? env.OPENAI_API_KEY;
  const api = opts.api !== undefined ? { api: opts.api } : {};
  if (kind === "openai") {
    if (!apiKey)
      throw new KeelError("KEEL_PROVIDER_KEY_MISSING", `${spec} needs an API key: set OPENAI_API_KEY.`, {
        path: "OPENAI_API_KEY",
      });
    return openaiProvider({ ...common, ...api, apiKey, ...(baseURL ? { baseURL } : {}) });
  }
  if (!baseURL)
    throw new KeelError("KEEL_PROVIDER_BASE_URL_MISSING", `${spec} has no server URL.`, { path: "OPENAI_BASE_URL" });
  return openaiProvider({ ...common, ...api, compatible: true, baseURL, apiKey: apiKey ?? "" });
}
