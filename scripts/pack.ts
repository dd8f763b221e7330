/**
 * `pnpm pack:all`: build every publishable package and pack it into packs/ (gitignored), then
 * check every tarball (scripts/pack-check.ts). Packages are discovered, not listed: every
 * packages/<name>/package.json without `"private": true` is publishable; a private package
 * (the wire server, a test double) is never packed. `pnpm pack` applies publishConfig (exports
 * to dist) and turns `workspace:` ranges into the versions they name.
 *
 * Builds emit without type-checking (`pnpm typecheck` checks the whole repository); `--check`
 * runs every package's own build script, with the full check. `--out DIR` packs elsewhere.
 * Contract: exits 1, listing every problem, when any build, pack or check fails.
 */
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkTarballs } from "./pack-check.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** A publishable workspace package. */
export interface Publishable {
  name: string;
  version: string;
  dir: string;
  build?: string;
}

/** Every non-private package under packages/. Contract: sorted by folder; never lists a private one. */
export function publishable(root = ROOT): Publishable[] {
  const out: Publishable[] = [];
  for (const entry of readdirSync(join(root, "packages")).sort()) {
    const dir = join(root, "packages", entry);
    const file = join(dir, "package.json");
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, "utf8")) as {
      name: string;
      version: string;
      private?: boolean;
      scripts?: Record<string, string>;
    };
    if (pkg.private === true) continue;
    out.push({
      name: pkg.name,
      version: pkg.version,
      dir,
      ...(pkg.scripts?.build ? { build: pkg.scripts.build } : {}),
    });
  }
  return out;
}

/** Run a command; resolves with its output, rejects with it (and the command) when it fails. */
function run(cmd: string, args: string[], cwd: string): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d;
    });
    child.stderr.on("data", (d: Buffer) => {
      out += d;
    });
    child.on("error", fail);
    child.on("close", (code) =>
      code === 0 ? done(out) : fail(new Error(`${cmd} ${args.join(" ")} (in ${cwd}) exited ${code}:\n${out}`)),
    );
  });
}

/** tsconfig.build.json as the new-package checklist writes it: src → dist over the base config. */
function standardBuild(p: Publishable): boolean {
  if (p.build !== "tsc -p tsconfig.build.json") return false;
  const file = join(p.dir, "tsconfig.build.json");
  if (!existsSync(file)) return false;
  const c = JSON.parse(readFileSync(file, "utf8"));
  const { outDir, rootDir, noEmit, ...rest } = c.compilerOptions ?? {};
  return (
    c.extends === "../../tsconfig.base.json" &&
    outDir === "dist" &&
    rootDir === "src" &&
    noEmit === false &&
    !Object.keys(rest).length &&
    JSON.stringify(c.include) === '["src"]'
  );
}

/**
 * Fresh dists. Packages with the standard build are emitted by one tsc program without
 * type-checking (one parse of every source instead of one per package: about 7x faster here),
 * then each package's output moves to its dist; any other build (and every build with `check`)
 * runs the package's own build script.
 */
async function buildAll(packages: Publishable[], check: boolean): Promise<void> {
  for (const p of packages) rmSync(join(p.dir, "dist"), { recursive: true, force: true });
  const together = check ? [] : packages.filter(standardBuild);
  if (together.length) {
    // Inside the repository (node_modules/.cache), so the base config's `types: ["node"]` is found.
    mkdirSync(join(ROOT, "node_modules", ".cache"), { recursive: true });
    const work = mkdtempSync(join(ROOT, "node_modules", ".cache", "keel-pack-"));
    try {
      const config = join(work, "tsconfig.json");
      const rel = (to: string) => relative(work, to).replaceAll("\\", "/");
      writeFileSync(
        config,
        JSON.stringify({
          extends: rel(join(ROOT, "tsconfig.base.json")),
          compilerOptions: { rootDir: rel(join(ROOT, "packages")), outDir: "out", noEmit: false, noCheck: true },
          include: together.map((p) => `${rel(p.dir)}/src`),
        }),
      );
      await run(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", config], ROOT);
      for (const p of together) renameSync(join(work, "out", basename(p.dir), "src"), join(p.dir, "dist"));
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  await twoAtATime(
    packages.filter((p) => p.build && !together.includes(p)),
    async (p) => void (await run("pnpm", ["run", "build"], p.dir)),
  );
}

/** `tasks` two at a time (the machine has two cores; more only adds contention). */
async function twoAtATime<T>(items: readonly T[], task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    [0, 1].map(async () => {
      while (next < items.length) await task(items[next++]!);
    }),
  );
}

/** Build, pack and check every publishable package into `out`. Contract: returns the tarballs' paths; throws listing the problems. */
export async function packAll(options: { out?: string; check?: boolean } = {}): Promise<string[]> {
  const out = resolve(options.out ?? join(ROOT, "packs"));
  const packages = publishable();
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const t0 = Date.now();
  await buildAll(packages, options.check === true);
  const t1 = Date.now();
  const tarballs: string[] = [];
  // One pnpm for every package (a pnpm start per package costs a second or more each).
  await run("pnpm", ["-r", ...packages.flatMap((p) => ["--filter", p.name]), "pack", "--pack-destination", out], ROOT);
  for (const p of packages) tarballs.push(join(out, `${p.name.replace(/^@/, "").replace("/", "-")}-${p.version}.tgz`));
  const t2 = Date.now();
  const problems = await checkTarballs(tarballs.sort(), packages);
  if (process.env.KEEL_PACK_TIMES)
    process.stderr.write(`build ${t1 - t0} ms, pack ${t2 - t1} ms, check ${Date.now() - t2} ms\n`);
  if (problems.length) throw new Error(`${problems.length} problem(s) in the tarballs:\n${problems.join("\n")}`);
  return tarballs;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const outAt = args.indexOf("--out");
  try {
    const started = Date.now();
    const tarballs = await packAll({
      ...(outAt >= 0 && args[outAt + 1] ? { out: args[outAt + 1] } : {}),
      check: args.includes("--check"),
    });
    process.stdout.write(
      `${tarballs.map((t) => `${t}\n`).join("")}${tarballs.length} tarballs, checked, in ${Math.round((Date.now() - started) / 1000)} s\n`,
    );
  } catch (err) {
    process.stderr.write(`pack: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
