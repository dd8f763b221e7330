/**
 * Token counting with o200k_base (bpe.ts; the ranks come from js-tiktoken). The vocabulary
 * loads on first use (~40 ms), never at import time, and only when a request may come near
 * the context ceiling; counts are cached per message and per tool object (both are immutable
 * once created), so recounting a long history is cheap.
 */
import { loadO200k, type BpeVocabulary } from "./bpe.ts";
import { fileTokens } from "@keel/kernel";

/**
 * A message as it is counted: any message of the kernel's conversation model is one (this
 * package imports nothing of Keel). Contract: treated as immutable (counts are cached per object).
 */
export interface Message {
  readonly role: string;
  readonly toolName?: string;
  readonly content: ReadonlyArray<{
    readonly type: string;
    readonly text?: string;
    readonly data?: string;
    readonly name?: string;
    readonly args?: unknown;
  }>;
}

/** A tool as it is sent: name, description and JSON Schema parameters. */
export interface ToolSchema {
  readonly name: string;
  readonly description: string;
  readonly parameters: unknown;
}

/** Histories shorter than this are summed again each time; longer ones keep their sums per array. */
const HISTORY_FACTS_MIN = 32;

/** A message's estimate is kept (per object) from this many UTF-8 bytes on; a tool schema's always. */
const ESTIMATE_KEEP_BYTES = 512;

/** Tokens added per message for role and framing. */
export const MESSAGE_OVERHEAD_TOKENS = 4;
/** Flat token count of one image block. */
export const IMAGE_TOKENS = 1_000;

export { fileTokens };

let vocabulary: BpeVocabulary | undefined;
const messageCounts = new WeakMap<Message, number>();
const toolCounts = new WeakMap<ToolSchema, number>();
const estimates = new WeakMap<object, { tokens: number; bound: number }>();
/** Sums over a whole history array (estimate and bound; exact count), kept as it grows by one message at a time. */
const estimateSums = new WeakMap<readonly Message[], { tokens: number; bound: number }>();
const exactSums = new WeakMap<readonly Message[], number>();
/** Pieces (words, punctuation runs) repeat heavily in real text; their counts are memoised. */
const pieceCounts = new Map<string, number>();
const PIECE_CACHE_MAX = 200_000;

function getVocabulary(): BpeVocabulary {
  return (vocabulary ??= loadO200k());
}

/** Pieces longer than this (UTF-16 units) are counted in slices (never cutting a surrogate pair): within a few tokens, and inside the merge's offset range. */
const MAX_PIECE = 1_000_000;

function countLong(v: BpeVocabulary, piece: string): number {
  if (piece.length <= MAX_PIECE) return v.countPiece(piece);
  let n = 0;
  for (let at = 0; at < piece.length; ) {
    let end = Math.min(piece.length, at + MAX_PIECE);
    const c = piece.charCodeAt(end - 1);
    if (end < piece.length && c >= 0xd800 && c <= 0xdbff) end--;
    n += v.countPiece(piece.slice(at, end));
    at = end;
  }
  return n;
}

/** Token count of ordinary text (special-token text counted as plain text). */
function countOrdinary(v: BpeVocabulary, text: string): number {
  // The pre-tokenizer's pieces tile the text, so a sticky test() walks them without building a
  // match array per piece; should a piece ever not start where the last ended, exec() takes over.
  const sticky = v.sticky;
  let n = 0;
  let at = 0;
  sticky.lastIndex = 0;
  while (at < text.length && sticky.test(text)) {
    const end = sticky.lastIndex;
    if (end === at) break;
    n += countPieceCached(v, text.slice(at, end));
    at = end;
  }
  if (at < text.length) {
    const re = v.pattern;
    re.lastIndex = at;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      if (m[0].length === 0) re.lastIndex++;
      else n += countPieceCached(v, m[0]);
    }
  }
  return n;
}

function countPieceCached(v: BpeVocabulary, piece: string): number {
  let c = pieceCounts.get(piece);
  if (c === undefined) {
    c = countLong(v, piece);
    if (pieceCounts.size >= PIECE_CACHE_MAX) pieceCounts.clear();
    // A piece is a slice of the whole text: the key is a flat copy, so the cache never keeps a counted text alive.
    pieceCounts.set(piece.length > 12 ? `${piece} `.slice(0, -1) : piece, c);
  }
  return c;
}

/**
 * A cheap estimate: one token per four characters.
 * Contract: never loads the tokenizer; `Math.ceil(text.length / 4)`.
 */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/**
 * UTF-8 length of `text`: a hard upper bound on its tokens in any byte-level BPE (no token is
 * shorter than one byte). Contract: O(n), never loads the tokenizer; a lone surrogate counts 3.
 */
export function utf8Length(text: string): number {
  // Node's native count: 2 bytes below U+0800, 3 for the rest of the BMP and for a lone surrogate (as U+FFFD), 4 for a pair.
  return Buffer.byteLength(text, "utf8");
}

/** Token counts of one request, by part. */
export interface RequestTokenCount {
  /** False when the parts are chars/4 estimates (the tokenizer was not needed yet). */
  exact: boolean;
  /** With `exact: false`: a proven upper bound on the request's tokens (its UTF-8 bytes, plus images and files as counted). */
  bound?: number;
  system: number;
  tools: number;
  messages: number;
  total: number;
}

/**
 * Counts tokens with the o200k_base encoding.
 * Contract: exact (js-tiktoken's `encode(text, [], []).length`) in O(n log n), whatever the
 * text (a single piece of over a million characters is counted in slices); special-token text
 * (e.g. `<|endoftext|>`) is counted as plain text, never thrown on; counts of a message or tool object are cached for the whole process (every
 * counter shares them), so callers must not mutate them.
 */
export class TokenCounter {
  // Counts depend only on the (immutable) object: every plain counter of the process shares them,
  // so a plugin counting the request the kernel just counted finds it done. A subclass (its own
  // countText) keeps its own, so two ways of counting never mix.
  #shared = Object.getPrototypeOf(this) === TokenCounter.prototype;
  #messages: WeakMap<Message, number> = this.#shared ? messageCounts : new WeakMap();
  #tools: WeakMap<ToolSchema, number> = this.#shared ? toolCounts : new WeakMap();
  #exactSums: WeakMap<readonly Message[], number> = this.#shared ? exactSums : new WeakMap();
  #estimateSums: WeakMap<readonly Message[], { tokens: number; bound: number }> = this.#shared
    ? estimateSums
    : new WeakMap();
  #lastSystem: { text: string; count: number } | undefined;
  #encodes = 0;
  #cacheHits = 0;

  /** Counters for tests: texts encoded and cache hits (messages, tools, system). */
  get stats(): { encodes: number; cacheHits: number } {
    return { encodes: this.#encodes, cacheHits: this.#cacheHits };
  }

  /** Contract: o200k token count (see the class contract); "" is 0 without touching the tokenizer. */
  countText(text: string): number {
    if (text.length === 0) return 0;
    this.#encodes++;
    return countOrdinary(getVocabulary(), text);
  }

  /**
   * Tokens of one message: its text, thinking and tool call name/args JSON (one encode),
   * plus 4 per message and 1,000 per image. Contract: cached per message object.
   */
  countMessage(message: Message): number {
    const cached = this.#messages.get(message);
    if (cached !== undefined) {
      this.#cacheHits++;
      return cached;
    }
    const parts: string[] = [];
    let images = 0;
    let files = 0;
    if (message.role === "tool") parts.push(message.toolName ?? "");
    for (const block of message.content) {
      if (block.type === "image") images++;
      else if (block.type === "file") files += fileTokens(block.data ?? "");
      else if (block.type === "tool_call") parts.push(block.name ?? "", JSON.stringify(block.args ?? {}));
      else parts.push(block.text ?? "");
    }
    const count = this.countText(parts.join("\n")) + MESSAGE_OVERHEAD_TOKENS + images * IMAGE_TOKENS + files;
    this.#messages.set(message, count);
    return count;
  }

  /** Contract: the sum of countMessage over `messages` (kept per array: a history extended with extendCounts is not walked again). */
  countMessages(messages: readonly Message[]): number {
    const known = this.#exactSums.get(messages);
    if (known !== undefined) {
      this.#cacheHits++;
      return known;
    }
    let total = 0;
    for (const m of messages) total += this.countMessage(m);
    if (messages.length >= HISTORY_FACTS_MIN && Object.isFrozen(messages)) this.#exactSums.set(messages, total);
    return total;
  }

  /**
   * Contract: `next` is `prev` plus `message`, both frozen; carries `prev`'s sums over to `next`
   * (the message counted exactly only when `prev`'s exact sum is known, i.e. counting is on).
   */
  extendCounts(prev: readonly Message[], next: readonly Message[], message: Message): void {
    const est = this.#estimateSums.get(prev);
    if (est) {
      const e = this.#estimate(message);
      this.#estimateSums.set(next, { tokens: est.tokens + e.tokens, bound: est.bound + e.bound });
    }
    const exact = this.#exactSums.get(prev);
    if (exact !== undefined) this.#exactSums.set(next, exact + this.countMessage(message));
  }

  /** Tokens of tool schemas (JSON of name, description, parameters). Contract: cached per tool object. */
  countTools(tools: readonly ToolSchema[]): number {
    let total = 0;
    for (const tool of tools) {
      let count = this.#tools.get(tool);
      if (count === undefined) {
        count = this.countText(
          JSON.stringify({ name: tool.name, description: tool.description, parameters: tool.parameters }),
        );
        this.#tools.set(tool, count);
      } else this.#cacheHits++;
      total += count;
    }
    return total;
  }

  /** True once the tokenizer is loaded (then every count is exact). */
  get loaded(): boolean {
    return vocabulary !== undefined;
  }

  /**
   * Tokens of a whole request by part. Contract: `total` is the sum of the parts. With
   * `exactAbove`, while the tokenizer is not loaded yet and an upper bound on the request's
   * tokens (its UTF-8 length: no token is shorter than a byte) is below `exactAbove`, the
   * parts are chars/4 estimates (`exact: false`, with the bound) and the tokenizer stays
   * unloaded; otherwise they are exact.
   */
  countRequest(
    request: { system: string; messages: readonly Message[]; tools: readonly ToolSchema[] },
    options: { exactAbove?: number } = {},
  ): RequestTokenCount {
    if (!vocabulary && options.exactAbove !== undefined) {
      // One pass: chars/4 estimates, and the UTF-8 length as a hard upper bound on tokens.
      let sums = this.#estimateSums.get(request.messages);
      if (!sums) {
        sums = { tokens: 0, bound: 0 };
        for (const m of request.messages) {
          const e = this.#estimate(m);
          sums.tokens += e.tokens;
          sums.bound += e.bound;
        }
        if (request.messages.length >= HISTORY_FACTS_MIN && Object.isFrozen(request.messages))
          this.#estimateSums.set(request.messages, sums);
      }
      const messages = sums.tokens;
      let bound = this.#systemBytes(request.system) + sums.bound;
      let tools = 0;
      for (const t of request.tools) {
        const e = this.#estimate(t);
        tools += e.tokens;
        bound += e.bound;
      }
      if (bound < options.exactAbove) {
        const system = estimateTokens(request.system);
        return { exact: false, bound, system, tools, messages, total: system + tools + messages };
      }
    }
    let system: number;
    if (this.#lastSystem?.text === request.system) {
      this.#cacheHits++;
      system = this.#lastSystem.count;
    } else {
      system = this.countText(request.system);
      this.#lastSystem = { text: request.system, count: system };
    }
    const tools = this.countTools(request.tools);
    const messages = this.countMessages(request.messages);
    return { exact: true, system, tools, messages, total: system + tools + messages };
  }

  #estimates = estimates;
  #systemBound: { text: string; bytes: number } | undefined;

  #systemBytes(text: string): number {
    if (this.#systemBound?.text !== text) this.#systemBound = { text, bytes: utf8Length(text) };
    return this.#systemBound.bytes;
  }

  /** chars/4 estimate and a hard token upper bound of a message or tool; cached per object (a message from ESTIMATE_KEEP_BYTES on). */
  #estimate(o: Message | ToolSchema): { tokens: number; bound: number } {
    let v = this.#estimates.get(o);
    if (v === undefined) {
      let chars = 0;
      let bytes = 0;
      let images = 0;
      let files = 0;
      const add = (t: string) => {
        chars += t.length;
        bytes += utf8Length(t);
      };
      if ("role" in o) {
        for (const b of o.content) {
          if (b.type === "image") images++;
          else if (b.type === "file") files += fileTokens(b.data ?? "");
          else if (b.type === "tool_call") add(b.name ?? ""), add(JSON.stringify(b.args ?? {}));
          else add(b.text ?? "");
        }
        if (o.role === "tool") add(o.toolName ?? "");
        // The separators countMessage joins the parts with (a tool call is two parts).
        chars += o.content.length;
        bytes += 2 * o.content.length + 1;
      } else add(JSON.stringify({ name: o.name, description: o.description, parameters: o.parameters }));
      const extra = "role" in o ? MESSAGE_OVERHEAD_TOKENS + images * IMAGE_TOKENS + files : 0;
      v = { tokens: Math.ceil(chars / 4) + extra, bound: bytes + extra };
      // A small message is estimated again sooner than a cache entry pays for itself (a long history keeps its sums per array).
      if (!("role" in o) || bytes >= ESTIMATE_KEEP_BYTES) this.#estimates.set(o, v);
    }
    return v;
  }
}

let shared: TokenCounter | undefined;

/** The process-wide counter. Contract: the same instance on every call; created lazily. */
export function defaultTokenCounter(): TokenCounter {
  return (shared ??= new TokenCounter());
}
