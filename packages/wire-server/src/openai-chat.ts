/** OpenAI Chat Completions: streamed chunks, and OpenAI error bodies (shared with the Responses API). */
import {
  argsText,
  makeId,
  type RenderedError,
  type RenderedStream,
  pieces,
  sse,
  textChunks,
  usageOf,
} from "./common.ts";
import type { WireApi, WireErrorKind, WireReply } from "./types.ts";

const ERRORS: Record<
  WireErrorKind,
  { status: number; type: string; code: string | null; param: string | null; message: string }
> = {
  rate_limit: {
    status: 429,
    type: "requests",
    code: "rate_limit_exceeded",
    param: null,
    message:
      "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.",
  },
  overloaded: {
    status: 503,
    type: "server_error",
    code: "server_is_overloaded",
    param: null,
    message: "The server is overloaded, please try again later.",
  },
  server_error: {
    status: 500,
    type: "server_error",
    code: null,
    param: null,
    message: "The server had an error while processing your request.",
  },
  auth: {
    status: 401,
    type: "invalid_request_error",
    code: "invalid_api_key",
    param: null,
    message: "Incorrect API key provided. You can find your API key in your account settings.",
  },
  context_length: {
    status: 400,
    type: "invalid_request_error",
    code: "context_length_exceeded",
    param: "messages",
    message:
      "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.",
  },
  invalid_request: { status: 400, type: "invalid_request_error", code: null, param: null, message: "Invalid request." },
};

/** The `error` object of an OpenAI error body. */
export function openaiErrorObject(
  kind: WireErrorKind,
  api: WireApi,
  message?: string,
): { message: string; type: string; param: string | null; code: string | null } {
  const e = ERRORS[kind];
  const responsesContext = kind === "context_length" && api === "responses";
  return {
    message:
      message ??
      (responsesContext
        ? "Your input exceeds the context window of this model. Please adjust your input and try again."
        : e.message),
    type: e.type,
    param: responsesContext ? "input" : e.param,
    code: e.code,
  };
}

export function openaiError(kind: WireErrorKind, api: WireApi, message?: string, status?: number): RenderedError {
  return {
    status: status ?? ERRORS[kind].status,
    body: { error: openaiErrorObject(kind, api, message) },
    headers: { "x-request-id": makeId("req_", 32) },
  };
}

const FINISH = { end_turn: "stop", tool_use: "tool_calls", max_tokens: "length", refusal: "content_filter" } as const;

export function renderChat(reply: WireReply, body: any): RenderedStream {
  const usage = usageOf(reply, body);
  const includeUsage = body?.stream_options?.include_usage === true;
  const base = {
    id: makeId("chatcmpl-", 29),
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model: reply.model ?? body?.model ?? "gpt-4o",
    service_tier: "default",
    system_fingerprint: "fp_f33640a400",
  };
  const chunk = (delta: object, finish: string | null = null) =>
    sse({
      ...base,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(includeUsage ? { usage: null } : {}),
    });
  const frames: string[] = [chunk({ role: "assistant", content: "", refusal: null })];
  if (reply.thinking)
    for (const piece of pieces(reply, reply.thinking.text, reply.thinking.chunks ?? 2))
      frames.push(chunk({ reasoning_content: piece }));
  if (reply.text)
    for (const piece of pieces(reply, reply.text, textChunks(reply))) frames.push(chunk({ content: piece }));
  const calls = (reply.toolCalls ?? []).map((c, index) => ({
    index,
    id: c.id ?? makeId("call_"),
    name: c.name,
    pieces: pieces(reply, argsText(c), c.chunks ?? 2),
  }));
  const start = (c: (typeof calls)[number]) =>
    chunk({ tool_calls: [{ index: c.index, id: c.id, type: "function", function: { name: c.name, arguments: "" } }] });
  const piece = (c: (typeof calls)[number], p: string) =>
    chunk({ tool_calls: [{ index: c.index, function: { arguments: p } }] });
  if (reply.interleave) {
    for (const c of calls) frames.push(start(c));
    const rounds = Math.max(0, ...calls.map((c) => c.pieces.length));
    for (let r = 0; r < rounds; r++)
      for (const c of calls) if (c.pieces[r] !== undefined) frames.push(piece(c, c.pieces[r]!));
  } else {
    for (const c of calls) {
      frames.push(start(c));
      for (const p of c.pieces) frames.push(piece(c, p));
    }
  }
  const finishAt = frames.length;
  const stop = reply.stopReason ?? (calls.length ? "tool_use" : "end_turn");
  frames.push(chunk({}, FINISH[stop]));
  if (includeUsage) {
    frames.push(
      sse({
        ...base,
        choices: [],
        usage: {
          prompt_tokens: usage.input + usage.cacheRead,
          completion_tokens: usage.output,
          total_tokens: usage.input + usage.cacheRead + usage.output,
          prompt_tokens_details: { cached_tokens: usage.cacheRead, audio_tokens: 0 },
          completion_tokens_details: {
            reasoning_tokens: usage.reasoning,
            audio_tokens: 0,
            accepted_prediction_tokens: 0,
            rejected_prediction_tokens: 0,
          },
        },
      }),
    );
  }
  frames.push("data: [DONE]\n\n");
  return { frames, finishAt, errorFrames: (kind) => [sse({ error: openaiErrorObject(kind, "chat") })] };
}

/** Checks the real API would make; returns the problem or undefined. */
export function checkChat(body: any): string | undefined {
  if (typeof body?.model !== "string") return "you must provide a model parameter";
  if (!Array.isArray(body.messages) || !body.messages.length) return "[] is too short - 'messages'";
  const open = new Set<string>();
  for (const [i, m] of body.messages.entries()) {
    if (m.role === "tool") {
      if (!open.has(m.tool_call_id))
        return `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages.[${i}])`;
      open.delete(m.tool_call_id);
    } else {
      if (open.size)
        return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(", ")}`;
      if (m.role === "assistant") for (const c of m.tool_calls ?? []) open.add(c.id);
    }
  }
  const rf = body.response_format;
  if (rf?.type === "json_schema") {
    if (typeof rf.json_schema?.name !== "string")
      return "Missing required parameter: 'response_format.json_schema.name'.";
    if (rf.json_schema.schema === null || typeof rf.json_schema.schema !== "object")
      return "Invalid type for 'response_format.json_schema.schema': expected an object.";
  }
  if (body.stream !== true) return "wire-server: only streaming requests (`stream: true`) are emulated";
  return undefined;
}
