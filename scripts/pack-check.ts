/**
 * The checks `pnpm pack:all` runs on every tarball: what npm users would install must work
 * outside this repository. Each check returns problems as lines naming the tarball.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { builtinModules } from "node:module";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import ts from "typescript";
import { scanSecrets } from "../packages/secrets/src/index.ts";

/**
 * Where a packed package came from in the workspace: the parts of pack.ts's `Publishable` the checks
 * read. Declared here so that pack.ts depends on this file and not the other way round.
 */
export interface PackageSource {
  /** The package's name, as in its package.json. */
  name: string;
  /** Its folder under packages/, whose node_modules holds its installed third-party dependencies. */
  dir: string;
}

/** The parts of a packed package.json the checks read. */
interface Manifest {
  name: string;
  main?: string;
  types?: string;
  bin?: string | Record<string, string>;
  exports?: unknown;
  typesVersions?: Record<string, Record<string, string[]>>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/** Files no tarball may hold: tests, installed modules, local databases, build caches, keys and env files. */
const FORBIDDEN = [
  /(^|\/)node_modules\//,
  /(^|\/)(test|tests|__tests__|fixtures)\//,
  /\.(test|spec)\.[cm]?[jt]sx?$/,
  /(^|\/)\.env(\.|$)/,
  /(^|\/)\.npmrc$/,
  /\.(pem|key|p12|sqlite|sqlite-wal|tsbuildinfo)$/,
  /(^|\/)id_(rsa|ed25519)/,
];

/** Every string leaf of an exports map (or any nested value). */
function leaves(v: unknown): string[] {
  if (typeof v === "string") return [v];
  if (v && typeof v === "object") return Object.values(v).flatMap(leaves);
  return [];
}

/** The package name a bare import specifier names (`@scope/name/sub` → `@scope/name`). */
function packageOf(spec: string): string {
  const parts = spec.split("/");
  return spec.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
}

/** Problems with one tarball's manifest and file list. Contract: never throws on a well-formed tarball. */
export function manifestProblems(tgz: string, pkg: Manifest, files: string[]): string[] {
  const at = basename(tgz);
  const problems: string[] = [];
  if (JSON.stringify(pkg).includes("workspace:")) problems.push(`${at}: a "workspace:" range is left in package.json`);
  const bins = typeof pkg.bin === "string" ? [pkg.bin] : Object.values(pkg.bin ?? {});
  const typesVersions = Object.values(pkg.typesVersions ?? {}).flatMap((m) => Object.values(m).flat());
  for (const entry of [...leaves(pkg.exports), pkg.main, pkg.types, ...bins, ...typesVersions]) {
    if (entry && !files.includes(entry.replace(/^\.\//, "")))
      problems.push(`${at}: package.json points at ${entry}, which is not in the tarball`);
  }
  if (leaves(pkg.exports).some((e) => /\.[cm]?ts$/.test(e) && !e.endsWith(".d.ts")))
    problems.push(`${at}: exports point at TypeScript sources (publishConfig not applied?)`);
  for (const f of files) if (FORBIDDEN.some((re) => re.test(f))) problems.push(`${at}: holds ${f}`);
  if (pkg.name !== "@keel/kernel" && pkg.name !== "@keel/cli" && pkg.dependencies?.["@keel/kernel"])
    problems.push(`${at}: @keel/kernel is a dependency; make it a peer dependency (one kernel per project)`);
  if (pkg.name.startsWith("@keel/plugin-") && !pkg.peerDependencies?.["@keel/kernel"])
    problems.push(`${at}: a plugin without @keel/kernel as a peer dependency`);
  return problems;
}

/** What a README may show: example connection strings (`password=...`) and random-looking ids. */
const DOC_KINDS = new Set(["password", "url_password", "high_entropy"]);

/**
 * Keys and tokens in what is not code (README, JSON, docs). Code is not scanned: the secret
 * scanner's own rules, and code that recognises credentials, would match themselves.
 */
export function secretProblems(tgz: string, dir: string, files: string[]): string[] {
  const problems: string[] = [];
  for (const f of files.filter((f) => !/\.[cm]?[jt]s$/.test(f))) {
    const found = scanSecrets(readFileSync(join(dir, f), "utf8")).filter((s) => !DOC_KINDS.has(s.kind));
    if (found.length) problems.push(`${basename(tgz)}: ${f} holds what looks like a secret (${found[0]!.rule})`);
  }
  return problems;
}

/** Problems with the compiled JS: `.ts` imports left, or bare imports the manifest does not declare. */
export function importProblems(tgz: string, pkg: Manifest, dir: string, files: string[]): string[] {
  const at = basename(tgz);
  const declared = new Set([
    pkg.name,
    ...Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies, ...pkg.optionalDependencies }),
  ]);
  const problems: string[] = [];
  for (const f of files.filter((f) => /\.[cm]?js$/.test(f))) {
    const text = readFileSync(join(dir, f), "utf8");
    for (const { fileName: spec } of ts.preProcessFile(text, true, true).importedFiles) {
      if (spec.startsWith(".")) {
        if (/\.[cm]?ts$/.test(spec)) problems.push(`${at}: ${f} imports ${spec} (a .ts file plain Node cannot load)`);
      } else if (!spec.startsWith("node:") && !builtinModules.includes(spec) && !declared.has(packageOf(spec)))
        problems.push(`${at}: ${f} imports ${spec}, which package.json does not declare`);
    }
  }
  return problems;
}

/** A tarball's file list (without the leading package/) and its package.json. */
function readTarball(tgz: string): { files: string[]; pkg: Manifest } {
  const files = execFileSync("tar", ["tzf", tgz], { encoding: "utf8" })
    .split("\n")
    .filter((f) => f && !f.endsWith("/"))
    .map((f) => f.replace(/^package\//, ""));
  const pkg = JSON.parse(execFileSync("tar", ["xzf", tgz, "-O", "package/package.json"], { encoding: "utf8" }));
  return { files, pkg };
}

/**
 * Every check on every tarball, then each package imported by plain Node (no conditions, no
 * type stripping) from a node_modules outside the repository: the tarballs' own files, with
 * third-party dependencies linked to the workspace's installed copies.
 * Contract: returns the problems; an empty list means every tarball passed.
 */
export async function checkTarballs(tarballs: string[], packages: readonly PackageSource[]): Promise<string[]> {
  const tmp = mkdtempSync(join(tmpdir(), "keel-pack-check-"));
  const problems: string[] = [];
  try {
    const modules = join(tmp, "node_modules");
    const entries: string[] = [];
    for (const tgz of tarballs) {
      const { files, pkg } = readTarball(tgz);
      problems.push(...manifestProblems(tgz, pkg, files));
      const dir = join(modules, pkg.name);
      mkdirSync(dir, { recursive: true });
      execFileSync("tar", ["xzf", tgz, "-C", dir, "--strip-components=1"]);
      problems.push(...importProblems(tgz, pkg, dir, files), ...secretProblems(tgz, dir, files));
      const source = packages.find((p) => p.name === pkg.name);
      if (source) linkThirdParty(pkg, source.dir, modules);
      const subpaths = pkg.exports && typeof pkg.exports === "object" ? Object.keys(pkg.exports) : ["."];
      for (const sub of subpaths) entries.push(sub === "." ? pkg.name : `${pkg.name}/${sub.replace(/^\.\//, "")}`);
    }
    problems.push(...plainNodeProblems(tmp, entries));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return problems;
}

/** node_modules/<dep> → the workspace's installed copy, for each third-party dependency of `pkg`. */
function linkThirdParty(pkg: Manifest, sourceDir: string, modules: string): void {
  for (const dep of Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies })) {
    if (dep.startsWith("@keel/") || existsSync(join(modules, dep))) continue;
    const installed = join(sourceDir, "node_modules", dep);
    if (!existsSync(installed)) continue;
    mkdirSync(dirname(join(modules, dep)), { recursive: true });
    symlinkSync(realpathSync(installed), join(modules, dep));
  }
}

/** Import every entry point with plain Node in `dir`; the ones that fail, with Node's first line. */
function plainNodeProblems(dir: string, entries: string[]): string[] {
  const script = `const failed = [];
for (const e of ${JSON.stringify(entries)}) {
  try { await import(e); } catch (err) { failed.push(e + ": " + String(err?.message ?? err).split("\\n")[0]); }
}
process.stdout.write(JSON.stringify(failed));`;
  const r = spawnSync(process.execPath, ["--no-experimental-strip-types", "--input-type=module", "-e", script], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, NODE_OPTIONS: "" },
  });
  if (r.status !== 0) return [`plain Node could not run the import check: ${r.stderr.split("\n")[0]}`];
  return (JSON.parse(r.stdout) as string[]).map((f) => `plain Node cannot import ${f}`);
}
