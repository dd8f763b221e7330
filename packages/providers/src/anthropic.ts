/** The Anthropic Messages API adapter, on @anthropic-ai/sdk. */
import type Anthropic from "@anthropic-ai/sdk";
import type { AssistantBlock, ModelEvent, ModelProvider, ModelRequest, StopReason, Usage } from "@keel/kernel";
import { KeelError, ProviderError } from "@keel/kernel";
import { anthropicBody, type AnthropicThinkingData } from "./anthropic-request.ts";
import { parseArgs } from "./args.ts";
import { chooseCacheTier } from "./cache.ts";
import { ANTHROPIC_DEFAULT_MAX_TOKENS, costOf, knownContextWindow, knownPrice, type ModelPrice } from "./models.ts";
import {
  cappedRetryFetch,
  retrySettings,
  type StreamRetryOptions,
  type StreamSession,
  withStreamRetries,
} from "./retry.ts";
import { assertSdk } from "./sdk.ts";

/** Options of anthropicProvider. Contract: `model` is required; everything else has a default. */
export interface AnthropicProviderOptions extends StreamRetryOptions {
  model: string;
  /** Default: the SDK's (ANTHROPIC_API_KEY). */
  apiKey?: string;
  /** Default: the SDK's (ANTHROPIC_BASE_URL, else https://api.anthropic.com). */
  baseURL?: string;
  /** SDK retries before the stream starts (429 with retry-after, 5xx, 529). Default 2. */
  maxRetries?: number;
  /** SDK request timeout (until the response headers), ms. Default: the SDK's (10 min). */
  timeoutMs?: number;
  /** `max_tokens` when the request gives none. Default 8192. */
  maxTokens?: number;
  /** Default: the known window of the model. */
  contextWindow?: number;
  /** `auto` (default): cache breakpoints from 1,024 estimated input tokens; `off`: never. */
  promptCache?: "auto" | "off";
  /** Expected time until the same prefix is sent again; above 300 s the 1 h tier is used. Default 0. */
  cacheReuseMs?: number;
  /** Price for `costUsd`; `false` for none. Default: the known price of the model. */
  price?: ModelPrice | false;
  /** A ready client (tests, proxies); `apiKey`, `baseURL`, `maxRetries`, `timeoutMs` are then ignored. */
  client?: Anthropic;
}

type Slot =
  | { kind: "text"; text: string }
  | { kind: "thinking"; text: string; signature: string }
  | { kind: "redacted"; data: string }
  | { kind: "tool"; id: string; name: string; json: string }
  /** The structured-output tool's call: its input is the answer, streamed as text. */
  | { kind: "output"; json: string }
  | { kind: "other" };

const STOP: Record<string, StopReason> = {
  end_turn: "end_turn",
  tool_use: "tool_use",
  max_tokens: "max_tokens",
  stop_sequence: "stop_sequence",
  refusal: "refusal",
  model_context_window_exceeded: "max_tokens",
};

/**
 * A ModelProvider for Claude models. Contract: streams text, thinking and tool-call deltas, then
 * one `response` whose thinking blocks carry their signatures verbatim; failures are ProviderErrors.
 */
export function anthropicProvider(options: AnthropicProviderOptions): ModelProvider {
  const id = `anthropic:${options.model}`;
  const retry = retrySettings(options, id);
  if (!options.client) assertSdk(id, "@anthropic-ai/sdk");
  if (!options.client && !options.apiKey && !process.env.ANTHROPIC_API_KEY)
    throw new KeelError(
      "KEEL_PROVIDER_KEY_MISSING",
      `${id} needs an API key: set ANTHROPIC_API_KEY (or pass apiKey).`,
      { path: "apiKey" },
    );
  // The SDK is loaded on the first request, so a process that never calls this model never pays for it.
  let client: Anthropic | undefined = options.client;
  const getClient = async (): Promise<Anthropic> =>
    (client ??= new (await import("@anthropic-ai/sdk")).default({
      ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}),
      ...(options.baseURL !== undefined ? { baseURL: options.baseURL } : {}),
      maxRetries: options.maxRetries ?? 2,
      ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs } : {}),
      fetch: cappedRetryFetch(retry.maxRetryAfterMs),
    }));
  const price = options.price === false ? undefined : (options.price ?? knownPrice(options.model));
  const contextWindow = options.contextWindow ?? knownContextWindow(options.model);

  function session(request: ModelRequest): StreamSession {
    const slots: Slot[] = [];
    const outputName = request.options.output?.name;
    const usage: Usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
    let write1h = 0;
    let stop: string | null = null;
    let done = false;
    let served: unknown;
    const takeUsage = (u: any) => {
      if (!u) return;
      if (typeof u.input_tokens === "number") usage.inputTokens = u.input_tokens;
      if (typeof u.output_tokens === "number") usage.outputTokens = u.output_tokens;
      if (typeof u.cache_read_input_tokens === "number") usage.cacheReadTokens = u.cache_read_input_tokens;
      if (typeof u.cache_creation_input_tokens === "number") usage.cacheWriteTokens = u.cache_creation_input_tokens;
      if (typeof u.cache_creation?.ephemeral_1h_input_tokens === "number")
        write1h = u.cache_creation.ephemeral_1h_input_tokens;
    };
    return {
      ready: getClient,
      async open(signal) {
        const tier = options.promptCache === "off" ? "none" : chooseCacheTier(request, options.cacheReuseMs ?? 0);
        const body = anthropicBody(request, options.model, options.maxTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS, tier);
        return (await (
          await getClient()
        ).messages.create({ ...(body as any), stream: true }, { signal })) as unknown as AsyncIterable<any>;
      },
      push(ev): ModelEvent | undefined {
        switch (ev.type) {
          case "content_block_delta": {
            const slot = slots[ev.index];
            const d = ev.delta;
            if (d.type === "text_delta" && slot?.kind === "text") {
              slot.text += d.text;
              return { type: "text_delta", text: d.text };
            }
            if (d.type === "input_json_delta" && slot?.kind === "output") {
              slot.json += d.partial_json;
              return d.partial_json ? { type: "text_delta", text: d.partial_json } : undefined;
            }
            if (d.type === "input_json_delta" && slot?.kind === "tool") {
              slot.json += d.partial_json;
              return { type: "tool_call_delta", id: slot.id, argsText: d.partial_json };
            }
            if (d.type === "thinking_delta" && slot?.kind === "thinking") {
              slot.text += d.thinking;
              return { type: "thinking_delta", text: d.thinking };
            }
            if (d.type === "signature_delta" && slot?.kind === "thinking") slot.signature += d.signature;
            return undefined;
          }
          case "content_block_start": {
            const b = ev.content_block;
            if (b.type === "text") slots[ev.index] = { kind: "text", text: b.text ?? "" };
            else if (b.type === "thinking")
              slots[ev.index] = { kind: "thinking", text: b.thinking ?? "", signature: b.signature ?? "" };
            else if (b.type === "redacted_thinking") slots[ev.index] = { kind: "redacted", data: b.data };
            else if (b.type === "tool_use" && outputName !== undefined && b.name === outputName)
              slots[ev.index] = { kind: "output", json: "" };
            else if (b.type === "tool_use") {
              slots[ev.index] = { kind: "tool", id: b.id, name: b.name, json: "" };
              return { type: "tool_call_delta", id: b.id, name: b.name, argsText: "" };
            } else slots[ev.index] = { kind: "other" };
            return undefined;
          }
          case "message_start":
            served = ev.message?.model;
            takeUsage(ev.message?.usage);
            return undefined;
          case "message_delta":
            stop = ev.delta?.stop_reason ?? stop;
            takeUsage(ev.usage);
            return undefined;
          case "message_stop":
            done = true;
            return undefined;
        }
        return undefined;
      },
      finish(signal) {
        if (signal.aborted) throw new ProviderError("aborted", `${id}: the request was aborted.`);
        if (!done)
          throw new ProviderError("network", `${id}: the stream ended without its message_stop event (truncated).`);
        const content: AssistantBlock[] = [];
        // The output tool's input is the answer (as JSON text), unless the model also called real
        // tools in this message: then those run and the model answers again.
        const calls = slots.some((s) => s?.kind === "tool");
        const answer = slots.find((s): s is Extract<Slot, { kind: "output" }> => s?.kind === "output");
        for (const s of slots) {
          if (!s || s.kind === "other" || s.kind === "output") continue;
          if (s.kind === "text" && answer && !calls) continue;
          if (s.kind === "text") content.push({ type: "text", text: s.text });
          else if (s.kind === "thinking")
            content.push({
              type: "thinking",
              text: s.text,
              providerData: { provider: "anthropic", signature: s.signature } satisfies AnthropicThinkingData,
            });
          else if (s.kind === "redacted")
            content.push({
              type: "thinking",
              text: "",
              redacted: true,
              providerData: { provider: "anthropic", data: s.data } satisfies AnthropicThinkingData,
            });
          else content.push({ type: "tool_call", id: s.id, name: s.name, args: parseArgs(s.json) });
        }
        if (answer && !calls) content.push({ type: "text", text: answer.json.trim() ? answer.json : "{}" });
        if (price) usage.costUsd = costOf(price, usage, write1h);
        const stopReason =
          answer && !calls && (stop === "tool_use" || stop === "end_turn") ? "end_turn" : (STOP[stop ?? ""] ?? "other");
        return {
          type: "response",
          message: { role: "assistant", content },
          stopReason,
          usage,
          provider: id,
          ...(typeof served === "string" && served ? { model: served } : {}),
        };
      },
    };
  }

  return {
    id,
    ...(contextWindow !== undefined ? { contextWindow } : {}),
    ...(price ? { price: { input: price.input, output: price.output } } : {}),
    maxOutputTokens: options.maxTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    stream: (request, { signal }) => withStreamRetries(id, () => session(request), signal, retry),
  };
}
