/**
 * The provider SDKs are optional peer dependencies: a project installs the one it uses. Before a
 * provider is built (config load, before any request) its SDK must be importable from here, where
 * the adapter imports it on the first request; else a KeelError names the package to add.
 */
import { KeelError } from "@keel/kernel";

/** The SDK package each kind of model spec is served by. Contract: `openai-compatible` uses `openai`. */
export const PROVIDER_SDKS = {
  anthropic: "@anthropic-ai/sdk",
  openai: "openai",
  "openai-compatible": "openai",
} as const;

/** An SDK this package can serve a model spec with. Contract: one of the values of PROVIDER_SDKS. */
export type ProviderSdk = (typeof PROVIDER_SDKS)[keyof typeof PROVIDER_SDKS];

const found = new Set<string>();

/**
 * This module's own file URL when it runs as a file of this package on Node (`src/sdk.ts`,
 * `dist/sdk.js`): only then does resolving from it find what the adapters' `import()` finds.
 * Bundled (the SDK is then in the bundle, or missing from it) or off Node: undefined.
 */
function ownFile(): string | undefined {
  const url: unknown = import.meta.url;
  return typeof url === "string" && /^file:.*\/(?:src\/sdk\.ts|dist\/sdk\.js)$/.test(url) ? url : undefined;
}

/**
 * Whether the SDK package `sdk` is installed where the adapters import it: a
 * `node_modules/<sdk>/package.json` in this package's folder or one above it, the folders Node's
 * `import()` looks in (it reads no NODE_PATH, unlike `require.resolve`, so neither does this).
 * Contract: never throws; false only when no such folder has it. Bundled, off Node (workerd, a
 * browser) or under Yarn Plug'n'Play it answers true: the import itself then says what is missing.
 */
export function sdkInstalled(sdk: string): boolean {
  if (found.has(sdk)) return true;
  const from = ownFile();
  // process.getBuiltinModule (Node >= 22.3), not imports of node: modules: bundles for
  // workerd and browsers take this file too.
  const node = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown; versions?: { pnp?: string } } })
    .process;
  const fs = node?.getBuiltinModule?.("node:fs") as typeof import("node:fs") | undefined;
  const path = node?.getBuiltinModule?.("node:path") as typeof import("node:path") | undefined;
  const url = node?.getBuiltinModule?.("node:url") as typeof import("node:url") | undefined;
  if (from === undefined || !fs || !path || !url || node?.versions?.pnp) return true;
  try {
    for (let dir = path.dirname(url.fileURLToPath(from)); ; ) {
      if (fs.existsSync(path.join(dir, "node_modules", sdk, "package.json"))) break;
      const up = path.dirname(dir);
      if (up === dir) return false;
      dir = up;
    }
  } catch {
    return true;
  }
  found.add(sdk);
  return true;
}

/**
 * Throws KEEL_PROVIDER_SDK_MISSING (at `path`) when the SDK serving `id` (`anthropic:<model>`,
 * `openai:<model>`, `openai-compatible:<model>`) is not installed, naming the package and the
 * command that adds it. Contract: returns without effect when the SDK resolves.
 */
export function assertSdk(id: string, sdk: ProviderSdk, path = "model"): void {
  if (sdkInstalled(sdk)) return;
  throw new KeelError(
    "KEEL_PROVIDER_SDK_MISSING",
    `${id} is served by the package ${sdk}, which is not installed in this project: run \`npm install ${sdk}\` (or pnpm add / yarn add ${sdk}) where package.json is.`,
    { path },
  );
}
