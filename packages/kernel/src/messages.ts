/**
 * The provider-neutral conversation model. Adapters translate it to and from each
 * provider's wire format; the kernel, the event log and plugins only ever see this.
 */

/** Plain text. Contract: `text` is never undefined; may be empty. */
export interface TextBlock {
  type: "text";
  text: string;
}

/** An image given inline. Contract: `data` is base64 without a data: prefix. */
export interface ImageBlock {
  type: "image";
  mediaType: string;
  data: string;
}

/**
 * Model reasoning. Contract: forwarded verbatim to the next request of the same provider;
 * `providerData` carries opaque fields (signatures, encrypted content) untouched.
 */
export interface ThinkingBlock {
  type: "thinking";
  text: string;
  redacted?: boolean;
  providerData?: unknown;
}

/** A tool call requested by the model. Contract: `id` is unique within the session. */
export interface ToolCallBlock {
  type: "tool_call";
  id: string;
  name: string;
  args: unknown;
}

/**
 * A document the user attached (PDF). Contract: `data` is base64; only user input carries files
 * (tool results do not); a provider that cannot read one refuses the request.
 */
export interface FileBlock {
  type: "file";
  mediaType: string;
  data: string;
  /** The file's name, shown to the model where the provider supports it. */
  name?: string;
}

/** What a turn is given: the user's text, or content blocks (validated and copied by Session.run). */
export type TurnInput = string | readonly ContentBlock[];

/** Content a user message or a tool result may carry. */
export type ContentBlock = TextBlock | ImageBlock | FileBlock;

/** Content of an assistant message. */
export type AssistantBlock = TextBlock | ThinkingBlock | ToolCallBlock;

/** A message from the user (or injected on the user's behalf: steering, follow-up). */
export interface UserMessage {
  role: "user";
  content: ContentBlock[];
}

/** A model reply. Contract: tool calls appear as `tool_call` blocks, in the model's order. */
export interface AssistantMessage {
  role: "assistant";
  content: AssistantBlock[];
}

/**
 * The result of one tool call. Contract: exactly one per `tool_call` block, placed after
 * the assistant message that holds the call and before the next assistant message.
 */
export interface ToolResultMessage {
  role: "tool";
  toolCallId: string;
  toolName: string;
  content: ContentBlock[];
  isError: boolean;
  /** Set when a plugin rewrote the result (e.g. compression); keeps it auditable. */
  rewrittenBy?: string[];
}

/** Any message of the conversation. Contract: messages are immutable once appended. */
export type Message = UserMessage | AssistantMessage | ToolResultMessage;

/** Build a text block list from a string. */
export function textContent(text: string): TextBlock[] {
  return [{ type: "text", text }];
}

/** The concatenated text of a message's text blocks. */
export function messageText(message: Message): string {
  let out = "";
  for (const block of message.content) if (block.type === "text") out += block.text;
  return out;
}

/** The tool calls of an assistant message, in order. */
export function toolCallsOf(message: Message): ToolCallBlock[] {
  if (message.role !== "assistant") return [];
  return message.content.filter((b): b is ToolCallBlock => b.type === "tool_call");
}

/**
 * Freeze a value and everything reachable from it (to a depth of 64, which also ends cycles).
 * Contract: returns its argument; a shallowly frozen parent still gets its parts frozen.
 */
export function freezeDeep<T>(value: T, depth = 0): T {
  if (value !== null && typeof value === "object" && depth < 64) {
    Object.freeze(value);
    if (Array.isArray(value)) for (const v of value) freezeDeep(v, depth + 1);
    else for (const k in value) freezeDeep((value as Record<string, unknown>)[k], depth + 1);
  }
  return value;
}
