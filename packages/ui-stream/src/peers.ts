/**
 * The protocols' libraries are optional peer dependencies of @keel/ui-stream: `ai` (the AI SDK,
 * whose reader builds a reloaded chat's messages) for createChatHandler and chatMessages,
 * `@ag-ui/core` and `@ag-ui/encoder` for the AG-UI side. A project installs those it serves
 * with; importing this package loads none of them. A handler checks its packages when it is
 * created, before any request, and loads them on first use.
 */
import { type KeelError, missingPackageOf, packageInstalled, packageMissing } from "@keel/kernel";

/** An optional peer of this package. Contract: each is named with its `npm install` command when missing. */
export type UIPeer = "ai" | "@ag-ui/core" | "@ag-ui/encoder";

/** KEEL_PACKAGE_MISSING naming `pkg`, the feature that needs it and the command adding it. */
export function peerMissing(pkg: UIPeer, feature: string, cause?: unknown): KeelError {
  return packageMissing(pkg, feature, {}, cause);
}

/**
 * This module's own file URL when it runs as a file of this package on Node (`src/peers.ts`,
 * `dist/peers.js`): only then does resolving from it find what this package's `import()` finds.
 * Bundled or off Node: undefined.
 */
function ownFile(): string | undefined {
  const url: unknown = import.meta.url;
  return typeof url === "string" && /^file:.*\/(?:src\/peers\.ts|dist\/peers\.js)$/.test(url) ? url : undefined;
}

/** Whether `pkg` is installed where this package imports it (see packageInstalled). Contract: never throws. */
export function peerInstalled(pkg: UIPeer): boolean {
  return packageInstalled(pkg, ownFile());
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
    const pkg = missingPackageOf(err, pkgs) as UIPeer | undefined;
    if (pkg) throw peerMissing(pkg, feature, err);
    throw err;
  }
}
