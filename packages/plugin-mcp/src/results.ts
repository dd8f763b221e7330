import type { ContentBlock, ToolOutput } from "@keel/kernel";
import { codePointLength, headOf, toWellFormed } from "@keel/text";

/** A content item of an MCP tool result (the union the protocol defines, read loosely). */
interface McpContent {
  type: string;
  text?: string;
  data?: string;
  mimeType?: string;
  uri?: string;
  name?: string;
  title?: string;
  description?: string;
  resource?: { uri?: string; mimeType?: string; text?: string; blob?: string };
}

/** An MCP `tools/call` result, read loosely. Contract: older servers may send `toolResult` instead of `content`. */
export interface McpCallResult {
  content?: unknown;
  structuredContent?: unknown;
  isError?: boolean;
  toolResult?: unknown;
}

/** What mapping a result produced. Contract: `bytes` is measured before truncation. */
export interface MappedResult {
  output: Exclude<ToolOutput, string>;
  /** UTF-8 bytes of the result content before any truncation. */
  bytes: number;
  truncated: boolean;
}

/**
 * Map an MCP tool result to a kernel tool output.
 * Contract: text stays text; images stay images; audio, resource links and embedded
 * resources become text lines (embedded text resources keep their text, binary ones are
 * summarised, embedded images become images); `structuredContent` is kept in `details` and
 * added as JSON text when no text block carries it; `isError` becomes an error result; text
 * beyond `maxChars` is cut with a marker saying how much was cut.
 */
export function mapCallResult(result: McpCallResult, maxChars: number): MappedResult {
  const blocks: ContentBlock[] = [];
  const items: McpContent[] = Array.isArray(result.content) ? (result.content as McpContent[]) : [];
  for (const c of items) blocks.push(...mapContent(c));
  if (result.structuredContent !== undefined) {
    const json = JSON.stringify(result.structuredContent);
    const text = blocks.map((b) => (b.type === "text" ? b.text : "")).join("\n");
    if (!text.includes(json) && !carriesAll(text, result.structuredContent)) blocks.push({ type: "text", text: json });
  }
  if (!items.length && result.toolResult !== undefined)
    blocks.push({
      type: "text",
      text: typeof result.toolResult === "string" ? result.toolResult : JSON.stringify(result.toolResult),
    });
  let bytes = 0;
  for (const b of blocks) bytes += b.type === "text" ? Buffer.byteLength(b.text) : Math.floor((b.data.length * 3) / 4);
  const cut = capText(blocks, maxChars);
  const output: Exclude<ToolOutput, string> = {
    content: cut.blocks.length ? cut.blocks : [{ type: "text", text: "(no content)" }],
    isError: result.isError === true,
  };
  if (result.structuredContent !== undefined) output.details = { structuredContent: result.structuredContent };
  return { output, bytes, truncated: cut.truncated };
}

/** True when every leaf value of `value` already appears in `text` (the text is the same data). */
function carriesAll(text: string, value: unknown): boolean {
  const leaves: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") leaves.push(String(v));
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") Object.values(v).forEach(walk);
  };
  walk(value);
  return leaves.length > 0 && leaves.every((l) => text.includes(l));
}

function mapContent(c: McpContent): ContentBlock[] {
  switch (c.type) {
    case "text":
      return [{ type: "text", text: c.text ?? "" }];
    case "image":
      return c.data && c.mimeType
        ? [{ type: "image", mediaType: c.mimeType, data: c.data }]
        : [{ type: "text", text: "[image without data]" }];
    case "audio":
      return [
        { type: "text", text: `[audio ${c.mimeType ?? "unknown type"}, ${approxBytes(c.data)} bytes, not shown]` },
      ];
    case "resource_link":
      return [
        {
          type: "text",
          text: `[resource link] ${c.name ?? c.title ?? ""} <${c.uri ?? "?"}>${c.mimeType ? ` (${c.mimeType})` : ""}${c.description ? `: ${c.description}` : ""}`,
        },
      ];
    case "resource": {
      const r = c.resource ?? {};
      if (typeof r.text === "string")
        return [{ type: "text", text: `[resource ${r.uri ?? "?"}${r.mimeType ? ` (${r.mimeType})` : ""}]\n${r.text}` }];
      if (typeof r.blob === "string" && r.mimeType?.startsWith("image/"))
        return [{ type: "image", mediaType: r.mimeType, data: r.blob }];
      return [
        {
          type: "text",
          text: `[resource ${r.uri ?? "?"}${r.mimeType ? ` (${r.mimeType})` : ""}, ${approxBytes(r.blob)} bytes of binary data, not shown]`,
        },
      ];
    }
    default:
      return [{ type: "text", text: JSON.stringify(c) }];
  }
}

function approxBytes(base64: string | undefined): number {
  return base64 ? Math.floor((base64.length * 3) / 4) : 0;
}

/** Text blocks within `maxChars` in all; what is past it is dropped and counted once, in one marker at the cut. */
function capText(blocks: ContentBlock[], maxChars: number): { blocks: ContentBlock[]; truncated: boolean } {
  let room = maxChars;
  let cut: { at: number; chars: number; blocks: number } | undefined;
  const out: ContentBlock[] = [];
  for (const b of blocks) {
    if (b.type !== "text") {
      out.push(b);
      continue;
    }
    const n = codePointLength(b.text);
    if (!cut && n <= room) {
      out.push({ type: "text", text: toWellFormed(b.text) });
      room -= n;
      continue;
    }
    if (!cut) {
      cut = { at: out.length, chars: n - room, blocks: 1 };
      out.push({ type: "text", text: headOf(b.text, room) });
    } else {
      cut.chars += n;
      cut.blocks++;
    }
    room = 0;
  }
  if (cut) {
    const head = out[cut.at] as { type: "text"; text: string };
    out[cut.at] = {
      type: "text",
      text: `${head.text}\n[… output cut: ${cut.chars} more characters${cut.blocks > 1 ? ` in ${cut.blocks} blocks` : ""} not shown]`,
    };
  }
  return { blocks: out, truncated: cut !== undefined };
}
