/**
 * Optional peer packages: a Keel package that serves a feature with another library (a provider's
 * SDK, a protocol's) lets the project install it, checks for it before the feature starts, and
 * names it with the command that adds it when it is missing. Runtime-neutral: Node's modules are
 * reached through `process.getBuiltinModule`, so bundles for workers and browsers take this file too.
 */
import { KeelError, type ErrorLocation } from "./errors.ts";

const found = new Set<string>();

/**
 * Whether `pkg` is installed where a module at `fromUrl` imports it: a `node_modules/<pkg>/package.json`
 * in that module's folder or one above it, the folders Node's `import()` looks in (it reads no
 * NODE_PATH, unlike `require.resolve`, so neither does this). `fromUrl` is the caller's own
 * `import.meta.url` when it runs as a file of its package, else undefined.
 * Contract: never throws; false only when no such folder has it. Without `fromUrl` (bundled), off
 * Node or under Yarn Plug'n'Play it answers true: the import itself then says what is missing.
 */
export function packageInstalled(pkg: string, fromUrl: string | undefined): boolean {
  const key = `${fromUrl}\0${pkg}`;
  if (found.has(key)) return true;
  const node = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown; versions?: { pnp?: string } } })
    .process;
  const fs = node?.getBuiltinModule?.("node:fs") as { existsSync(p: string): boolean } | undefined;
  const path = node?.getBuiltinModule?.("node:path") as
    | { dirname(p: string): string; join(...p: string[]): string }
    | undefined;
  const url = node?.getBuiltinModule?.("node:url") as { fileURLToPath(u: string): string } | undefined;
  if (fromUrl === undefined || !fs || !path || !url || node?.versions?.pnp) return true;
  try {
    for (let dir = path.dirname(url.fileURLToPath(fromUrl)); ; ) {
      if (fs.existsSync(path.join(dir, "node_modules", pkg, "package.json"))) break;
      const up = path.dirname(dir);
      if (up === dir) return false;
      dir = up;
    }
  } catch {
    return true;
  }
  found.add(key);
  return true;
}

/** Which of `pkgs` Node's "no such package" error `err` names, if it is one. Contract: never throws. */
export function missingPackageOf(err: unknown, pkgs: readonly string[]): string | undefined {
  try {
    const e = err as { code?: unknown; message?: unknown } | null;
    if (e?.code !== "ERR_MODULE_NOT_FOUND" && e?.code !== "MODULE_NOT_FOUND") return undefined;
    const message = e.message;
    return typeof message === "string" ? pkgs.find((p) => message.includes(`'${p}`)) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * KEEL_PACKAGE_MISSING: `feature` needs `pkg`, with the command that adds it; located at the
 * package's name unless `location` says more. Contract: the message is the same for every caller.
 */
export function packageMissing(pkg: string, feature: string, location: ErrorLocation = {}, cause?: unknown): KeelError {
  return new KeelError(
    "KEEL_PACKAGE_MISSING",
    `${feature} needs the package ${pkg}, which is not installed in this project: run \`npm install ${pkg}\` where package.json is.`,
    { path: pkg, ...location },
    cause === undefined ? undefined : { cause },
  );
}
