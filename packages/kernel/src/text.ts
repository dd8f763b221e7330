/**
 * Text by code points: the one place Keel cuts text and repairs broken UTF-16. A cut never
 * splits a surrogate pair, and what leaves here is well-formed (a lone surrogate becomes
 * U+FFFD), because a provider rejects a request body that holds one.
 */

type Native = { isWellFormed?: () => boolean; toWellFormed?: () => string };
const NATIVE = typeof (String.prototype as Native).toWellFormed === "function";

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/** Contract: true when `text` holds no lone surrogate (String.prototype.isWellFormed). */
export function isWellFormed(text: string): boolean {
  if (NATIVE) return (text as unknown as Native).isWellFormed!();
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (isHigh(c) && i + 1 < text.length && isLow(text.charCodeAt(i + 1))) i++;
    else if (isHigh(c) || isLow(c)) return false;
  }
  return true;
}

/** Contract: `text` with every lone surrogate replaced by U+FFFD; the same string when there is none. */
export function toWellFormed(text: string): string {
  if (isWellFormed(text)) return text;
  if (NATIVE) return (text as unknown as Native).toWellFormed!();
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (isHigh(c) && i + 1 < text.length && isLow(text.charCodeAt(i + 1))) out += text[i]! + text[++i]!;
    else out += isHigh(c) || isLow(c) ? "\uFFFD" : text[i]!;
  }
  return out;
}

/** Contract: the number of code points in `text` (a lone surrogate counts as one). */
export function codePointLength(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++, n++)
    if (isHigh(text.charCodeAt(i)) && i + 1 < text.length && isLow(text.charCodeAt(i + 1))) i++;
  return n;
}

/** UTF-16 index just after the first `n` code points (text.length when it has fewer). */
function indexAfter(text: string, n: number): number {
  let i = 0;
  for (; n > 0 && i < text.length; n--)
    i += isHigh(text.charCodeAt(i)) && i + 1 < text.length && isLow(text.charCodeAt(i + 1)) ? 2 : 1;
  return i;
}

/** UTF-16 index where the last `n` code points start (0 when it has fewer). */
function indexOfLast(text: string, n: number): number {
  let i = text.length;
  for (; n > 0 && i > 0; n--) i -= isLow(text.charCodeAt(i - 1)) && i >= 2 && isHigh(text.charCodeAt(i - 2)) ? 2 : 1;
  return i;
}

/** How `truncate` marks a cut. */
export interface TruncateOptions {
  /**
   * Put where text was dropped: a string, or a function of how many code points were
   * dropped (e.g. `(n) => `… [${n} more chars]``). Default `"…"`; `""` for none.
   */
  marker?: string | ((dropped: number) => string);
  /** Code points kept from the end as well; the marker goes between head and tail. Default 0. */
  tail?: number;
  /**
   * Also never cut inside a grapheme cluster (an emoji ZWJ sequence, a flag, a letter with
   * combining marks): the head ends and the tail starts on a cluster boundary, so a little
   * less may be kept. Default false (code points only).
   */
  graphemes?: boolean;
}

let segmenter: Intl.Segmenter | undefined;

/** The last grapheme boundary at or before UTF-16 index `i` (searched in a window around it). */
function graphemeFloor(s: string, i: number): number {
  if (i <= 0 || i >= s.length) return i;
  segmenter ??= new Intl.Segmenter(undefined, { granularity: "grapheme" });
  const from = Math.max(0, i - 128);
  let last = from;
  for (const { index } of segmenter.segment(s.slice(from, Math.min(s.length, i + 128)))) {
    if (from + index > i) break;
    last = from + index;
  }
  return last;
}

/** The first grapheme boundary at or after UTF-16 index `i`. */
function graphemeCeil(s: string, i: number): number {
  if (i <= 0 || i >= s.length) return i;
  segmenter ??= new Intl.Segmenter(undefined, { granularity: "grapheme" });
  const from = Math.max(0, i - 128);
  for (const { index } of segmenter.segment(s.slice(from, Math.min(s.length, i + 128))))
    if (from + index >= i) return from + index;
  return s.length;
}

/** A marker that says how many characters (code points) a cut dropped. */
export function droppedMarker(dropped: number): string {
  return `… [${dropped} more chars]`;
}

/**
 * `text` cut to at most `max` code points, marker included.
 * Contract: never splits a surrogate pair; the result is well-formed (lone surrogates in
 * `text` become U+FFFD) and a prefix of it (plus the marker and, with `tail`, a suffix);
 * `text` is returned whole (repaired) when it has at most `max` code points; when even the
 * marker does not fit, the head of `max` code points is returned without it; with
 * `graphemes`, no grapheme cluster is split either and a counting marker still counts exactly.
 */
export function truncate(text: string, max: number, options: TruncateOptions = {}): string {
  const s = toWellFormed(text);
  const limit = Math.max(0, Math.floor(max));
  if (s.length <= limit) return s;
  const total = codePointLength(s);
  if (total <= limit) return s;
  const marker = options.marker ?? "…";
  const markerFor = typeof marker === "function" ? marker : () => marker;
  // The marker's length may depend on how much is dropped, which depends on the room left.
  let room = limit;
  for (let k = 0; k < 8; k++) {
    const next = Math.max(0, limit - codePointLength(markerFor(total - room)));
    if (next >= room) break;
    room = next;
  }
  const m = markerFor(total - room);
  if (codePointLength(m) + room > limit)
    return s.slice(0, options.graphemes ? graphemeFloor(s, indexAfter(s, limit)) : indexAfter(s, limit));
  const tail = Math.min(Math.max(0, Math.floor(options.tail ?? 0)), room);
  let headEnd = indexAfter(s, room - tail);
  let tailStart = tail > 0 ? indexOfLast(s, tail) : s.length;
  if (!options.graphemes) return s.slice(0, headEnd) + m + s.slice(tailStart);
  // On cluster boundaries a little more is dropped: the marker must say so and still fit.
  tailStart = graphemeCeil(s, tailStart);
  const tailPart = s.slice(tailStart);
  const tailLength = codePointLength(tailPart);
  for (headEnd = graphemeFloor(s, headEnd); ; headEnd = graphemeFloor(s, headEnd - 1)) {
    const head = s.slice(0, headEnd);
    const kept = codePointLength(head) + tailLength;
    const mark = markerFor(total - kept);
    if (kept + codePointLength(mark) <= limit) return head + mark + tailPart;
    if (headEnd === 0) return s.slice(0, graphemeFloor(s, indexAfter(s, limit)));
  }
}

/** Contract: the first `max` code points of `text`, well-formed, without a marker. */
export function headOf(text: string, max: number): string {
  return truncate(text, max, { marker: "" });
}

/** Contract: the last `max` code points of `text`, well-formed, without a marker. */
export function tailOf(text: string, max: number): string {
  const s = toWellFormed(text);
  return s.slice(indexOfLast(s, Math.max(0, Math.floor(max))));
}

/**
 * Code points `start` (inclusive) to `end` (exclusive) of `text`, like String.slice but by
 * code point. Contract: well-formed; non-negative indexes only (clamped to the text).
 */
export function codePointSlice(text: string, start: number, end?: number): string {
  const s = toWellFormed(text);
  const from = indexAfter(s, Math.max(0, Math.floor(start)));
  const to = end === undefined ? s.length : indexAfter(s, Math.max(0, Math.floor(end)));
  return to > from ? s.slice(from, to) : "";
}

const repaired = new WeakMap<object, unknown>();

/**
 * `value` with every string in it (keys included) made well-formed, through plain objects
 * and arrays. Contract: returns `value` itself when nothing needed repair, and shares every
 * untouched subtree; never mutates; results for frozen objects near the root (a request's
 * messages) are cached, so a long frozen history is walked once; a cycle is left as it is.
 */
export function wellFormedDeep<T>(value: T): T {
  return repair(value, undefined, 0) as T;
}

/** False while wellFormedOnce walks: only what needed a repair is remembered. */
let rememberAll = true;

/**
 * wellFormedDeep for a value the caller checks once and keeps its own facts about (the kernel
 * walks each message of a session's history once): nothing is remembered for it but what
 * needed a repair (so a repaired object keeps one copy). Cached results are still used.
 * Contract: the same value as wellFormedDeep(value).
 */
export function wellFormedOnce<T>(value: T): T {
  rememberAll = false;
  try {
    return repair(value, undefined, 0) as T;
  } finally {
    rememberAll = true;
  }
}

/**
 * Contract: `next` is `prev` plus `added` (all frozen); when `prev` is known to be
 * well-formed and `added` is, `next` is remembered as well-formed without walking it.
 */
export function extendWellFormed(prev: readonly unknown[], next: readonly unknown[], added: unknown): void {
  if (repaired.get(prev) === prev && Object.isFrozen(next) && wellFormedDeep(added) === added) repaired.set(next, next);
}

/**
 * Frozen objects are remembered down to this depth only (a request, its messages array, a
 * message): each entry costs a WeakMap slot, and below a remembered message nothing is walked twice.
 */
const CACHE_DEPTH = 2;

/** Cycles are looked for from this depth on: a request's usual depth (a tool call's arguments) costs no set. */
const TRACK_FROM = 8;

function repair(v: unknown, seen: Set<object> | undefined, depth: number): unknown {
  if (typeof v === "string") return toWellFormed(v);
  if (v === null || typeof v !== "object") return v;
  if (depth >= TRACK_FROM && (seen ??= new Set()).has(v)) return v;
  const frozen = depth <= CACHE_DEPTH && Object.isFrozen(v);
  if (frozen) {
    const known = repaired.get(v);
    if (known !== undefined) return known;
  }
  let out: unknown = v;
  const path = seen;
  path?.add(v);
  if (Array.isArray(v)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < v.length; i++) {
      const x = repair(v[i], path, depth + 1);
      if (x !== v[i]) (copy ??= v.slice())[i] = x;
    }
    out = copy ?? v;
  } else {
    const proto = Object.getPrototypeOf(v);
    if (proto === Object.prototype || proto === null) {
      // Walked without allocating: a copy is made only once a key or value needed repair.
      const obj = v as Record<string, unknown>;
      let copy: Array<readonly [string, unknown]> | undefined;
      const keys = Object.keys(obj);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i]!;
        const x = obj[k];
        const k2 = toWellFormed(k);
        const x2 = repair(x, path, depth + 1);
        if (!copy && (k2 !== k || x2 !== x)) copy = keys.slice(0, i).map((p) => [p, obj[p]] as const);
        copy?.push([k2, x2]);
      }
      if (copy) out = Object.fromEntries(copy);
    }
  }
  path?.delete(v);
  if (frozen && (rememberAll || out !== v)) repaired.set(v, out);
  return out;
}

/**
 * A joiner for streamed deltas: each call returns the part of `delta` that is whole, holding
 * back a high surrogate that ends it until the next delta brings its low half (a provider's
 * stream may cut a pair between two events). `flush()` returns what is held, repaired.
 * Contract: what it returns is always well-formed; the returned parts join to the input's
 * well-formed form.
 */
export function deltaJoiner(): { push(delta: string): string; flush(): string } {
  let held = "";
  return {
    push(delta) {
      let s = held + delta;
      held = "";
      if (s.length && isHigh(s.charCodeAt(s.length - 1))) {
        held = s.slice(-1);
        s = s.slice(0, -1);
      }
      return toWellFormed(s);
    },
    flush() {
      const s = held;
      held = "";
      return toWellFormed(s);
    },
  };
}
