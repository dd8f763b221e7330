/**
 * The protocols' libraries are optional peer dependencies of @keel/ui-stream: `ai` (the AI SDK,
 * whose reader builds a reloaded chat's messages) for createChatHandler and chatMessages,
 * `@ag-ui/core` and `@ag-ui/encoder` for the AG-UI side. A project installs those it serves
 * with; importing this package loads none of them. A handler checks its packages when it is
 * created, before any request, and loads them on first use.
 */
import { KeelError } from "@keel/kernel";

/** An optional peer of this package. Contract: each is named with its `npm install` command when missing. */
export type UIPeer = "ai" | "@ag-ui/core" | "@ag-ui/encoder";

/** KEEL_PACKAGE_MISSING naming `pkg`, the feature that needs it and the command adding it. */
export function peerMissing(pkg: UIPeer, feature: string, cause?: unknown): KeelError {
  return new KeelError(
    "KEEL_PACKAGE_MISSING",
    `${feature} needs the package ${pkg}, which is not installed in this project: run \`npm install ${pkg}\` where package.json is.`,
    { path: pkg },
    cause === undefined ? undefined : { cause },
  );
}

const found = new Set<string>();

/**
 * This module's own file URL when it runs as a file of this package on Node (`src/peers.ts`,
 * `dist/peers.js`): only then does resolving from it find what this package's `import()` finds.
 * Bundled or off Node: undefined.
 */
function ownFile(): string | undefined {
  const url: unknown = import.meta.url;
  return typeof url === "string" && /^file:.*\/(?:src\/peers\.ts|dist\/peers\.js)$/.test(url) ? url : undefined;
}

/**
 * Whether `pkg` is installed where this package imports it: a `node_modules/<pkg>/package.json`
 * in this package's folder or one above it (the folders Node's `import()` looks in; no NODE_PATH).
 * Contract: never throws; false only when no such folder has it. Bundled, off Node or under
 * Yarn Plug'n'Play it answers true: the import itself then says what is missing.
 */
export function peerInstalled(pkg: UIPeer): boolean {
  if (found.has(pkg)) return true;
  const from = ownFile();
  // process.getBuiltinModule, not imports of node: modules: bundles for workers take this file too.
  const node = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown; versions?: { pnp?: string } } })
    .process;
  const fs = node?.getBuiltinModule?.("node:fs") as typeof import("node:fs") | undefined;
  const path = node?.getBuiltinModule?.("node:path") as typeof import("node:path") | undefined;
  const url = node?.getBuiltinModule?.("node:url") as typeof import("node:url") | undefined;
  if (from === undefined || !fs || !path || !url || node?.versions?.pnp) return true;
  try {
    for (let dir = path.dirname(url.fileURLToPath(from)); ; ) {
      if (fs.existsSync(path.join(dir, "node_modules", pkg, "package.json"))) break;
      const up = path.dirname(dir);
      if (up === dir) return false;
      dir = up;
    }
  } catch {
    return true;
  }
  found.add(pkg);
  return true;
}

/**
 * Throws KEEL_PACKAGE_MISSING (at the package's name) for the first of `pkgs` not installed.
 * Contract: synchronous, so a handler refuses to be created rather than fail its first request.
 */
export function assertPeers(pkgs: readonly UIPeer[], feature: string): void {
  for (const pkg of pkgs) if (!peerInstalled(pkg)) throw peerMissing(pkg, feature);
}

/**
 * `load()` (an `import()` of peers), with Node's "no such package" for one of `pkgs` as
 * KEEL_PACKAGE_MISSING naming it. Contract: other failures are rethrown as they are.
 */
export async function loadPeers<T>(pkgs: readonly UIPeer[], feature: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown } | null;
    const notFound = e?.code === "ERR_MODULE_NOT_FOUND" || e?.code === "MODULE_NOT_FOUND";
    const pkg =
      notFound && typeof e?.message === "string"
        ? pkgs.find((p) => (e.message as string).includes(`'${p}`))
        : undefined;
    if (pkg) throw peerMissing(pkg, feature, err);
    throw err;
  }
}
