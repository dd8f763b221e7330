/** Anthropic Messages API: streamed events and error bodies. */
import {
  argsText,
  makeId,
  type RenderedError,
  type RenderedStream,
  pieces,
  signatureFits,
  signText,
  sse,
  textChunks,
  usageOf,
} from "./common.ts";
import type { WireErrorKind, WireReply } from "./types.ts";

const ERRORS: Record<WireErrorKind, { status: number; type: string; message: string }> = {
  rate_limit: {
    status: 429,
    type: "rate_limit_error",
    message:
      "This request would exceed the rate limit for your organization of 50 requests per minute. Try again later.",
  },
  overloaded: { status: 529, type: "overloaded_error", message: "Overloaded" },
  server_error: { status: 500, type: "api_error", message: "Internal server error" },
  auth: { status: 401, type: "authentication_error", message: "invalid x-api-key" },
  context_length: {
    status: 400,
    type: "invalid_request_error",
    message: "prompt is too long: 208512 tokens > 200000 maximum",
  },
  invalid_request: { status: 400, type: "invalid_request_error", message: "messages: field required" },
};

export function anthropicError(kind: WireErrorKind, message?: string, status?: number): RenderedError {
  const e = ERRORS[kind];
  const requestId = makeId("req_011C");
  return {
    status: status ?? e.status,
    body: { type: "error", error: { type: e.type, message: message ?? e.message }, request_id: requestId },
    headers: { "request-id": requestId },
  };
}

export function renderAnthropic(reply: WireReply, body: any): RenderedStream {
  const usage = usageOf(reply, body);
  const model = reply.model ?? (typeof body?.model === "string" ? body.model : "claude-sonnet-4-5");
  const inputUsage = {
    input_tokens: usage.input,
    cache_creation_input_tokens: usage.cacheWrite + usage.cacheWrite1h,
    cache_read_input_tokens: usage.cacheRead,
    cache_creation: { ephemeral_5m_input_tokens: usage.cacheWrite, ephemeral_1h_input_tokens: usage.cacheWrite1h },
  };
  const frames: string[] = [];
  frames.push(
    sse(
      {
        type: "message_start",
        message: {
          id: makeId("msg_01"),
          type: "message",
          role: "assistant",
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { ...inputUsage, output_tokens: 1, service_tier: "standard" },
        },
      },
      "message_start",
    ),
  );
  let index = 0;
  const block = (start: unknown, deltas: unknown[]) => {
    frames.push(sse({ type: "content_block_start", index, content_block: start }, "content_block_start"));
    if (index === 0) frames.push(sse({ type: "ping" }, "ping"));
    for (const d of deltas) frames.push(sse({ type: "content_block_delta", index, delta: d }, "content_block_delta"));
    frames.push(sse({ type: "content_block_stop", index }, "content_block_stop"));
    index++;
  };
  if (reply.thinking) {
    const t = reply.thinking;
    if (t.redactedData !== undefined) block({ type: "redacted_thinking", data: t.redactedData }, []);
    else {
      const deltas: unknown[] = pieces(reply, t.text, t.chunks ?? 2).map((thinking) => ({
        type: "thinking_delta",
        thinking,
      }));
      deltas.push({ type: "signature_delta", signature: t.signature ?? signText(t.text) });
      block({ type: "thinking", thinking: "", signature: "" }, deltas);
    }
  }
  if (reply.text)
    block(
      { type: "text", text: "" },
      pieces(reply, reply.text, textChunks(reply)).map((text) => ({ type: "text_delta", text })),
    );
  for (const call of reply.toolCalls ?? []) {
    const args = argsText(call);
    block(
      { type: "tool_use", id: call.id ?? makeId("toolu_01"), name: call.name, input: {} },
      pieces(reply, args, call.chunks ?? 2).map((partial_json) => ({ type: "input_json_delta", partial_json })),
    );
  }
  const finishAt = frames.length;
  const stop = reply.stopReason ?? (reply.toolCalls?.length ? "tool_use" : "end_turn");
  frames.push(
    sse(
      {
        type: "message_delta",
        delta: { stop_reason: stop, stop_sequence: null },
        usage: { ...inputUsage, output_tokens: usage.output },
      },
      "message_delta",
    ),
  );
  frames.push(sse({ type: "message_stop" }, "message_stop"));
  return {
    frames,
    finishAt,
    errorFrames(kind) {
      const e = ERRORS[kind];
      return [sse({ type: "error", error: { type: e.type, message: e.message } }, "error")];
    },
  };
}

/** Checks the real API would make; returns the problem or undefined. */
export function checkAnthropic(body: any): string | undefined {
  if (typeof body?.model !== "string") return "model: Field required";
  if (typeof body.max_tokens !== "number") return "max_tokens: Field required";
  if (!Array.isArray(body.messages) || !body.messages.length) return "messages: at least one message is required";
  if (body.messages[0].role !== "user") return 'messages: first message must use the "user" role';
  let breakpoints = 0;
  const count = (b: any) => {
    if (b && typeof b === "object" && b.cache_control) breakpoints++;
  };
  for (const t of body.tools ?? []) count(t);
  if (Array.isArray(body.system)) for (const b of body.system) count(b);
  let previousToolUses = new Set<string>();
  for (const [i, m] of body.messages.entries()) {
    const blocks = typeof m.content === "string" ? [] : (m.content ?? []);
    for (const b of blocks) count(b);
    if (m.role === "user") {
      for (const b of blocks) {
        if (b.type === "tool_result" && !previousToolUses.has(b.tool_use_id)) {
          return `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${b.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
        }
      }
      const answered = new Set(blocks.filter((b: any) => b.type === "tool_result").map((b: any) => b.tool_use_id));
      const missing = [...previousToolUses].filter((id) => !answered.has(id));
      if (missing.length)
        return `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`;
      previousToolUses = new Set();
    } else {
      previousToolUses = new Set(blocks.filter((b: any) => b.type === "tool_use").map((b: any) => b.id));
      for (const [j, b] of blocks.entries()) {
        if (b.type === "thinking" && typeof b.signature !== "string")
          return `messages.${i}.content.${j}.thinking.signature: Field required`;
        if (b.type === "thinking" && !signatureFits(b.signature, b.thinking ?? ""))
          return `messages.${i}.content.${j}: Invalid \`signature\` in \`thinking\` block`;
      }
    }
  }
  // With thinking on, the assistant message that made the latest tool calls must still start with its thinking.
  const lastAssistant = body.messages.findLastIndex((m: any) => m.role === "assistant");
  const lastBlocks =
    lastAssistant >= 0 && Array.isArray(body.messages[lastAssistant].content)
      ? body.messages[lastAssistant].content
      : [];
  if (
    body.thinking?.type === "enabled" &&
    lastBlocks.some((b: any) => b?.type === "tool_use") &&
    lastBlocks[0]?.type !== "thinking" &&
    lastBlocks[0]?.type !== "redacted_thinking"
  ) {
    return `messages.${lastAssistant}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${lastBlocks[0]?.type}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (preceeding the lastmost set of \`tool_use\` and \`tool_result\` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable \`thinking\`.`;
  }
  const usesTools = body.messages.some(
    (m: any) =>
      Array.isArray(m.content) && m.content.some((b: any) => b?.type === "tool_use" || b?.type === "tool_result"),
  );
  if (usesTools && !(Array.isArray(body.tools) && body.tools.length))
    return "Requests which include `tool_use` or `tool_result` blocks must define tools.";
  if (breakpoints > 4) return `A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints}.`;
  const choice = body.tool_choice;
  if (choice !== undefined) {
    const names = new Set((Array.isArray(body.tools) ? body.tools : []).map((t: any) => t?.name));
    if ((choice?.type === "any" || choice?.type === "tool") && !names.size)
      return "tool_choice: tool_choice may only be specified while providing tools.";
    if (choice?.type === "tool" && !names.has(choice.name))
      return `tool_choice.name: Tool '${String(choice.name)}' not found in provided tools`;
    if ((choice?.type === "any" || choice?.type === "tool") && body.thinking?.type === "enabled")
      return "Thinking may not be enabled when tool_choice forces tool use.";
  }
  if (body.stream !== true) return "wire-server: only streaming requests (`stream: true`) are emulated";
  return undefined;
}
