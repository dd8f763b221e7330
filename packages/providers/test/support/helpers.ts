/** Shared helpers of the provider tests: run a provider to the end and keep what it said. */
import type { Message, ModelEvent, ModelProvider, ModelRequest, ToolSchema } from "@keel/kernel";
import { ProviderError } from "@keel/kernel";

/** What one stream produced. */
export interface Run {
  events: ModelEvent[];
  response?: Extract<ModelEvent, { type: "response" }>;
  error?: ProviderError;
  notices: Extract<ModelEvent, { type: "notice" }>[];
  text: string;
}

/** Consume a provider's stream; a thrown ProviderError is returned, anything else rethrown. */
export async function run(
  provider: ModelProvider,
  request: ModelRequest,
  signal: AbortSignal = new AbortController().signal,
  onEvent?: (e: ModelEvent) => void,
): Promise<Run> {
  const events: ModelEvent[] = [];
  const out: Run = { events, notices: [], text: "" };
  try {
    for await (const e of provider.stream(request, { signal })) {
      events.push(e);
      onEvent?.(e);
      if (e.type === "response") out.response = e;
      if (e.type === "notice") out.notices.push(e);
      if (e.type === "text_delta") out.text += e.text;
    }
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    out.error = err;
  }
  return out;
}

/** A request with one user message. */
export function ask(text: string, extra: Partial<ModelRequest> = {}): ModelRequest {
  return {
    system: "You are terse.",
    messages: [{ role: "user", content: [{ type: "text", text }] }],
    tools: [],
    options: {},
    ...extra,
  };
}

export const weatherTool: ToolSchema = {
  name: "get_weather",
  description: "Weather for a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
export const timeTool: ToolSchema = {
  name: "get_time",
  description: "Time in a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

/** The conversation after the model's answer and one result per tool call. */
export function withResults(
  request: ModelRequest,
  answer: Extract<Message, { role: "assistant" }>,
  result = "sunny",
): ModelRequest {
  const results: Message[] = answer.content.flatMap((b) =>
    b.type === "tool_call"
      ? [
          {
            role: "tool" as const,
            toolCallId: b.id,
            toolName: b.name,
            content: [{ type: "text" as const, text: result }],
            isError: false,
          },
        ]
      : [],
  );
  return { ...request, messages: [...request.messages, answer, ...results] };
}

/** Fast retry settings for tests. */
export const FAST = { maxRetries: 2, streamRetries: 2, streamBackoffMs: 10 } as const;
