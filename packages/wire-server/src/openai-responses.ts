/** OpenAI Responses API: streamed events. */
import {
  argsText,
  makeId,
  type RenderedStream,
  pieces,
  signatureFits,
  signText,
  sse,
  textChunks,
  usageOf,
} from "./common.ts";
import { openaiErrorObject } from "./openai-chat.ts";
import type { WireReply } from "./types.ts";

export function renderResponses(reply: WireReply, body: any): RenderedStream {
  const usage = usageOf(reply, body);
  const frames: string[] = [];
  let seq = 0;
  const emit = (type: string, data: object) => frames.push(sse({ type, ...data, sequence_number: seq++ }, type));
  const response = {
    id: makeId("resp_", 40),
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status: "in_progress",
    error: null,
    incomplete_details: null,
    instructions: body?.instructions ?? null,
    model: reply.model ?? body?.model ?? "gpt-5",
    output: [] as unknown[],
    parallel_tool_calls: true,
    store: body?.store ?? true,
    tools: body?.tools ?? [],
    usage: null as unknown,
  };
  emit("response.created", { response });
  emit("response.in_progress", { response });
  const output: unknown[] = [];
  const wantsEncrypted = Array.isArray(body?.include) && body.include.includes("reasoning.encrypted_content");
  if (reply.thinking) {
    const t = reply.thinking;
    const item_id = makeId("rs_", 40);
    const output_index = output.length;
    emit("response.output_item.added", { output_index, item: { id: item_id, type: "reasoning", summary: [] } });
    emit("response.reasoning_summary_part.added", {
      item_id,
      output_index,
      summary_index: 0,
      part: { type: "summary_text", text: "" },
    });
    for (const delta of pieces(reply, t.text, t.chunks ?? 2))
      emit("response.reasoning_summary_text.delta", { item_id, output_index, summary_index: 0, delta });
    emit("response.reasoning_summary_text.done", { item_id, output_index, summary_index: 0, text: t.text });
    emit("response.reasoning_summary_part.done", {
      item_id,
      output_index,
      summary_index: 0,
      part: { type: "summary_text", text: t.text },
    });
    const item = {
      id: item_id,
      type: "reasoning",
      summary: [{ type: "summary_text", text: t.text }],
      ...(wantsEncrypted ? { encrypted_content: t.encrypted ?? signText(t.text) } : {}),
    };
    emit("response.output_item.done", { output_index, item });
    output.push(item);
  }
  if (reply.text) {
    const item_id = makeId("msg_", 40);
    const output_index = output.length;
    emit("response.output_item.added", {
      output_index,
      item: { id: item_id, type: "message", status: "in_progress", content: [], role: "assistant" },
    });
    emit("response.content_part.added", {
      item_id,
      output_index,
      content_index: 0,
      part: { type: "output_text", annotations: [], logprobs: [], text: "" },
    });
    for (const delta of pieces(reply, reply.text, textChunks(reply)))
      emit("response.output_text.delta", { item_id, output_index, content_index: 0, delta, logprobs: [] });
    const part = { type: "output_text", annotations: [], logprobs: [], text: reply.text };
    emit("response.output_text.done", { item_id, output_index, content_index: 0, text: reply.text, logprobs: [] });
    emit("response.content_part.done", { item_id, output_index, content_index: 0, part });
    const item = { id: item_id, type: "message", status: "completed", content: [part], role: "assistant" };
    emit("response.output_item.done", { output_index, item });
    output.push(item);
  }
  for (const call of reply.toolCalls ?? []) {
    const item_id = makeId("fc_", 40);
    const output_index = output.length;
    const call_id = call.id ?? makeId("call_");
    const args = argsText(call);
    emit("response.output_item.added", {
      output_index,
      item: { id: item_id, type: "function_call", status: "in_progress", arguments: "", call_id, name: call.name },
    });
    for (const delta of pieces(reply, args, call.chunks ?? 2))
      emit("response.function_call_arguments.delta", { item_id, output_index, delta });
    emit("response.function_call_arguments.done", { item_id, output_index, arguments: args });
    const item = { id: item_id, type: "function_call", status: "completed", arguments: args, call_id, name: call.name };
    emit("response.output_item.done", { output_index, item });
    output.push(item);
  }
  const finishAt = frames.length;
  const incomplete = reply.stopReason === "max_tokens";
  emit(incomplete ? "response.incomplete" : "response.completed", {
    response: {
      ...response,
      status: incomplete ? "incomplete" : "completed",
      incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
      output,
      usage: {
        input_tokens: usage.input + usage.cacheRead,
        input_tokens_details: { cached_tokens: usage.cacheRead },
        output_tokens: usage.output,
        output_tokens_details: { reasoning_tokens: usage.reasoning },
        total_tokens: usage.input + usage.cacheRead + usage.output,
      },
    },
  });
  return {
    frames,
    finishAt,
    errorFrames(kind, afterFrames, failed) {
      const e = openaiErrorObject(kind, "responses");
      const sequence_number = Math.min(afterFrames, finishAt);
      if (failed)
        return [
          sse(
            {
              type: "response.failed",
              response: {
                ...response,
                status: "failed",
                error: { code: e.code ?? "server_error", message: e.message },
              },
              sequence_number,
            },
            "response.failed",
          ),
        ];
      return [
        sse({ type: "error", code: e.code ?? e.type, message: e.message, param: e.param, sequence_number }, "error"),
      ];
    },
  };
}

/** Checks the real API would make; returns the problem or undefined. */
export function checkResponses(body: any): string | undefined {
  if (typeof body?.model !== "string") return "Missing required parameter: 'model'.";
  const input = typeof body.input === "string" ? [] : body.input;
  if (!Array.isArray(input)) return "Missing required parameter: 'input'.";
  const calls = new Set<string>();
  for (const [i, item] of input.entries()) {
    if (item?.type === "function_call") calls.add(item.call_id);
    if (item?.type === "function_call_output" && !calls.has(item.call_id))
      return `No tool call found for function call output with call_id ${item.call_id}. (input[${i}])`;
    if (item?.type === "reasoning" && body.store === false && !item.encrypted_content)
      return `Item with id '${item.id}' not found. Items are not persisted when \`store\` is set to false. (input[${i}])`;
    if (
      item?.type === "reasoning" &&
      !signatureFits(item.encrypted_content, (item.summary ?? []).map((p: any) => p?.text ?? "").join(""))
    )
      return `The encrypted content for item ${item.id} could not be verified. (input[${i}])`;
  }
  const format = body.text?.format;
  if (format?.type === "json_schema") {
    if (typeof format.name !== "string") return "Missing required parameter: 'text.format.name'.";
    if (format.schema === null || typeof format.schema !== "object")
      return "Missing required parameter: 'text.format.schema'.";
  }
  if (body.stream !== true) return "wire-server: only streaming requests (`stream: true`) are emulated";
  return undefined;
}
