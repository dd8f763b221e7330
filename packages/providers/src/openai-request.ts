/** Kernel request → OpenAI Chat Completions / Responses request bodies. */
import type { ContentBlock, ModelRequest } from "@keel/kernel";

/** Reasoning data this adapter stores in a thinking block's `providerData` (Responses API). */
export interface OpenAIReasoningData {
  provider: "openai-responses";
  /** The reasoning output item, verbatim (id, summary, encrypted_content). */
  item: Record<string, unknown>;
}

/** How the chat body is shaped for the server at hand. */
export interface ChatFlavor {
  /** OpenAI itself (`max_completion_tokens`) or a compatible server (`max_tokens`). */
  compatible: boolean;
  includeUsage: boolean;
}

const text = (content: readonly { type: string; text?: string }[]) =>
  content.flatMap((b) => (b.type === "text" ? [b.text ?? ""] : [])).join("");
const dataUrl = (b: Extract<ContentBlock, { type: "image" | "file" }>) => `data:${b.mediaType};base64,${b.data}`;
const fileName = (b: Extract<ContentBlock, { type: "file" }>) => b.name ?? "attachment.pdf";

/** A user content part in Chat Completions' shape. */
function chatPart(b: ContentBlock): Record<string, unknown> {
  if (b.type === "text") return { type: "text", text: b.text };
  if (b.type === "image") return { type: "image_url", image_url: { url: dataUrl(b) } };
  return { type: "file", file: { filename: fileName(b), file_data: dataUrl(b) } };
}

/** A user content part in the Responses API's shape. */
function responsesPart(b: ContentBlock): Record<string, unknown> {
  if (b.type === "text") return { type: "input_text", text: b.text };
  if (b.type === "image") return { type: "input_image", image_url: dataUrl(b), detail: "auto" };
  return { type: "input_file", filename: fileName(b), file_data: dataUrl(b) };
}
const argsJson = (args: unknown) => (typeof args === "string" ? args : JSON.stringify(args ?? {}));

/** The Chat Completions body (with `stream: true`). Contract: never mutates `request`; thinking blocks are not sent back. */
export function chatBody(
  request: ModelRequest,
  model: string,
  flavor: ChatFlavor,
  defaultMaxTokens: number | undefined,
): Record<string, unknown> {
  const o = request.options;
  const messages: Record<string, unknown>[] = [];
  if (request.system) messages.push({ role: "system", content: request.system });
  for (const m of request.messages) {
    if (m.role === "user") {
      const media = m.content.some((b) => b.type !== "text");
      messages.push({ role: "user", content: media ? m.content.map(chatPart) : text(m.content) });
    } else if (m.role === "tool") {
      const images = m.content.filter((b) => b.type === "image").length;
      messages.push({
        role: "tool",
        tool_call_id: m.toolCallId,
        content: text(m.content) + (images ? `\n[${images} image(s) omitted: tool messages carry text only]` : ""),
      });
    } else {
      const calls = m.content.flatMap((b) =>
        b.type === "tool_call"
          ? [{ id: b.id, type: "function", function: { name: b.name, arguments: argsJson(b.args) } }]
          : [],
      );
      const t = text(m.content);
      messages.push({
        role: "assistant",
        content: t || (calls.length ? null : ""),
        ...(calls.length ? { tool_calls: calls } : {}),
      });
    }
  }
  const body: Record<string, unknown> = { model, messages, stream: true };
  if (flavor.includeUsage) body.stream_options = { include_usage: true };
  if (request.tools.length) {
    body.tools = request.tools.map((t) => ({
      type: "function",
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
    if (o.toolChoice) body.tool_choice = o.toolChoice;
  }
  if (o.output)
    body.response_format = {
      type: "json_schema",
      json_schema: { name: o.output.name, schema: o.output.schema, strict: false },
    };
  const maxTokens = o.maxTokens ?? defaultMaxTokens;
  if (maxTokens !== undefined) body[flavor.compatible ? "max_tokens" : "max_completion_tokens"] = maxTokens;
  if (o.temperature !== undefined) body.temperature = o.temperature;
  if (o.extra) Object.assign(body, o.extra);
  return body;
}

/** Settings of the Responses body. */
export interface ResponsesFlavor {
  /** Keep responses on OpenAI's side. Default false: state is carried in the request. */
  store: boolean;
  /** Ask for encrypted reasoning so it can be sent back (reasoning models). */
  encryptedReasoning: boolean;
  reasoning?: { effort?: string; summary?: string } | undefined;
}

/** The Responses body (with `stream: true`). Contract: never mutates `request`; this provider's reasoning items go back verbatim. */
export function responsesBody(
  request: ModelRequest,
  model: string,
  flavor: ResponsesFlavor,
  defaultMaxTokens: number | undefined,
): Record<string, unknown> {
  const o = request.options;
  const input: Record<string, unknown>[] = [];
  for (const m of request.messages) {
    if (m.role === "user") {
      input.push({ role: "user", content: m.content.map(responsesPart) });
    } else if (m.role === "tool") {
      input.push({ type: "function_call_output", call_id: m.toolCallId, output: text(m.content) });
    } else {
      for (const b of m.content) {
        if (b.type === "text") {
          if (b.text) input.push({ role: "assistant", content: b.text });
        } else if (b.type === "thinking") {
          const d = b.providerData as OpenAIReasoningData | undefined;
          if (d?.provider === "openai-responses" && d.item && (flavor.store || d.item.encrypted_content))
            input.push(d.item);
        } else input.push({ type: "function_call", call_id: b.id, name: b.name, arguments: argsJson(b.args) });
      }
    }
  }
  const body: Record<string, unknown> = { model, input, stream: true, store: flavor.store };
  if (request.system) body.instructions = request.system;
  if (flavor.encryptedReasoning) body.include = ["reasoning.encrypted_content"];
  if (flavor.reasoning) body.reasoning = flavor.reasoning;
  if (request.tools.length) {
    body.tools = request.tools.map((t) => ({
      type: "function",
      name: t.name,
      description: t.description,
      parameters: t.parameters,
      strict: false,
    }));
    if (o.toolChoice) body.tool_choice = o.toolChoice;
  }
  if (o.output)
    body.text = { format: { type: "json_schema", name: o.output.name, schema: o.output.schema, strict: false } };
  const maxTokens = o.maxTokens ?? defaultMaxTokens;
  if (maxTokens !== undefined) body.max_output_tokens = maxTokens;
  if (o.temperature !== undefined) body.temperature = o.temperature;
  if (o.metadata) body.metadata = o.metadata;
  if (o.extra) Object.assign(body, o.extra);
  return body;
}
