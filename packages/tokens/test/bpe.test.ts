import { spawnSync } from "node:child_process";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { crc32 } from "node:zlib";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Tiktoken } from "js-tiktoken/lite";
import { afterAll, describe, expect, it } from "vitest";
import { findDataDir } from "../../../test/support/data.ts";
import { loadO200k, tokenizerCacheDir } from "../src/bpe.ts";

// The oracle: js-tiktoken's own encoder over the same ranks.
const oracle = new Tiktoken(createRequire(import.meta.url)("js-tiktoken/ranks/o200k_base"));
const vocab = loadO200k();

/** Piece-by-piece count through the fast vocabulary, with the same pre-tokenizer. */
function count(text: string): number {
  const re = vocab.pattern;
  re.lastIndex = 0;
  let n = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (!m[0]) re.lastIndex++;
    else n += vocab.countPiece(m[0]);
  }
  return n;
}

function files(dir: string, ext: string, limit: number): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      if (out.length >= limit) return;
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith(ext)) out.push(p);
    }
  };
  walk(dir);
  return out;
}

describe("o200k vocabulary (bpe.ts)", () => {
  it("counts exactly what js-tiktoken encodes, on hostile text", () => {
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const alphabet = [
      ..."aZ9 \t\n\r.,;:'\"-_()[]{}<>/\\|`~!@#$%^&*+=?",
      "é",
      "ß",
      "日",
      "本",
      "語",
      "😀",
      "👍🏽",
      "\u0301",
      "\uD800",
      "\uDC00",
      "\u00a0",
      "\u3000",
      "ا",
      "ل",
      "ع",
      "я",
      "Ж",
      "٣",
      "½",
    ];
    const texts = [
      "",
      "a",
      "héllo wörld, naïve café — “quoted” ‘text’ … 1234567890 12.5% $3,000",
      "const x = await fetch(`https://example.com/api?q=${encodeURIComponent(q)}`);\n\treturn x.json();",
      "I'm you're we've they'll she'd IT'S DON'T",
      "日本語のテキストと中文文本以及한국어 텍스트",
      "emoji 😀😀 👍🏽 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵",
      "lone \uD800 high and \uDC00 low surrogates",
      "<|endoftext|> special text as plain text",
      "   leading, trailing   \n\n\n  \r\n\t\t",
    ];
    for (let i = 0; i < 300; i++)
      texts.push(Array.from({ length: 1 + rand(120) }, () => alphabet[rand(alphabet.length)]).join(""));
    // Single long pieces (one word, one whitespace run): the heap merge, past 48 bytes.
    const letters = [..."abcdefghijklmnopqrstuvwxyzéßøñ", "ж", "日"];
    for (let i = 0; i < 150; i++)
      texts.push(Array.from({ length: 20 + rand(400) }, () => letters[rand(rand(3) ? 6 : letters.length)]).join(""));
    for (let i = 0; i < 20; i++)
      texts.push(Array.from({ length: 50 + rand(300) }, () => [" ", "\t", "\n", "\r\n", "\u00a0"][rand(5)]).join(""));
    for (const t of texts) expect(count(t), JSON.stringify(t)).toBe(oracle.encode(t, [], []).length);
  });

  it.runIf(findDataDir())("counts exactly what js-tiktoken encodes, on real trajectories and skill files", () => {
    const dir = findDataDir()!;
    const paths = [...files(join(dir, "trajectories"), ".json", 6), ...files(join(dir, "skills"), ".md", 20)];
    expect(paths.length).toBeGreaterThan(10);
    let tokens = 0;
    for (const p of paths) {
      const text = readFileSync(p, "utf8").slice(0, 60_000);
      const expected = oracle.encode(text, [], []).length;
      expect(count(text), p).toBe(expected);
      tokens += expected;
    }
    expect(tokens).toBeGreaterThan(50_000);
  });

  it("loads without js-tiktoken's encoder and counts a piece longer than its buffer", () => {
    const long = "xé".repeat(600);
    expect(vocab.countPiece(long)).toBe(oracle.encode(long, [], []).length);
    expect(vocab.countPiece("")).toBe(0);
  });
});

/** The cache's checksum (bpe.ts): CRC-32 of everything after the 32-byte header. */
const checksum = (b: Uint8Array): number => crc32(b.subarray(32)) >>> 0;

describe("o200k vocabulary cache", () => {
  const sample = "Keel counts tokens: naïve café, 日本語, 😀, `code()`, 12345 and    spaces.";
  const expected = () => oracle.encode(sample, [], []).length;
  const viaCache = (dir: string) => {
    const v = loadO200k({ cacheDir: dir });
    const re = v.pattern;
    re.lastIndex = 0;
    let n = 0;
    for (let m = re.exec(sample); m; m = re.exec(sample)) n += m[0] ? v.countPiece(m[0]) : (re.lastIndex++, 0);
    return n;
  };

  it("writes the decoded tables once and reads them back with the same counts", () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-bpe-"));
    try {
      expect(viaCache(dir)).toBe(expected());
      const [file] = readdirSync(dir);
      expect(file).toMatch(/^o200k-2-\d+-\d+\.bin$/);
      const written = statSync(join(dir, file!)).mtimeMs;
      expect(viaCache(dir)).toBe(expected());
      expect(statSync(join(dir, file!)).mtimeMs).toBe(written);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("never trusts a corrupted, truncated or foreign cache file: it decodes again and counts exactly", () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-bpe-"));
    try {
      viaCache(dir);
      const file = join(dir, readdirSync(dir)[0]!);
      const good = readFileSync(file);
      const flipped = Buffer.from(good);
      flipped[Math.floor(flipped.length / 2)]! ^= 0xff; // inside the hash table
      for (const bad of [flipped, good.subarray(0, good.length - 100), Buffer.from("not a cache"), Buffer.alloc(0)]) {
        writeFileSync(file, bad);
        expect(viaCache(dir)).toBe(expected());
        expect(readFileSync(file).equals(good)).toBe(true); // rewritten whole
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("counts exactly when the cache directory cannot be written, or with no cache", () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-bpe-"));
    try {
      const notADir = join(dir, "file");
      writeFileSync(notADir, "x");
      expect(viaCache(join(notADir, "cache"))).toBe(expected());
      const v = loadO200k({ cacheDir: null });
      expect(v.countPiece(" hello")).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps the cache in KEEL_CACHE_DIR, else $XDG_CACHE_HOME/keel, else ~/.cache/keel; a relative setting is ignored", () => {
    expect(tokenizerCacheDir({ KEEL_CACHE_DIR: "/x/k" })).toBe("/x/k");
    expect(tokenizerCacheDir({ XDG_CACHE_HOME: "/x/xdg" })).toBe(join("/x/xdg", "keel"));
    expect(tokenizerCacheDir({})).toMatch(/[/\\]\.cache[/\\]keel$/);
    expect(tokenizerCacheDir({ KEEL_CACHE_DIR: "rel/k", XDG_CACHE_HOME: "rel" })).toMatch(/[/\\]\.cache[/\\]keel$/);
  });

  it.runIf(process.platform !== "win32")(
    "passes over a FIFO, a device or a huge file in the cache's place without waiting on or reading it",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "keel-bpe-"));
      try {
        viaCache(dir);
        const file = join(dir, readdirSync(dir)[0]!);
        const replace = (make: () => void) => {
          rmSync(file, { force: true });
          make();
          const t0 = performance.now();
          expect(viaCache(dir)).toBe(expected());
          expect(performance.now() - t0).toBeLessThan(5_000); // a FIFO read would block forever; /dev/zero would read until memory runs out
        };
        replace(() => expect(spawnSync("mkfifo", [file]).status).toBe(0));
        replace(() => symlinkSync("/dev/zero", file));
        replace(() => {
          writeFileSync(file, "");
          truncateSync(file, 64 * 1024 * 1024); // sparse: 64 MB that take no disk
        });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it("refuses a file that passes its checksum but is crafted: a table with no empty slot (an endless probe), a pattern that is not a regex", () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-bpe-"));
    try {
      viaCache(dir);
      const file = join(dir, readdirSync(dir)[0]!);
      const good = new Uint8Array(readFileSync(file));
      const head = new Uint32Array(good.buffer, 0, 8);
      const [tokens, size, patternBytes] = [head[3]!, head[5]!, head[7]!];
      const reseal = (b: Uint8Array) => {
        new Uint32Array(b.buffer, 24, 1)[0] = checksum(b);
        writeFileSync(file, b);
      };
      const full = good.slice();
      new Int32Array(full.buffer, 32 + (tokens + 1) * 4, size).fill(0);
      reseal(full);
      expect(viaCache(dir)).toBe(expected());
      const badPattern = good.slice();
      badPattern.fill(40, badPattern.length - patternBytes); // "(((((…"
      reseal(badPattern);
      expect(viaCache(dir)).toBe(expected());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("writing a cache file removes the files of an earlier copy of the ranks", () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-bpe-"));
    try {
      writeFileSync(join(dir, "o200k-2-1-1.bin"), "an older copy");
      writeFileSync(join(dir, "unrelated.txt"), "kept");
      viaCache(dir);
      expect(readdirSync(dir).sort()).toEqual([expect.stringMatching(/^o200k-2-\d+-\d+\.bin$/), "unrelated.txt"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the tokenizer cache's folder", () => {
  const linux = process.platform === "linux";
  const root = mkdtempSync(join(tmpdir(), "keel-tok-folder-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  it.runIf(linux)(
    "the tokenizer neither reads nor writes a cache in a folder others may write to (a crafted file could change counts)",
    () => {
      const shared = join(root, "tok-shared");
      mkdirSync(shared);
      chmodSync(shared, 0o777);
      loadO200k({ cacheDir: shared });
      expect(readdirSync(shared).join("")).toBe("");
      const mine = join(root, "tok-mine");
      loadO200k({ cacheDir: mine });
      expect(readdirSync(mine).join("")).toMatch(/^o200k-/);
    },
  );
});
