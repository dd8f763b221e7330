/** Masking: stubs for tool outputs and tool-call arguments, with identifier indexes. */
import type { Message, ToolResultMessage } from "@keel/kernel";
import type { CompactInput, CompactOptions } from "./compact-types.ts";
import { headOf } from "@keel/text";
import { salientIdentifiers } from "./identifiers.ts";
import { closeFences, firstSentenceOf, fullText, MASK_PREFIX, plainText } from "./messages.ts";
import type { CountTokens } from "./reduce.ts";

/**
 * The stub that replaces a masked tool output: its size, how to read it back, and an index
 * of its identifiers (those in `index`, most salient first).
 */
export function maskStub(
  m: ToolResultMessage,
  tokens: number,
  id: string,
  tool: string | false,
  index: readonly string[],
): string {
  const lines = plainText(m).split("\n").length;
  const how = tool ? `; read it with ${tool}(id="${id}", startLine, endLine)` : `; stored as ${id}`;
  return `${MASK_PREFIX}: ${m.toolName}, ${tokens} tokens, ${lines} lines${how}.${index.length ? ` Identifiers: ${index.join(", ")}` : ""}]`;
}

/**
 * The head of `ids` (most salient first) whose index ("a, b, c") costs at most `budget`
 * tokens: a stub's index is sized by what the stub replaces, not by how many identifiers it had.
 * Contract: `count(result.join(", ")) <= budget` (for a counter that grows with the text).
 */
export function indexWithin(ids: readonly string[], budget: number, count: CountTokens): string[] {
  let used = 0;
  const over = ids.findIndex((x) => (used += count(x) + 1) > budget);
  const head = over < 0 ? ids : ids.slice(0, over);
  // Pieces merge differently once joined (hex ids cost ~7% more after ", "): the joined index is
  // counted, and when over, the longest head within the budget found by bisection.
  const cost = (n: number) => count(head.slice(0, n).join(", "));
  if (cost(head.length) <= budget) return [...head];
  let lo = 0;
  let hi = head.length;
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (cost(mid) <= budget) lo = mid;
    else hi = mid;
  }
  return head.slice(0, lo);
}

const idCache = new Map<string, string[]>();
/** Identifiers of a message, salient first (cached by text). */
export function messageIdentifiers(m: Message): string[] {
  const text = fullText(m);
  let ids = idCache.get(text);
  if (!ids) {
    ids = salientIdentifiers(text, Infinity);
    if (idCache.size > 50_000) idCache.clear();
    idCache.set(text, ids);
  }
  return ids;
}

/** How often each identifier is visible across `messages`. */
export function visibility(messages: readonly Message[]): Map<string, number> {
  const seen = new Map<string, number>();
  for (const m of messages) for (const id of messageIdentifiers(m)) seen.set(id, (seen.get(id) ?? 0) + 1);
  return seen;
}

/** Prefix of masked tool-call arguments. */
export const MASKED_ARGS_PREFIX = "[masked arguments";

function argsText(args: unknown): string {
  const a = args as { command?: unknown } | null;
  return a && typeof a === "object" && typeof a.command === "string" && Object.keys(a).length === 1
    ? a.command
    : JSON.stringify(args ?? {}, null, 1);
}

function isMaskedArgs(args: unknown): boolean {
  const v = (args as { masked?: unknown } | null)?.masked;
  return typeof v === "string" && v.startsWith(MASKED_ARGS_PREFIX);
}

/** Tokens of an assistant message's unmasked tool-call arguments. */
export function argsTokens(m: Message, count: CountTokens): number {
  let n = 0;
  for (const b of m.content)
    if (b.type === "tool_call" && !isMaskedArgs(b.args)) n += count(JSON.stringify(b.args ?? {}));
  return n;
}

/** Marker of an assistant text shortened to its first sentence. */
export const SHORTENED_TEXT_MARK = "[rest of this message shortened";

/** Tokens of an assistant message's text blocks not yet shortened. */
export function textTokens(m: Message, count: CountTokens): number {
  let n = 0;
  for (const b of m.content) if (b.type === "text" && !b.text.includes(SHORTENED_TEXT_MARK)) n += count(b.text);
  return n;
}

/** The first sentence (or line) of `text`, at most 200 code points. */
function lead(text: string): string {
  return headOf(firstSentenceOf(text, true), 200);
}

/**
 * The assistant message with the arguments of its calls (when `o.maskArguments`) and its
 * long text blocks (when `o.maskText`) replaced by retrievable stubs; a text keeps its
 * first sentence. The identifiers in `unique` that leave with them are indexed; `key` (the
 * message's stable key) names the stored text.
 * Contract: thinking blocks and call ids and names are never changed; undefined when nothing was masked.
 */
export function maskArgs(
  m: Message,
  input: CompactInput,
  o: CompactOptions,
  unique: readonly string[],
  key = "a",
): { message: Message; id: string } | undefined {
  if (m.role !== "assistant") return undefined;
  const said = new Set(salientIdentifiers(plainText(m), Infinity));
  let id = "";
  const left = new Set(unique);
  const share = o.stubIndexShare ?? 1;
  const content = m.content.map((b, k) => {
    if (b.type === "text" && o.maskText && !b.text.includes(SHORTENED_TEXT_MARK)) {
      const tokens = input.countText(b.text);
      if (tokens < o.minMaskTokens) return b;
      // A fence this block leaves open is continued (and closed) by a later text block: shortened, that closer would open one.
      if (m.content.slice(k + 1).some((x) => x.type === "text") && closeFences(b.text) !== b.text) return b;
      const first = lead(b.text);
      const kept = new Set(salientIdentifiers(first, Infinity));
      const own = salientIdentifiers(b.text, Infinity);
      const index = indexWithin(
        own.filter((x) => left.has(x) && !kept.has(x)).slice(0, o.stubIdentifiers),
        tokens * share,
        input.countText,
      );
      for (const x of index) left.delete(x);
      const raw: ToolResultMessage = {
        role: "tool",
        toolCallId: `${key}#text${k}`,
        toolName: "assistant",
        content: [{ type: "text", text: b.text }],
        isError: false,
      };
      const rid = input.stash(raw, "mask");
      id ||= rid;
      const how = o.retrieveTool ? `; read it with ${o.retrieveTool}(id="${rid}")` : `; stored as ${rid}`;
      return {
        ...b,
        text: `${first} ${SHORTENED_TEXT_MARK}: ${tokens} tokens${how}.${index.length ? ` Identifiers: ${index.join(", ")}` : ""}]`,
      };
    }
    if (b.type !== "tool_call" || !o.maskArguments || isMaskedArgs(b.args)) return b;
    const text = argsText(b.args);
    const tokens = input.countText(text);
    if (tokens < o.minMaskTokens) return b;
    const raw: ToolResultMessage = {
      role: "tool",
      toolCallId: `${b.id}#args`,
      toolName: b.name,
      content: [{ type: "text", text }],
      isError: false,
    };
    const own = new Set(salientIdentifiers(text, Infinity));
    const index = indexWithin(
      [...left].filter((x) => own.has(x) && !said.has(x)).slice(0, o.stubIdentifiers),
      tokens * share,
      input.countText,
    );
    const rid = input.stash(raw, "mask");
    id ||= rid;
    const how = o.retrieveTool ? ` Read them with ${o.retrieveTool}(id="${rid}").` : ` Stored as ${rid}.`;
    return {
      ...b,
      args: {
        masked: `${MASKED_ARGS_PREFIX}: ${tokens} tokens, already executed.${how}${index.length ? ` Identifiers: ${index.join(", ")}` : ""}]`,
      },
    };
  });
  if (!id) return undefined;
  return { message: { role: "assistant", content }, id };
}
