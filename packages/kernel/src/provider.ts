import type { AssistantMessage, Message } from "./messages.ts";
import type { ModelPriceView, Usage } from "./usage.ts";

export type { ModelPriceView } from "./usage.ts";
import { wellFormedDeep } from "./text.ts";

/** The part of a tool the model sees. */
export interface ToolSchema {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** Prompt-cache tier a request asks for. */
export type CacheTier = "none" | "5m" | "1h";

/** Options of one provider request, merged from `request_options` contributions. */
export interface RequestOptions {
  maxTokens?: number;
  temperature?: number;
  toolChoice?: "auto" | "none" | "required";
  cache?: CacheTier;
  metadata?: Record<string, string>;
  /** Provider-specific passthrough, e.g. `{ thinking: { budget_tokens: 2048 } }`. */
  extra?: Record<string, unknown>;
  /**
   * Structured output: the answer that ends the turn is one JSON value matching `schema`.
   * Contract: adapters use the provider's native mechanism (OpenAI `json_schema` response
   * format, Anthropic a forced tool named `name`) and hand the kernel that JSON as the answer's
   * only text, with stop reason `end_turn`; tool calls stay possible before it.
   */
  output?: OutputFormat;
  /**
   * Route this round to a pool member (AgentOptions.pool), as a router plugin asks at
   * round.pre_request. Contract: the kernel takes it off before the provider sees the options
   * (and before the request digest); an unknown member is a diagnostic and the default model serves.
   */
  route?: { model: string; reason: string };
}

/** The JSON shape a structured answer must have. Contract: `name` matches ^[A-Za-z0-9_-]{1,64}$. */
export interface OutputFormat {
  name: string;
  /** JSON Schema (draft 2020-12) of the answer. */
  schema: Record<string, unknown>;
}

/**
 * One request to a model. Contract: `messages` has no orphaned tool call or result (the
 * kernel repairs them before every request); `tools` is empty in a final round.
 */
export interface ModelRequest {
  system: string;
  messages: readonly Message[];
  tools: readonly ToolSchema[];
  options: RequestOptions;
}

/** Why a model stopped. */
export type StopReason = "end_turn" | "tool_use" | "max_tokens" | "stop_sequence" | "refusal" | "other";

/**
 * Events a provider streams. Contract: zero or more deltas, then exactly one `response`
 * carrying the whole assistant message; or the iterator throws a ProviderError.
 */
export type ModelEvent =
  | { type: "text_delta"; text: string }
  | { type: "thinking_delta"; text: string }
  | { type: "tool_call_delta"; id: string; name?: string; argsText: string }
  /** `provider`: the `<provider>:<model>` that answered (in a fallback chain, the member); `model`: the model name the server reported. */
  | {
      type: "response";
      message: AssistantMessage;
      stopReason: StopReason;
      usage: Partial<Usage>;
      provider?: string;
      model?: string;
    }
  /**
   * Something the log should show about how the answer was obtained: a stream retried
   * (`retry`, deltas so far are void), a provider frozen or skipped (`fallback`), a model switched.
   */
  | {
      type: "notice";
      kind: "retry" | "fallback" | "info";
      message: string;
      provider?: string;
      data?: Record<string, unknown>;
    };

/**
 * A model provider (Anthropic, OpenAI, a local server, or the scripted provider).
 * Contract: `stream` honours `signal` by ending with a ProviderError of class `aborted`;
 * it never mutates the request.
 */
export interface ModelProvider {
  /** `<provider>:<model>`, e.g. `anthropic:claude-sonnet-4-5`. */
  readonly id: string;
  /** The model's context window in tokens, when known. */
  readonly contextWindow?: number;
  /** The model's price, when known (USD per million tokens): budgets estimate a request's cost with it. */
  readonly price?: ModelPriceView;
  /**
   * The output ceiling the provider asks for when a request gives no `maxTokens` (e.g. Anthropic's
   * `max_tokens` default): a budget's estimate uses it instead of DEFAULT_OUTPUT_ESTIMATE.
   */
  readonly maxOutputTokens?: number;
  stream(request: ModelRequest, options: { signal: AbortSignal }): AsyncIterable<ModelEvent>;
}

/** How a provider failure is classified. */
export type ProviderErrorClass =
  | "rate_limited"
  | "overloaded"
  | "auth"
  | "context_too_long"
  | "invalid_request"
  | "network"
  /** A first-byte or idle timeout cut the request (nothing arrived for too long). */
  | "timeout"
  | "aborted"
  | "unknown";

/**
 * A classified provider failure. Contract: `errorClass` is always set; `retryable` says
 * whether the same request may succeed later.
 */
export class ProviderError extends Error {
  readonly errorClass: ProviderErrorClass;
  readonly status: number | undefined;
  readonly retryAfterMs: number | undefined;

  constructor(
    errorClass: ProviderErrorClass,
    message: string,
    options: { status?: number; retryAfterMs?: number; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ProviderError";
    this.errorClass = errorClass;
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
  }

  get retryable(): boolean {
    return (
      this.errorClass === "rate_limited" ||
      this.errorClass === "overloaded" ||
      this.errorClass === "network" ||
      this.errorClass === "timeout"
    );
  }
}

/** One whole model answer, as `complete()` returns it. */
export interface Completion {
  message: AssistantMessage;
  /** The answer's text blocks joined. */
  text: string;
  stopReason: StopReason;
  usage: Partial<Usage>;
}

/**
 * Run one request to the end and return the whole answer (for plugins' side calls).
 * Contract: the request is made well-formed first (a lone surrogate becomes U+FFFD), whatever
 * provider is given (a plugin's own `model` option too); throws the provider's ProviderError; throws `aborted` when `signal` fires;
 * a stream that ends without its `response` event is a `network` error.
 */
export async function complete(
  provider: ModelProvider,
  request: Partial<ModelRequest> & Pick<ModelRequest, "messages">,
  options: { signal?: AbortSignal } = {},
): Promise<Completion> {
  const full: ModelRequest = wellFormedDeep({
    system: request.system ?? "",
    messages: request.messages,
    tools: request.tools ?? [],
    options: request.options ?? {},
  });
  const signal = options.signal ?? new AbortController().signal;
  for await (const event of provider.stream(full, { signal })) {
    if (event.type !== "response") continue;
    const text = event.message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("");
    return { message: event.message, text, stopReason: event.stopReason, usage: event.usage };
  }
  if (signal.aborted) throw new ProviderError("aborted", "The request was aborted.");
  throw new ProviderError("network", "The stream ended without a response event.");
}

/**
 * `provider` with every request made well-formed before it is handed over (wellFormedDeep).
 * Contract: the same id, context window and other properties (the provider is the prototype).
 */
export function wellFormedProvider(provider: ModelProvider): ModelProvider {
  const wrapped = Object.create(provider) as ModelProvider;
  Object.defineProperty(wrapped, "stream", {
    value: (request: ModelRequest, options: { signal: AbortSignal }) =>
      provider.stream(wellFormedDeep(request), options),
  });
  return wrapped;
}
