/**
 * Where the shared evaluation data lives (`../shared/data` beside the repository). Tests and
 * benchmarks read it in place; it is never copied into a package (LoCoMo is CC BY-NC).
 * `KEEL_DATA_DIR` overrides the search.
 */
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The data directory, or undefined when it is not on this machine. */
export function findDataDir(): string | undefined {
  const candidates = [
    process.env.KEEL_DATA_DIR,
    join(repoRoot, "..", "shared", "data"),
    join(repoRoot, "..", "..", "shared", "data"),
    "/work/shared/data",
  ];
  for (const c of candidates) if (c && existsSync(join(c, "README.md"))) return c;
  return undefined;
}

/** The data directory; throws with what to do when it is missing (for benchmarks). */
export function dataDir(): string {
  const dir = findDataDir();
  if (!dir)
    throw new Error(
      "The shared evaluation data was not found. Set KEEL_DATA_DIR to the folder holding data/README.md (../shared/data beside the repository).",
    );
  return dir;
}
