/**
 * `pnpm bench`: run every benchmark (`packages/<pkg>/bench/*.ts`, and the repository's own in
 * `bench/*.ts`, e.g. the bundle size), one process each, in turn. Only the files directly in a
 * bench folder are benchmarks: what they load lives in subfolders (`bench/entries/`, `support/`).
 * `pnpm bench agent` runs only the files whose path contains "agent".
 */
import { spawnSync } from "node:child_process";
import { readdirSync, existsSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const filter = process.argv[2] ?? "";
const files = [
  join(root, "bench"),
  ...readdirSync(join(root, "packages")).map((pkg) => join(root, "packages", pkg, "bench")),
]
  .filter((dir) => existsSync(dir))
  .flatMap((dir) =>
    readdirSync(dir)
      .filter((f) => f.endsWith(".ts"))
      .map((f) => join(dir, f)),
  )
  .filter((f) => relative(root, f).includes(filter))
  .sort();
let failed = 0;
for (const file of files) {
  console.log(`\n# ${relative(root, file)}`);
  const r = spawnSync(process.execPath, [file], { stdio: "inherit" });
  if (r.status !== 0) failed++;
}
if (!files.length) console.log(`no benchmark matches "${filter}"`);
process.exitCode = failed ? 1 : 0;
