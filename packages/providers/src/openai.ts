/** The OpenAI adapter (Chat Completions and Responses API) on the `openai` SDK; also OpenAI-compatible servers. */
import type OpenAI from "openai";
import type { AssistantBlock, ModelEvent, ModelProvider, ModelRequest, StopReason, Usage } from "@keel/kernel";
import { KeelError, ProviderError } from "@keel/kernel";
import { parseArgs } from "./args.ts";
import { fromFacts } from "./errors.ts";
import { costOf, knownContextWindow, knownPrice, type ModelPrice } from "./models.ts";
import { chatBody, type OpenAIReasoningData, responsesBody } from "./openai-request.ts";
import {
  cappedRetryFetch,
  REASONING_TIMEOUT_MS,
  retrySettings,
  type StreamRetryOptions,
  type StreamSession,
  withStreamRetries,
} from "./retry.ts";
import { assertSdk } from "./sdk.ts";

/** Options of openaiProvider. Contract: `model` is required; everything else has a default. */
export interface OpenAIProviderOptions extends StreamRetryOptions {
  model: string;
  /** `responses` (default for OpenAI) or `chat` (default for compatible servers). */
  api?: "chat" | "responses";
  /** A compatible server (Ollama, vLLM, llama.cpp): no key needed, chat by default, `max_tokens`. */
  compatible?: boolean;
  /** Default: OPENAI_API_KEY; "" (or none, for a compatible server) sends no key. */
  apiKey?: string;
  /** Default: the SDK's (OPENAI_BASE_URL, else https://api.openai.com/v1). */
  baseURL?: string;
  /** SDK retries before the stream starts (429 with retry-after, 5xx). Default 2. */
  maxRetries?: number;
  timeoutMs?: number;
  /** Output token cap when the request gives none. Default: none (the server's). */
  maxTokens?: number;
  contextWindow?: number;
  /** Chat: ask for the usage chunk (`stream_options.include_usage`). Default true. */
  includeUsage?: boolean;
  /** Responses: `store` (default false: reasoning travels encrypted in the request). */
  store?: boolean;
  /** Responses: reasoning settings, e.g. `{ effort: "low", summary: "auto" }`. */
  reasoning?: { effort?: string; summary?: string };
  /** Responses: ask for encrypted reasoning. Default: for reasoning models (o*, gpt-5+) or when `reasoning` is set. */
  encryptedReasoning?: boolean;
  price?: ModelPrice | false;
  /** A ready client; `apiKey`, `baseURL`, `maxRetries`, `timeoutMs` are then ignored. */
  client?: OpenAI;
}

const REASONING_MODEL = /^(o\d|gpt-5|gpt-6|codex)/;

/** A ModelProvider for OpenAI models or an OpenAI-compatible server. Contract: as anthropicProvider. */
export function openaiProvider(options: OpenAIProviderOptions): ModelProvider {
  const compatible = options.compatible === true;
  const api = options.api ?? (compatible ? "chat" : "responses");
  const id = `${compatible ? "openai-compatible" : "openai"}:${options.model}`;
  // Reasoning models may think for minutes before (or between) events.
  const reasoningModel = options.reasoning !== undefined || REASONING_MODEL.test(options.model);
  const retry = retrySettings(
    options,
    id,
    reasoningModel ? { idleMs: REASONING_TIMEOUT_MS, firstByteMs: REASONING_TIMEOUT_MS } : {},
  );
  if (!options.client) assertSdk(id, "openai");
  const key = options.apiKey !== undefined ? options.apiKey : process.env.OPENAI_API_KEY;
  if (!options.client && !key && !compatible)
    throw new KeelError("KEEL_PROVIDER_KEY_MISSING", `${id} needs an API key: set OPENAI_API_KEY (or pass apiKey).`, {
      path: "apiKey",
    });
  // The SDK is loaded on the first request, so a process that never calls this model never pays for it.
  let client: OpenAI | undefined = options.client;
  const getClient = async (): Promise<OpenAI> =>
    (client ??= new (await import("openai")).default({
      // A compatible server without a key gets no Authorization header at all.
      apiKey: key || "keel-no-key",
      ...(key ? {} : { defaultHeaders: { Authorization: null } }),
      ...(options.baseURL !== undefined ? { baseURL: options.baseURL } : {}),
      maxRetries: options.maxRetries ?? 2,
      ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs } : {}),
      fetch: cappedRetryFetch(retry.maxRetryAfterMs),
    } as ConstructorParameters<typeof OpenAI>[0]));
  const price =
    options.price === false ? undefined : (options.price ?? (compatible ? undefined : knownPrice(options.model)));
  const contextWindow = options.contextWindow ?? (compatible ? undefined : knownContextWindow(options.model));
  const encryptedReasoning =
    options.encryptedReasoning ?? (options.reasoning !== undefined || REASONING_MODEL.test(options.model));

  const respond = (content: AssistantBlock[], stopReason: StopReason, usage: Usage, served: unknown): ModelEvent => {
    if (price) usage.costUsd = costOf(price, usage);
    return {
      type: "response",
      message: { role: "assistant", content },
      stopReason,
      usage,
      provider: id,
      ...(typeof served === "string" && served ? { model: served } : {}),
    };
  };

  function chat(request: ModelRequest): StreamSession {
    let text = "";
    let thinking = "";
    const calls: { id: string; name: string; args: string }[] = [];
    let finishReason: string | null = null;
    let served: unknown;
    const usage: Usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
    return {
      ready: getClient,
      async open(signal) {
        const body = chatBody(
          request,
          options.model,
          { compatible, includeUsage: options.includeUsage ?? true },
          options.maxTokens,
        );
        return (await (
          await getClient()
        ).chat.completions.create(body as any, { signal })) as unknown as AsyncIterable<any>;
      },
      push(chunk) {
        let out: ModelEvent | ModelEvent[] | undefined;
        const add = (e: ModelEvent) => {
          out = out === undefined ? e : Array.isArray(out) ? (out.push(e), out) : [out, e];
        };
        served ??= chunk.model;
        const choice = chunk.choices?.[0];
        if (choice) {
          const d = choice.delta;
          if (d) {
            if (d.content) {
              text += d.content;
              add({ type: "text_delta", text: d.content });
            }
            const reasoning = d.reasoning_content ?? d.reasoning;
            if (typeof reasoning === "string" && reasoning) {
              thinking += reasoning;
              add({ type: "thinking_delta", text: reasoning });
            }
            if (d.refusal) {
              text += d.refusal;
              add({ type: "text_delta", text: d.refusal });
            }
            if (d.tool_calls) {
              for (const tc of d.tool_calls) {
                const i = typeof tc.index === "number" ? tc.index : calls.length;
                let slot = calls[i];
                const fresh = !slot;
                if (!slot)
                  slot = calls[i] = {
                    id: tc.id || `call_${Date.now().toString(36)}_${i}_${Math.random().toString(36).slice(2, 8)}`,
                    name: "",
                    args: "",
                  };
                if (tc.function?.name) slot.name += tc.function.name;
                const piece = tc.function?.arguments ?? "";
                slot.args += piece;
                if (fresh || piece)
                  add({
                    type: "tool_call_delta",
                    id: slot.id,
                    ...(tc.function?.name ? { name: tc.function.name } : {}),
                    argsText: piece,
                  });
              }
            }
          }
          if (choice.finish_reason) finishReason = choice.finish_reason;
        }
        if (chunk.usage) {
          const cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
          usage.inputTokens = Math.max(0, (chunk.usage.prompt_tokens ?? 0) - cached);
          usage.cacheReadTokens = cached;
          usage.outputTokens = chunk.usage.completion_tokens ?? 0;
        }
        return out;
      },
      finish(signal) {
        if (signal.aborted) throw new ProviderError("aborted", `${id}: the request was aborted.`);
        if (!finishReason)
          throw new ProviderError("network", `${id}: the stream ended without a finish_reason (truncated).`);
        const content: AssistantBlock[] = [];
        if (thinking) content.push({ type: "thinking", text: thinking, providerData: { provider: "openai-chat" } });
        if (text) content.push({ type: "text", text });
        const toolCalls = calls.filter(Boolean);
        for (const c of toolCalls) content.push({ type: "tool_call", id: c.id, name: c.name, args: parseArgs(c.args) });
        const stop: StopReason = toolCalls.length
          ? "tool_use"
          : finishReason === "length"
            ? "max_tokens"
            : finishReason === "content_filter"
              ? "refusal"
              : finishReason === "stop"
                ? "end_turn"
                : "other";
        return respond(content, stop, usage, served);
      },
    };
  }

  function responses(request: ModelRequest): StreamSession {
    type Item =
      | { kind: "text"; text: string }
      | { kind: "reasoning"; text: string; item?: Record<string, unknown> }
      | { kind: "call"; id: string; name: string; args: string }
      | { kind: "other" };
    const items: Item[] = [];
    let final: any;
    let refusal = false;
    return {
      ready: getClient,
      async open(signal) {
        const body = responsesBody(
          request,
          options.model,
          { store: options.store ?? false, encryptedReasoning, reasoning: options.reasoning },
          options.maxTokens,
        );
        return (await (await getClient()).responses.create(body as any, { signal })) as unknown as AsyncIterable<any>;
      },
      push(ev): ModelEvent | undefined {
        switch (ev.type) {
          case "response.output_text.delta": {
            const it = items[ev.output_index];
            if (it?.kind === "text") it.text += ev.delta;
            return { type: "text_delta", text: ev.delta };
          }
          case "response.function_call_arguments.delta": {
            const it = items[ev.output_index];
            if (it?.kind !== "call") return undefined;
            it.args += ev.delta;
            return { type: "tool_call_delta", id: it.id, argsText: ev.delta };
          }
          case "response.reasoning_summary_text.delta":
          case "response.reasoning_text.delta": {
            const it = items[ev.output_index];
            if (it?.kind === "reasoning") it.text += ev.delta;
            return { type: "thinking_delta", text: ev.delta };
          }
          case "response.reasoning_summary_part.added": {
            const it = items[ev.output_index];
            if (it?.kind === "reasoning" && it.text && ev.summary_index > 0) it.text += "\n\n";
            return undefined;
          }
          case "response.refusal.delta": {
            const it = items[ev.output_index];
            if (it?.kind === "text") it.text += ev.delta;
            refusal = true;
            return { type: "text_delta", text: ev.delta };
          }
          case "response.output_item.added": {
            const item = ev.item;
            if (item.type === "message") items[ev.output_index] = { kind: "text", text: "" };
            else if (item.type === "reasoning") items[ev.output_index] = { kind: "reasoning", text: "" };
            else if (item.type === "function_call") {
              items[ev.output_index] = { kind: "call", id: item.call_id, name: item.name, args: item.arguments ?? "" };
              return { type: "tool_call_delta", id: item.call_id, name: item.name, argsText: "" };
            } else items[ev.output_index] = { kind: "other" };
            return undefined;
          }
          case "response.output_item.done": {
            // The finished item is authoritative.
            const item = ev.item;
            if (item.type === "message")
              items[ev.output_index] = {
                kind: "text",
                text: (item.content ?? []).map((p: any) => p.text ?? p.refusal ?? "").join(""),
              };
            else if (item.type === "reasoning")
              items[ev.output_index] = { kind: "reasoning", text: reasoningText(item), item };
            else if (item.type === "function_call")
              items[ev.output_index] = { kind: "call", id: item.call_id, name: item.name, args: item.arguments ?? "" };
            return undefined;
          }
          case "response.completed":
          case "response.incomplete":
            final = ev.response;
            return undefined;
          case "response.failed": {
            const e = ev.response?.error ?? {};
            throw fromFacts(
              { code: e.code, type: e.type, message: `response failed: ${e.message ?? "no message"}` },
              id,
            );
          }
        }
        return undefined;
      },
      finish(signal) {
        if (signal.aborted) throw new ProviderError("aborted", `${id}: the request was aborted.`);
        if (!final)
          throw new ProviderError("network", `${id}: the stream ended without response.completed (truncated).`);
        const content: AssistantBlock[] = [];
        let calls = 0;
        for (const it of items) {
          if (!it || it.kind === "other") continue;
          if (it.kind === "text") content.push({ type: "text", text: it.text });
          else if (it.kind === "reasoning")
            content.push({
              type: "thinking",
              text: it.text,
              ...(it.item
                ? { providerData: { provider: "openai-responses", item: it.item } satisfies OpenAIReasoningData }
                : {}),
            });
          else {
            calls++;
            content.push({ type: "tool_call", id: it.id, name: it.name, args: parseArgs(it.args) });
          }
        }
        const u = final.usage ?? {};
        const cached = u.input_tokens_details?.cached_tokens ?? 0;
        const usage: Usage = {
          inputTokens: Math.max(0, (u.input_tokens ?? 0) - cached),
          outputTokens: u.output_tokens ?? 0,
          cacheReadTokens: cached,
          cacheWriteTokens: 0,
        };
        const reason = final.incomplete_details?.reason;
        const stop: StopReason = calls
          ? "tool_use"
          : refusal || reason === "content_filter"
            ? "refusal"
            : reason === "max_output_tokens"
              ? "max_tokens"
              : final.status === "completed"
                ? "end_turn"
                : "other";
        return respond(content, stop, usage, final.model);
      },
    };
  }

  const session = api === "chat" ? chat : responses;
  return {
    id,
    ...(contextWindow !== undefined ? { contextWindow } : {}),
    ...(price ? { price: { input: price.input, output: price.output } } : {}),
    ...(options.maxTokens !== undefined ? { maxOutputTokens: options.maxTokens } : {}),
    stream: (request, { signal }) => withStreamRetries(id, () => session(request), signal, retry),
  };
}

function reasoningText(item: any): string {
  const summary = (item.summary ?? []).map((s: any) => s.text ?? "").filter(Boolean);
  if (summary.length) return summary.join("\n\n");
  return (item.content ?? []).map((c: any) => c.text ?? "").join("");
}
