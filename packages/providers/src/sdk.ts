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
 * Whether the SDK package `sdk` is installed where the adapters import it (resolved from this
 * package's folder, as Node's `import()` resolves it). Contract: never throws; only "no such
 * package" is false. Bundled, or off Node (workerd, a browser), it answers true: the import
 * itself then says what is missing.
 */
export function sdkInstalled(sdk: string): boolean {
  if (found.has(sdk)) return true;
  const from = ownFile();
  // process.getBuiltinModule (Node >= 22.3), not an import of node:module: bundles for
  // workerd and browsers take this file too.
  const nodeModule = (
    globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }
  ).process?.getBuiltinModule?.("node:module") as typeof import("node:module") | undefined;
  if (from === undefined || typeof nodeModule?.createRequire !== "function") return true;
  try {
    nodeModule.createRequire(from).resolve(sdk);
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code === "MODULE_NOT_FOUND") return false;
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
