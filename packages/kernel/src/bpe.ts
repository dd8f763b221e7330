/**
 * o200k_base token counts without an encoder object. js-tiktoken's constructor turns 200,000
 * ranks into a Map keyed by comma-joined bytes (0.5–3.5 s on a 2-core machine); here the same
 * ranks (the data js-tiktoken ships) are decoded once into typed arrays with an open-addressing
 * hash table (~40 ms), and each piece is merged by rank exactly as tiktoken merges it.
 * Counting only: no token ids leave this file.
 */
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

/** A loaded vocabulary. Contract: `pattern` is the pre-tokenizer (global, unicode); `countPiece` is the BPE token count of one piece. */
export interface BpeVocabulary {
  readonly pattern: RegExp;
  countPiece(piece: string): number;
}

const BASE64 = new Int8Array(128).fill(-1);
for (const [i, c] of [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].entries()) BASE64[c.charCodeAt(0)] = i;

/** A checksum of a cache file's body (32-bit words, then the tail bytes): catches a torn or corrupted file. */
function checksum(b: Uint8Array, from: number): number {
  const words = new Int32Array(b.buffer, b.byteOffset + from, Math.floor((b.length - from) / 4));
  let h = 0x811c9dc5;
  for (let i = 0; i < words.length; i++) h = Math.imul(h ^ words[i]!, 16777619);
  for (let i = from + words.length * 4; i < b.length; i++) h = Math.imul(h ^ b[i]!, 16777619);
  return h >>> 0;
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
const FORMAT = 1;

/** Decode js-tiktoken's rank data ("<prefix> <first rank> <base64 token> …", ranks consecutive). */
function build(data: { pat_str: string; bpe_ranks: string }): Tables {
  const s = data.bpe_ranks;
  const head = s.indexOf(" ");
  const afterRank = s.indexOf(" ", head + 1);
  const first = Number(s.slice(head + 1, afterRank));
  if (!(head > 0 && afterRank > head && Number.isInteger(first)) || s.includes("\n")) throw new Error("js-tiktoken's o200k_base rank data is not in the expected form");
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
  return { pattern: data.pat_str, first, tokens, bytes: bytes.slice(0, used), starts: starts.slice(0, tokens + 1), table };
}

/** The cache file's name for this copy of the rank data (its size and mtime: a new js-tiktoken writes a new file). */
function cacheFile(dir: string, ranksPath: string): string {
  const st = statSync(ranksPath);
  return join(dir, `o200k-${FORMAT}-${st.size}-${Math.floor(st.mtimeMs)}.bin`);
}

/** Tables from the cache file, or undefined when it is missing, short or fails its checksum. */
function readCache(file: string): Tables | undefined {
  let buf: Buffer;
  try {
    buf = readFileSync(file);
  } catch {
    return undefined;
  }
  // Typed views need 4-byte alignment: a large file's buffer is its own (offset 0), else copy it.
  const copy = buf.byteOffset % 4 === 0 ? new Uint8Array(buf.buffer, buf.byteOffset, buf.length) : Uint8Array.from(buf);
  if (copy.length < 32) return undefined;
  const [magic, format, first, tokens, used, size, sum, patternBytes] = new Uint32Array(copy.buffer, copy.byteOffset, 8) as unknown as number[];
  const expected = 32 + (tokens! + 1) * 4 + size! * 4 + used! + patternBytes!;
  if (magic !== MAGIC || format !== FORMAT || copy.length !== expected) return undefined;
  const starts = new Uint32Array(copy.buffer, copy.byteOffset + 32, tokens! + 1);
  const table = new Int32Array(copy.buffer, copy.byteOffset + 32 + (tokens! + 1) * 4, size!);
  const bytes = new Uint8Array(copy.buffer, copy.byteOffset + 32 + (tokens! + 1) * 4 + size! * 4, used!);
  const pattern = new TextDecoder().decode(new Uint8Array(copy.buffer, copy.byteOffset + expected - patternBytes!, patternBytes!));
  if (sum !== checksum(copy, 32) || starts[tokens!] !== used || !pattern) return undefined;
  return { pattern, first: first!, tokens: tokens!, bytes, starts, table };
}

/** Write the tables for the next process (atomically; a failure only costs the next load its speed). */
function writeCache(file: string, t: Tables): void {
  try {
    const pattern = new TextEncoder().encode(t.pattern);
    const out = new Uint8Array(32 + t.starts.byteLength + t.table.byteLength + t.bytes.length + pattern.length);
    new Uint32Array(out.buffer, 0, 8).set([MAGIC, FORMAT, t.first, t.tokens, t.bytes.length, t.table.length, 0, pattern.length]);
    out.set(new Uint8Array(t.starts.buffer, t.starts.byteOffset, t.starts.byteLength), 32);
    out.set(new Uint8Array(t.table.buffer, t.table.byteOffset, t.table.byteLength), 32 + t.starts.byteLength);
    out.set(t.bytes, 32 + t.starts.byteLength + t.table.byteLength);
    out.set(pattern, out.length - pattern.length);
    new Uint32Array(out.buffer, 24, 1)[0] = checksum(out, 32);
    mkdirSync(dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, out);
    renameSync(tmp, file);
  } catch {
    // A read-only or missing cache directory: the next process decodes again (~40 ms).
  }
}

/** Where decoded vocabularies are kept: KEEL_CACHE_DIR, else $XDG_CACHE_HOME/keel, else ~/.cache/keel. */
export function tokenizerCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.KEEL_CACHE_DIR || join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "keel");
}

/**
 * Load o200k_base. The rank data js-tiktoken ships is decoded once per machine into typed
 * arrays and kept in `cacheDir` (a few ms to read back; ~40 ms to decode when it is not there).
 * Contract: counts equal js-tiktoken's `encode(text, [], []).length` piece by piece; a
 * missing, unwritable or corrupt cache is decoded again, never trusted; `cacheDir: null`
 * neither reads nor writes one.
 */
export function loadO200k(options: { cacheDir?: string | null } = {}): BpeVocabulary {
  const require = createRequire(import.meta.url);
  const ranksPath = require.resolve("js-tiktoken/ranks/o200k_base");
  const dir = options.cacheDir === undefined ? tokenizerCacheDir() : options.cacheDir;
  let file: string | undefined;
  try {
    file = dir ? cacheFile(dir, ranksPath) : undefined;
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
    countPiece(piece) {
      if (piece.length * 3 > buf.length) buf = new Uint8Array(piece.length * 3);
      const n = utf8.encodeInto(piece, buf).written;
      if (n <= 1 || rankOf(buf, 0, n) >= 0) return Math.min(n, 1);
      // tiktoken's merge: join the adjacent pair with the lowest rank (the first on a tie) until none is a token.
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
    },
  };
}
