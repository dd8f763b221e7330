/** Message helpers: text, stable keys, call/result blocks and the edits that turn one history into another. */
import type { Message, MessageEdit, ToolResultMessage } from "@keel/kernel";

/** Prefix of a masked tool output's stub. */
export const MASK_PREFIX = "[masked tool output";
/** Prefix of a TACO digest's header line. */
export const DIGEST_PREFIX = "[digest of tool output";
/** Prefix of a structured summary message. */
export const SUMMARY_PREFIX = "[summary of earlier conversation";

const READ_BACK =
  /: (?:[\w-]+, )?\d+(?: → ~\d+)? tokens(?:, \d+ lines)?|(?:[Rr]ead (?:it|them) with|full output:) [\w-]+\(id="[^"]*"[^)]*\)(?:, \d+ lines)?|\b[Ss]tored as [\w-]+/g;

/**
 * `text` without the sizes and read-back instructions of this plugin's stubs and digest
 * headers (their ids, token and line counts are no facts of the conversation).
 */
export function withoutReadBack(text: string): string {
  return text.includes("[") ? text.replace(READ_BACK, "") : text;
}

/** A run that can open or close a Markdown code fence. */
const FENCE_RUN = /`{3,}|~{3,}/g;
/** A line that opens or closes a fence (a backtick fence's info string has no backtick; a tilde fence's, anything, a "\r" too). */
const FENCE_LINE = /^ {0,3}(?:`{3,}[^`]*|~{3,}[\s\S]*)$/;
/** The marker run of a fence line: of one character only ("```~~~" is a backtick fence with info "~~~"). */
const FENCE_MARK = /^ {0,3}(`{3,}|~{3,})/;
/** Line ends as CommonMark has them ("\r\n", "\r", "\n"). */
const LINE_END = /\r\n?|\n/;

/** True when `line` (without its line end) opens or closes a Markdown code fence. */
export function isFenceLine(line: string): boolean {
  return FENCE_LINE.test(line);
}

/**
 * One line of text that opens no code fence: the text before its first fence run (``` or
 * ~~~) when there is any, else the line with each run shortened to one backtick or tilde
 * (inline code, harmless when unpaired). Contract: the result contains no "```" or "~~~".
 */
export function withoutFence(line: string): string {
  const at = line.search(FENCE_RUN);
  if (at < 0) return line;
  const before = line.slice(0, at).trim();
  return before || line.replace(FENCE_RUN, (run) => run[0]!).trim();
}

/**
 * `text` with a fence it leaves open closed by a last line of the same marker (a cut or a
 * model may leave one open: everything after it would read as code).
 */
export function closeFences(text: string): string {
  let open = "";
  for (const line of text.split(LINE_END)) {
    if (!FENCE_LINE.test(line)) continue;
    if (!open) open = FENCE_MARK.exec(line)![1]!;
    else if (closesFence(line, open)) open = "";
  }
  return open ? `${text}\n${open}` : text;
}

/** List item and blockquote markers before a line's content. */
const CONTAINER = /^(?: {0,3}(?:>|[-*+]|\d{1,9}[.)])[ \t]*)+/;
/** Blockquote marks before a line's content. */
const QUOTE_MARKS = /^(?: {0,3}>[ \t]?)+/;

/** True when `line` closes a fence opened by the run `open` (same character, at least as long, nothing after it). */
function closesFence(line: string, open: string): boolean {
  const run = FENCE_MARK.exec(line)?.[1];
  return !!run && run[0] === open[0] && run.length >= open.length && !line.trim().slice(run.length).trim();
}

/**
 * The first sentence (or line) of `text`, trimmed, uncut, opening no code fence. Contract: a
 * sentence ends at ".", "!" or "?" (and ":" when `colon`) followed by whitespace, or at a line
 * break; a text that opens with a fenced block gives the first sentence of its first code
 * line that is no fence line (an empty block: of what follows it); the result never contains
 * "```" or "~~~" (see `withoutFence`).
 */
export function firstSentenceOf(text: string, colon = false): string {
  const split = colon ? /(?<=[.!?:])\s+/ : /(?<=[.!?])\s+/;
  const lines = text.trim().split(LINE_END);
  // A fence opened inside a list item or a blockquote ("- ```py", "> ```sh"): its marker and the quote marks of its lines go.
  const inContainer = CONTAINER.exec(lines[0]!);
  if (inContainer && FENCE_LINE.test(lines[0]!.slice(inContainer[0].length))) {
    lines[0] = lines[0]!.slice(inContainer[0].length);
    for (let j = 1; j < lines.length; j++) lines[j] = lines[j]!.replace(QUOTE_MARKS, "");
  }
  let i = 0;
  // Skip whole blocks that hold no code line (one pass over the lines, however many blocks).
  while (i < lines.length && FENCE_LINE.test(lines[i]!)) {
    const open = FENCE_MARK.exec(lines[i]!)![1]!;
    for (i++; i < lines.length && !closesFence(lines[i]!, open); i++)
      if (lines[i]!.trim() && !FENCE_LINE.test(lines[i]!)) return withoutFence(lines[i]!.trim().split(split)[0]!);
    for (i++; i < lines.length && !lines[i]!.trim(); i++);
  }
  return withoutFence((lines[i] ?? "").trim().split(split)[0]!);
}

/** All text a message carries: text, thinking, tool call names and arguments. */
export function fullText(m: Message): string {
  const parts: string[] = [];
  for (const b of m.content) {
    if (b.type === "text" || b.type === "thinking") parts.push(b.text);
    else if (b.type === "tool_call")
      parts.push(`${b.name} ${typeof b.args === "string" ? b.args : JSON.stringify(b.args ?? {})}`);
  }
  return parts.join("\n");
}

/** The text blocks of a message joined with newlines. */
export function plainText(m: Message): string {
  return m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n");
}

/** True when a tool result is already a stub or a digest made by this plugin. */
export function isCompacted(m: Message): boolean {
  if (m.role !== "tool") return false;
  const first = m.content[0];
  return first?.type === "text" && (first.text.startsWith(MASK_PREFIX) || first.text.startsWith(DIGEST_PREFIX));
}

/** True when a message is a summary made by this plugin. */
export function isSummary(m: Message): boolean {
  const first = m.content[0];
  return m.role === "user" && first?.type === "text" && first.text.startsWith(SUMMARY_PREFIX);
}

function hash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(36);
}

/**
 * A key per message that survives masking and re-indexing: `r:<callId>` for results,
 * `a:<firstCallId>` for assistant messages with calls, else role + text hash + occurrence.
 */
export function messageKeys(messages: readonly Message[]): string[] {
  const seen = new Map<string, number>();
  return messages.map((m) => {
    if (m.role === "tool") return `r:${m.toolCallId}`;
    const call = m.role === "assistant" ? m.content.find((b) => b.type === "tool_call") : undefined;
    if (call && call.type === "tool_call") return `a:${call.id}`;
    const base = `${m.role[0]}:${hash(fullText(m))}`;
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    return `${base}#${n}`;
  });
}

/** A unit that is never split: a user message, or an assistant message with its results. */
export interface Block {
  start: number;
  /** Exclusive. */
  end: number;
}

/** The blocks of a history, in order. Contract: they tile 0..messages.length exactly. */
export function blocksOf(messages: readonly Message[]): Block[] {
  const out: Block[] = [];
  let i = 0;
  while (i < messages.length) {
    const start = i;
    const m = messages[i++]!;
    if (m.role === "assistant") while (i < messages.length && messages[i]!.role === "tool") i++;
    out.push({ start, end: i });
  }
  return out;
}

/**
 * The edits that turn `before` into `after`, where `after` keeps the messages it did not
 * change as the same objects, in the same order.
 * Contract: applying the edits in order to `before` (applyMessageEdits) yields `after`;
 * a one-for-one change of a tool result with the same call id is a `mask_tool_result`.
 */
export function diffEdits(before: readonly Message[], after: readonly Message[]): MessageEdit[] {
  const kept = new Set(after);
  const hunks: Array<{ start: number; end: number; messages: Message[] }> = [];
  let i = 0;
  let j = 0;
  while (i < before.length || j < after.length) {
    if (i < before.length && j < after.length && before[i] === after[j]) {
      i++;
      j++;
      continue;
    }
    let k = i;
    while (k < before.length && !kept.has(before[k]!)) k++;
    const stop = k < before.length ? after.indexOf(before[k]!, j) : after.length;
    hunks.push({ start: i, end: k, messages: after.slice(j, stop) });
    i = k;
    j = stop;
  }
  const ids = new Map<string, number>();
  for (const m of [...before, ...after]) if (m.role === "tool") ids.set(m.toolCallId, (ids.get(m.toolCallId) ?? 0) + 1);
  const edits: MessageEdit[] = [];
  const ranged: MessageEdit[] = [];
  for (const h of hunks) {
    const masks =
      h.end - h.start === h.messages.length &&
      h.messages.every((m, x) => {
        const old = before[h.start + x]!;
        return (
          m.role === "tool" &&
          old.role === "tool" &&
          ids.get(old.toolCallId) === 2 &&
          m.toolCallId === old.toolCallId &&
          m.content.length === 1 &&
          m.content[0]!.type === "text" &&
          m.isError === old.isError
        );
      });
    if (masks) {
      for (const m of h.messages)
        edits.push({ op: "mask_tool_result", toolCallId: (m as ToolResultMessage).toolCallId, text: plainText(m) });
    } else ranged.push({ op: "replace", start: h.start, end: h.end, messages: h.messages });
  }
  // Later ranges first, so earlier indices stay valid.
  ranged.reverse();
  return [...ranged, ...edits];
}
