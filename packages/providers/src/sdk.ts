/**
 * The provider SDKs are optional peer dependencies: a project installs the one it uses. Before a
 * provider is built (config load, before any request) its SDK must be importable from here, where
 * the adapter imports it on the first request; else a KeelError names the package to add.
 */
import { KeelError, packageInstalled } from "@keel/kernel";

/** The SDK package each kind of model spec is served by. Contract: `openai-compatible` uses `openai`. */
export const PROVIDER_SDKS = {
  anthropic: "@anthropic-ai/sdk",
  openai: "openai",
  "openai-compatible": "openai",
} as const;

/** An SDK this package can serve a model spec with. Contract: one of the values of PROVIDER_SDKS. */
export type ProviderSdk = (typeof PROVIDER_SDKS)[keyof typeof PROVIDER_SDKS];

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
 * Whether the SDK package `sdk` is installed where the adapters import it (see packageInstalled).
 * Contract: never throws; false only when it is surely missing.
 */
export function sdkInstalled(sdk: string): boolean {
  return packageInstalled(sdk, ownFile());
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
