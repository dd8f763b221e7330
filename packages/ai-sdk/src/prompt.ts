/** A Keel ModelRequest as the call options of an AI SDK language model (specification v3 or v4). */
import type { LanguageModelV4CallOptions, LanguageModelV4Message, LanguageModelV4Prompt } from "@ai-sdk/provider";
import type { AssistantMessage, CacheTier, ContentBlock, ModelRequest, ToolResultMessage } from "@keel/kernel";
import { chooseCacheTier } from "@keel/providers";

/** What a thinking block keeps of an AI SDK reasoning part, to send it back to the same provider. */
export interface AiSdkReasoningData {
  provider: "ai-sdk";
  /** The model's `provider` (e.g. `anthropic.messages`): reasoning goes back only to it. */
  model: string;
  /** The reasoning part's provider metadata (signatures, encrypted content, item ids). */
  metadata?: Record<string, Record<string, unknown>>;
}

/** How the prompt is built for one model. */
export interface PromptTarget {
  /** `v3` takes file data as a plain base64 string; `v4` as `{ type: "data", data }`. */
  version: "v3" | "v4";
  /** The model's `provider` string, which reasoning blocks must match to be sent back. */
  provider: string;
  /** Output ceiling when the request gives none. */
  maxOutputTokens?: number;
}

/** Spec call options a request's `options.extra` may set (the rest of `extra` is ignored). */
const PASSTHROUGH = [
  "topP",
  "topK",
  "seed",
  "presencePenalty",
  "frequencyPenalty",
  "stopSequences",
  "reasoning",
  "providerOptions",
  "headers",
] as const;

/**
 * The call options of one request. Contract: never mutates `request`; tools and toolChoice only
 * when the request has tools; structured output (`options.output`) becomes `responseFormat: json`.
 */
export function callOptions(
  request: ModelRequest,
  target: PromptTarget,
  signal: AbortSignal,
): LanguageModelV4CallOptions {
  const o = request.options;
  const call: LanguageModelV4CallOptions = { prompt: promptOf(request, target), abortSignal: signal };
  const maxTokens = o.maxTokens ?? target.maxOutputTokens;
  if (maxTokens !== undefined) call.maxOutputTokens = maxTokens;
  if (o.temperature !== undefined) call.temperature = o.temperature;
  if (request.tools.length) {
    call.tools = request.tools.map((t) => ({
      type: "function" as const,
      name: t.name,
      description: t.description,
      inputSchema: t.parameters as never,
    }));
    if (o.toolChoice) call.toolChoice = { type: o.toolChoice };
  }
  if (target.provider.startsWith("anthropic")) cacheBreakpoints(call, chooseCacheTier(request));
  if (o.output) call.responseFormat = { type: "json", name: o.output.name, schema: o.output.schema as never };
  const extra = o.extra ?? {};
  for (const key of PASSTHROUGH) if (extra[key] !== undefined) (call as Record<string, unknown>)[key] = extra[key];
  // The wire names Keel's native adapters take, for configs written for them.
  const stop = extra.stop ?? extra.stop_sequences;
  if (call.stopSequences === undefined && stop !== undefined)
    call.stopSequences = (Array.isArray(stop) ? stop : [stop]).filter((s): s is string => typeof s === "string");
  return call;
}

/**
 * Anthropic prompt caching as the native adapter places it: breakpoints on the last tool, the
 * system prompt and the last message's last part (`providerOptions.anthropic.cacheControl`).
 */
function cacheBreakpoints(call: LanguageModelV4CallOptions, tier: CacheTier): void {
  if (tier === "none") return;
  const mark = {
    anthropic: { cacheControl: tier === "1h" ? { type: "ephemeral", ttl: "1h" } : { type: "ephemeral" } },
  };
  const tool = call.tools?.at(-1);
  if (tool?.type === "function") tool.providerOptions = mark;
  const system = call.prompt[0];
  if (system?.role === "system") system.providerOptions = mark;
  const last = call.prompt.at(-1);
  const part = last && last.role !== "system" ? last.content.at(-1) : undefined;
  if (part) part.providerOptions = mark;
}

function promptOf(request: ModelRequest, target: PromptTarget): LanguageModelV4Prompt {
  const prompt: LanguageModelV4Message[] = [];
  if (request.system) prompt.push({ role: "system", content: request.system });
  for (const m of request.messages) {
    if (m.role === "tool") {
      const last = prompt.at(-1);
      const part = toolResult(m, target);
      // Consecutive results answer one assistant message: one `tool` message holds them all.
      if (last?.role === "tool") last.content.push(part);
      else prompt.push({ role: "tool", content: [part] });
    } else if (m.role === "assistant") {
      const content = assistantParts(m, target);
      if (content.length) prompt.push({ role: "assistant", content });
    } else prompt.push({ role: "user", content: m.content.map((b) => userPart(b, target)) });
  }
  return prompt;
}

type UserPart = Extract<LanguageModelV4Message, { role: "user" }>["content"][number];
type AssistantPart = Extract<LanguageModelV4Message, { role: "assistant" }>["content"][number];
type ToolResultPart = Extract<
  Extract<LanguageModelV4Message, { role: "tool" }>["content"][number],
  { type: "tool-result" }
>;

function fileData(data: string, target: PromptTarget): never {
  return (target.version === "v3" ? data : { type: "data", data }) as never;
}

function userPart(b: ContentBlock, target: PromptTarget): UserPart {
  if (b.type === "text") return { type: "text", text: b.text };
  return {
    type: "file",
    mediaType: b.mediaType,
    data: fileData(b.data, target),
    ...(b.type === "file" && b.name !== undefined ? { filename: b.name } : {}),
  };
}

function assistantParts(m: AssistantMessage, target: PromptTarget): AssistantPart[] {
  const out: AssistantPart[] = [];
  for (const b of m.content) {
    if (b.type === "text") {
      if (b.text) out.push({ type: "text", text: b.text });
    } else if (b.type === "tool_call") {
      out.push({ type: "tool-call", toolCallId: b.id, toolName: b.name, input: b.args });
    } else {
      // Reasoning travels back only to the provider that produced it (signatures are its own).
      const data = b.providerData as Partial<AiSdkReasoningData> | undefined;
      if (data?.provider !== "ai-sdk" || data.model !== target.provider) continue;
      out.push({
        type: "reasoning",
        text: b.text,
        ...(data.metadata ? { providerOptions: data.metadata as never } : {}),
      });
    }
  }
  return out;
}

function toolResult(m: ToolResultMessage, target: PromptTarget): ToolResultPart {
  const text = m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n");
  const files = m.content.filter((b) => b.type !== "text");
  const base = { type: "tool-result" as const, toolCallId: m.toolCallId, toolName: m.toolName };
  if (m.isError) return { ...base, output: { type: "error-text", value: text } };
  if (!files.length) return { ...base, output: { type: "text", value: text } };
  const value = m.content.map((b) =>
    b.type === "text"
      ? { type: "text" as const, text: b.text }
      : target.version === "v3"
        ? { type: "file-data", data: b.data, mediaType: b.mediaType }
        : { type: "file" as const, data: { type: "data" as const, data: b.data }, mediaType: b.mediaType },
  );
  return { ...base, output: { type: "content", value: value as never } };
}
