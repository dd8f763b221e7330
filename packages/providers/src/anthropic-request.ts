/** Kernel request → Anthropic Messages request body. */
import type { CacheTier, ContentBlock, Message, ModelRequest } from "@keel/kernel";

type Block = Record<string, unknown>;
interface Turn {
  role: "user" | "assistant";
  content: Block[];
}

/** Thinking data this adapter stores in `providerData`. */
export interface AnthropicThinkingData {
  provider: "anthropic";
  signature?: string;
  /** redacted_thinking data. */
  data?: string;
}

function isAnthropicThinking(d: unknown): d is AnthropicThinkingData {
  return typeof d === "object" && d !== null && (d as { provider?: unknown }).provider === "anthropic";
}

function userBlocks(content: readonly ContentBlock[]): Block[] {
  const out: Block[] = [];
  for (const b of content) {
    if (b.type === "text") {
      if (b.text) out.push({ type: "text", text: b.text });
    } else if (b.type === "image")
      out.push({ type: "image", source: { type: "base64", media_type: b.mediaType, data: b.data } });
    else
      out.push({
        type: "document",
        source: { type: "base64", media_type: b.mediaType, data: b.data },
        ...(b.name ? { title: b.name } : {}),
      });
  }
  return out;
}

/** Messages in Anthropic's shape: consecutive same-role turns merged, tool results first in their user turn. */
export function toAnthropicMessages(messages: readonly Message[]): Turn[] {
  const turns: Turn[] = [];
  const push = (role: Turn["role"], blocks: Block[]) => {
    if (!blocks.length) return;
    const last = turns[turns.length - 1];
    if (last && last.role === role) last.content.push(...blocks);
    else turns.push({ role, content: blocks });
  };
  for (const m of messages) {
    if (m.role === "user") push("user", userBlocks(m.content));
    else if (m.role === "tool") {
      const content = userBlocks(m.content);
      push("user", [
        {
          type: "tool_result",
          tool_use_id: m.toolCallId,
          content: content.length ? content : [{ type: "text", text: "(no output)" }],
          ...(m.isError ? { is_error: true } : {}),
        },
      ]);
    } else {
      const blocks: Block[] = [];
      for (const b of m.content) {
        if (b.type === "text") {
          if (b.text) blocks.push({ type: "text", text: b.text });
        } else if (b.type === "thinking") {
          // Only this provider's thinking goes back, verbatim with its signature.
          if (!isAnthropicThinking(b.providerData)) continue;
          if (b.redacted && b.providerData.data !== undefined)
            blocks.push({ type: "redacted_thinking", data: b.providerData.data });
          else if (b.providerData.signature !== undefined)
            blocks.push({ type: "thinking", thinking: b.text, signature: b.providerData.signature });
        } else {
          const args = b.args !== null && typeof b.args === "object" && !Array.isArray(b.args) ? b.args : {};
          blocks.push({ type: "tool_use", id: b.id, name: b.name, input: args });
        }
      }
      push("assistant", blocks);
    }
  }
  // A user turn lists its tool results before anything else.
  for (const t of turns)
    if (t.role === "user" && t.content.some((b) => b.type === "tool_result"))
      t.content.sort((a, b) => Number(b.type === "tool_result") - Number(a.type === "tool_result"));
  return turns;
}

/** The request body (without `stream`). Contract: never mutates `request`; at most 3 cache breakpoints (tools, system, last turn). */
export function anthropicBody(
  request: ModelRequest,
  model: string,
  defaultMaxTokens: number,
  tier: CacheTier,
): Record<string, unknown> {
  const o = request.options;
  const cache = tier === "none" ? undefined : tier === "1h" ? { type: "ephemeral", ttl: "1h" } : { type: "ephemeral" };
  const messages = toAnthropicMessages(request.messages);
  // The API refuses tool_use/tool_result blocks in a request without tools (the kernel's final round).
  if (!request.tools.length) for (const t of messages) t.content = t.content.map(toolBlockAsText);
  const tools = request.tools.map(
    (t) => ({ name: t.name, description: t.description, input_schema: t.parameters }) as Block,
  );
  // Structured output: a tool whose input is the answer, and the model must call a tool.
  const output = o.output;
  if (output)
    tools.push({
      name: output.name,
      description:
        "Give your final answer by calling this tool, with the answer as its input. Call the other tools first if you need them.",
      input_schema: output.schema,
    });
  if (cache) {
    if (tools.length) tools[tools.length - 1] = { ...tools[tools.length - 1], cache_control: cache };
    const lastTurn = messages[messages.length - 1];
    if (lastTurn?.content.length)
      lastTurn.content[lastTurn.content.length - 1] = {
        ...lastTurn.content[lastTurn.content.length - 1],
        cache_control: cache,
      };
  }
  const body: Record<string, unknown> = { model, max_tokens: o.maxTokens ?? defaultMaxTokens, messages };
  if (request.system)
    body.system = cache ? [{ type: "text", text: request.system, cache_control: cache }] : request.system;
  if (tools.length) {
    body.tools = tools;
    if (o.toolChoice) body.tool_choice = { type: o.toolChoice === "required" ? "any" : o.toolChoice };
    // Extended thinking refuses forced tool use: with thinking on, the model is only told to call it.
    const thinking = (o.extra?.thinking as { type?: string } | undefined)?.type === "enabled";
    if (output && !thinking)
      body.tool_choice = request.tools.length ? { type: "any" } : { type: "tool", name: output.name };
  }
  if (o.temperature !== undefined) body.temperature = o.temperature;
  if (o.metadata?.user_id) body.metadata = { user_id: o.metadata.user_id };
  if (o.extra) Object.assign(body, o.extra);
  return body;
}

/** A tool_use / tool_result block rewritten as text, for requests that define no tools. */
function toolBlockAsText(b: Block): Block {
  if (b.type === "tool_use")
    return {
      type: "text",
      text: `[called tool ${String(b.name)} (id ${String(b.id)}) with ${JSON.stringify(b.input)}]`,
    };
  if (b.type !== "tool_result") return b;
  const parts = (b.content as Block[]).map((c) => (c.type === "text" ? String(c.text) : "[image]")).join("\n");
  return {
    type: "text",
    text: `[result of tool call ${String(b.tool_use_id)}${b.is_error ? " (error)" : ""}]\n${parts}`,
  };
}
