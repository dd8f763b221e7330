/**
 * o200k_base token counts without an encoder object. js-tiktoken's constructor turns 200,000
 * ranks into a Map keyed by comma-joined bytes (0.5–3.5 s on a 2-core machine); here the same
 * ranks (the data js-tiktoken ships) are decoded once into typed arrays with an open-addressing
 * hash table (~40 ms), and each piece is merged by rank exactly as tiktoken merges it.
 * Counting only: no token ids leave this file.
 */
import { readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { crc32 } from "node:zlib";
import { dirname, isAbsolute, join } from "node:path";
import { privateDirProblem, readRegularFile } from "@keel/safe-path";

/** A loaded vocabulary. Contract: `pattern` is the pre-tokenizer (global, unicode), `sticky` the same pattern sticky; `countPiece` is the BPE token count of one piece. */
export interface BpeVocabulary {
  readonly pattern: RegExp;
  /** The same pattern, sticky (`uy`): a match only where the last one ended. */
  readonly sticky: RegExp;
  countPiece(piece: string): number;
}

const BASE64 = new Int8Array(128).fill(-1);
for (const [i, c] of [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].entries())
  BASE64[c.charCodeAt(0)] = i;

/** A checksum of a cache file's body (CRC-32, native): catches a torn or corrupted file. */
function checksum(b: Uint8Array, from: number): number {
  return crc32(b.subarray(from)) >>> 0;
}

function fnv(b: Uint8Array, from: number, to: number): number {
  let h = 2166136261;
  for (let k = from; k < to; k++) h = Math.imul(h ^ b[k]!, 16777619);
  return h >>> 0;
}

/** The decoded vocabulary: token t is bytes[starts[t] .. starts[t + 1]) with rank first + t; `table` maps a hash to t (-1 empty). */
interface Tables {
  /** The pre-tokenizer's pattern source (tiktoken's pat_str). */
  pattern: string;
  first: number;
  tokens: number;
  bytes: Uint8Array;
  starts: Uint32Array;
  table: Int32Array;
}

const MAGIC = 0x4b42504e; // "KBPN"
/** A cache file is about 4.3 MB; anything much larger is not one. */
const MAX_CACHE_BYTES = 16 * 1024 * 1024;
const FORMAT = 2;

/** Decode js-tiktoken's rank data ("<prefix> <first rank> <base64 token> …", ranks consecutive). */
function build(data: { pat_str: string; bpe_ranks: string }): Tables {
  const s = data.bpe_ranks;
  const head = s.indexOf(" ");
  const afterRank = s.indexOf(" ", head + 1);
  const first = Number(s.slice(head + 1, afterRank));
  if (!(head > 0 && afterRank > head && Number.isInteger(first)) || s.includes("\n"))
    throw new Error("js-tiktoken's o200k_base rank data is not in the expected form");
  const bytes = new Uint8Array(Math.ceil(s.length * 0.75));
  const starts = new Uint32Array(Math.ceil(s.length / 2));
  let used = 0;
  let tokens = 0;
  for (let i = afterRank + 1; i < s.length; ) {
    starts[tokens++] = used;
    let acc = 0;
    let bits = 0;
    for (; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c === 32) {
        i++;
        break;
      }
      if (c === 61) continue; // "=" padding
      acc = ((acc << 6) | BASE64[c]!) & 0xffffff;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        bytes[used++] = (acc >> bits) & 255;
      }
    }
  }
  starts[tokens] = used;
  let size = 1;
  while (size < tokens * 2) size <<= 1;
  const table = new Int32Array(size).fill(-1);
  for (let t = 0; t < tokens; t++) {
    let h = fnv(bytes, starts[t]!, starts[t + 1]!) & (size - 1);
    while (table[h] !== -1) h = (h + 1) & (size - 1);
    table[h] = t;
  }
  return {
    pattern: data.pat_str,
    first,
    tokens,
    bytes: bytes.slice(0, used),
    starts: starts.slice(0, tokens + 1),
    table,
  };
}

/** The cache file's name for this copy of the rank data (its size and mtime: a new js-tiktoken writes a new file). */
function cacheFile(dir: string, ranksPath: string): string {
  const st = statSync(ranksPath);
  return join(dir, `o200k-${FORMAT}-${st.size}-${Math.floor(st.mtimeMs)}.bin`);
}

/** Tables from the cache file, or undefined when it is missing, short or fails its checksum. */
function readCache(file: string): Tables | undefined {
  // Only a regular file of a plausible size is read, and without blocking: a FIFO, a device or
  // a huge file put in its place is passed over, never waited on or read whole.
  let copy: Uint8Array;
  try {
    copy = readRegularFile(file, MAX_CACHE_BYTES);
  } catch {
    return undefined;
  }
  if (copy.length < 32 || copy.byteOffset !== 0) return undefined;
  const [magic, format, first, tokens, used, size, sum, patternBytes] = new Uint32Array(
    copy.buffer,
    0,
    8,
  ) as unknown as number[];
  const expected = 32 + (tokens! + 1) * 4 + size! * 4 + used! + patternBytes!;
  if (magic !== MAGIC || format !== FORMAT || copy.length !== expected || sum !== checksum(copy, 32)) return undefined;
  const starts = new Uint32Array(copy.buffer, 32, tokens! + 1);
  const table = new Int32Array(copy.buffer, 32 + (tokens! + 1) * 4, size!);
  const bytes = new Uint8Array(copy.buffer, 32 + (tokens! + 1) * 4 + size! * 4, used!);
  let pattern: string;
  try {
    pattern = new TextDecoder("utf-8", { fatal: true }).decode(
      new Uint8Array(copy.buffer, expected - patternBytes!, patternBytes!),
    );
    new RegExp(pattern, "ug");
  } catch {
    return undefined;
  }
  // The shape a lookup relies on (a file that passes its checksum may still be crafted): a
  // power-of-two table with empty slots and entries naming tokens, offsets that never go back.
  if (
    !pattern ||
    size! < 2 ||
    (size! & (size! - 1)) !== 0 ||
    size! < tokens! * 2 ||
    starts[0] !== 0 ||
    starts[tokens!] !== used
  )
    return undefined;
  for (let t = 0; t < tokens!; t++) if (starts[t + 1]! <= starts[t]!) return undefined;
  let empty = 0;
  for (let h = 0; h < size!; h++) {
    const t = table[h]!;
    if (t === -1) empty++;
    else if (t < 0 || t >= tokens!) return undefined;
  }
  if (empty === 0) return undefined;
  return { pattern, first: first!, tokens: tokens!, bytes, starts, table };
}

/** Write the tables for the next process (atomically; a failure only costs the next load its speed). */
function writeCache(file: string, t: Tables): void {
  try {
    const pattern = new TextEncoder().encode(t.pattern);
    const out = new Uint8Array(32 + t.starts.byteLength + t.table.byteLength + t.bytes.length + pattern.length);
    new Uint32Array(out.buffer, 0, 8).set([
      MAGIC,
      FORMAT,
      t.first,
      t.tokens,
      t.bytes.length,
      t.table.length,
      0,
      pattern.length,
    ]);
    out.set(new Uint8Array(t.starts.buffer, t.starts.byteOffset, t.starts.byteLength), 32);
    out.set(new Uint8Array(t.table.buffer, t.table.byteOffset, t.table.byteLength), 32 + t.starts.byteLength);
    out.set(t.bytes, 32 + t.starts.byteLength + t.table.byteLength);
    out.set(pattern, out.length - pattern.length);
    new Uint32Array(out.buffer, 24, 1)[0] = checksum(out, 32);
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, out);
    renameSync(tmp, file);
    // Files of an earlier copy of the ranks (another js-tiktoken) are not read again.
    for (const old of readdirSync(dirname(file)))
      if (old.startsWith("o200k-") && join(dirname(file), old) !== file && !old.endsWith(".tmp"))
        rmSync(join(dirname(file), old), { force: true });
  } catch {
    // A read-only or missing cache directory: the next process decodes again (~40 ms).
  }
}

/**
 * Where decoded vocabularies are kept: KEEL_CACHE_DIR, else $XDG_CACHE_HOME/keel, else
 * ~/.cache/keel. Contract: a relative setting is ignored (it would depend on the working directory).
 */
export function tokenizerCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const abs = (p: string | undefined) => (p && isAbsolute(p) ? p : undefined);
  return abs(env.KEEL_CACHE_DIR) ?? join(abs(env.XDG_CACHE_HOME) ?? join(homedir(), ".cache"), "keel");
}

/**
 * Load o200k_base. The rank data js-tiktoken ships is decoded once per machine into typed
 * arrays and kept in `cacheDir` (a few ms to read back; ~40 ms to decode when it is not there).
 * Contract: counts equal js-tiktoken's `encode(text, [], []).length` piece by piece; a
 * missing, unreadable or unwritable cache, one that fails its checksum or shape checks, or a
 * FIFO, device or huge file in its place is passed over and decoded again, never waited on;
 * a cache folder that is not a private folder of this user (privateDirProblem: another
 * user's, writable by others, in /proc, /sys or /dev) is neither read nor written (a file
 * crafted to pass the checks could change counts); writing a new one removes older ones;
 * `cacheDir: null` neither reads nor writes one.
 */
export function loadO200k(options: { cacheDir?: string | null } = {}): BpeVocabulary {
  const require = createRequire(import.meta.url);
  const ranksPath = require.resolve("js-tiktoken/ranks/o200k_base");
  const dir = options.cacheDir === undefined ? tokenizerCacheDir() : options.cacheDir;
  let file: string | undefined;
  try {
    // Only a folder of ours that others cannot write to (made if missing, with at most two
    // parents), never one in /proc, /sys or /dev or a FIFO in its place: see privateDirProblem.
    file = dir && privateDirProblem(dir, { maxNew: 3 }) === undefined ? cacheFile(dir, ranksPath) : undefined;
  } catch {
    file = undefined;
  }
  let t = file ? readCache(file) : undefined;
  if (!t) {
    t = build(require(ranksPath) as { pat_str: string; bpe_ranks: string });
    if (file) writeCache(file, t);
  }
  const { pattern, first, bytes, starts, table } = t;
  const mask = table.length - 1;

  /** The rank of b[from..to), or -1 when those bytes are not a token. */
  const rankOf = (b: Uint8Array, from: number, to: number): number => {
    const len = to - from;
    for (let h = fnv(b, from, to) & mask; ; h = (h + 1) & mask) {
      const t = table[h]!;
      if (t === -1) return -1;
      const at = starts[t]!;
      if (starts[t + 1]! - at !== len) continue;
      let k = 0;
      while (k < len && bytes[at + k] === b[from + k]) k++;
      if (k === len) return first + t;
    }
  };

  const utf8 = new TextEncoder();
  let buf = new Uint8Array(1024);
  return {
    pattern: new RegExp(pattern, "ug"),
    sticky: new RegExp(pattern, "uy"),
    countPiece(piece) {
      if (piece.length * 3 > buf.length) buf = new Uint8Array(piece.length * 3);
      const n = utf8.encodeInto(piece, buf).written;
      if (n <= 1 || rankOf(buf, 0, n) >= 0) return Math.min(n, 1);
      return n <= SHORT_PIECE ? mergeShort(n) : mergeLong(n);
    },
  };

  /**
   * tiktoken's merge: join the adjacent pair with the lowest rank (the leftmost on a tie) until
   * no pair is a token; the number of parts left. A scan per merge: quick for short pieces.
   */
  function mergeShort(n: number): number {
    const bounds: number[] = [];
    for (let k = 0; k <= n; k++) bounds.push(k);
    const pair: number[] = [];
    for (let k = 0; k < n - 1; k++) pair.push(rankOf(buf, k, k + 2));
    for (;;) {
      let best = -1;
      let at = -1;
      for (let k = 0; k < pair.length; k++) {
        const r = pair[k]!;
        if (r >= 0 && (best < 0 || r < best)) (best = r), (at = k);
      }
      if (at < 0) break;
      bounds.splice(at + 1, 1);
      pair.splice(at, 1);
      if (at > 0) pair[at - 1] = rankOf(buf, bounds[at - 1]!, bounds[at + 1]!);
      if (at < pair.length) pair[at] = rankOf(buf, bounds[at]!, bounds[at + 2]!);
    }
    return bounds.length - 1;
  }

  /**
   * The same merge for a long piece in O(n log n): parts are a linked list over byte offsets,
   * pairs wait in a min-heap keyed by (rank, offset), and an entry whose pair has changed since
   * is skipped (a part's pair is a new byte sequence, hence a new rank, whenever it grows).
   */
  function mergeLong(n: number): number {
    const next = new Int32Array(n + 1);
    const prev = new Int32Array(n + 1);
    const pairRank = new Int32Array(n).fill(-1);
    for (let k = 0; k <= n; k++) (next[k] = k + 1), (prev[k] = k - 1);
    const heap: number[] = [];
    const push = (rank: number, at: number) => {
      pairRank[at] = rank;
      if (rank < 0) return;
      let i = heap.push(rank * OFFSETS + at) - 1;
      while (i > 0) {
        const up = (i - 1) >> 1;
        if (heap[up]! <= heap[i]!) break;
        [heap[up], heap[i]] = [heap[i]!, heap[up]!];
        i = up;
      }
    };
    const pop = (): number => {
      const top = heap[0]!;
      const last = heap.pop()!;
      if (heap.length) {
        heap[0] = last;
        for (let i = 0; ; ) {
          const l = 2 * i + 1;
          const r = l + 1;
          let m = i;
          if (l < heap.length && heap[l]! < heap[m]!) m = l;
          if (r < heap.length && heap[r]! < heap[m]!) m = r;
          if (m === i) break;
          [heap[m], heap[i]] = [heap[i]!, heap[m]!];
          i = m;
        }
      }
      return top;
    };
    for (let k = 0; k < n - 1; k++) push(rankOf(buf, k, k + 2), k);
    let parts = n;
    while (heap.length) {
      const key = pop();
      const at = key % OFFSETS;
      const rank = (key - at) / OFFSETS;
      if (pairRank[at] !== rank) continue; // stale: this part has grown or gone since
      const gone = next[at]!;
      next[at] = next[gone]!;
      if (next[at]! <= n) prev[next[at]!] = at;
      pairRank[gone] = -1;
      parts--;
      push(next[at]! < n ? rankOf(buf, at, next[next[at]!]!) : -1, at);
      const before = prev[at]!;
      if (before >= 0) push(rankOf(buf, before, next[at]!), before);
    }
    return parts;
  }
}

/** Pieces up to this many bytes merge by scanning; longer ones through a heap. */
const SHORT_PIECE = 48;
/** Heap keys are rank × OFFSETS + byte offset (a piece of up to 2^22 bytes; ranks < 2^30 stay exact in a double). */
const OFFSETS = 2 ** 22;
