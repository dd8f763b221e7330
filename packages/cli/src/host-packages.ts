/**
 * Keel's own packages, resolved from the CLI's installation when a project has none: `keel init`
 * in an empty folder runs at once, before any install, because `@keel/plugin-memory` and the
 * rest come from where this CLI is installed. A project's own installed copy of a plugin wins;
 * `@keel/kernel` and `@keel/agent` are always this CLI's (one kernel and one host per process: the
 * config, its plugins and the command share their classes and registries).
 */
import * as nodeModule from "node:module";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

/** Specifiers always answered by the CLI's own copy, whatever the project installed. */
const PINNED: Record<string, string> = {
  "@keel/kernel": "@keel/kernel",
  "@keel/agent": "@keel/agent",
  "@keel/agent/node": "@keel/agent/node",
  // An old name of the testkit, kept for configs and tests that still import it.
  "@keel/kernel/testing": "@keel/testkit",
};

/** The package a bare specifier names (`@keel/text/retrieval` → `@keel/text`). */
function packageOf(spec: string): string {
  return spec.split("/").slice(0, 2).join("/");
}

/** The CLI's own copy of a `@keel/*` specifier, as a URL, or undefined when the CLI has none. Contract: never throws. */
export function hostUrl(specifier: string): string | undefined {
  try {
    return import.meta.resolve(PINNED[specifier] ?? specifier);
  } catch {
    return undefined;
  }
}

/**
 * Where `name` resolves from `from` (a file): the project's copy, else, for `@keel/*`, the CLI's.
 * Contract: throws what the project's resolution threw when neither has it.
 */
export function resolveFrom(name: string, from: string): string {
  const pinned = PINNED[name] ? hostUrl(name) : undefined;
  if (pinned) return fileURLToPath(pinned);
  try {
    return createRequire(from).resolve(name);
  } catch (err) {
    const host = name.startsWith("@keel/") ? hostUrl(name) : undefined;
    if (host) return fileURLToPath(host);
    throw err;
  }
}

type ResolveHook = (
  specifier: string,
  context: unknown,
  next: (specifier: string, context?: unknown) => { url: string },
) => { url: string; shortCircuit?: boolean };
type RegisterHooks = (hooks: { resolve: ResolveHook }) => unknown;

let registered: boolean | undefined;

/**
 * Install, once, Node's in-thread resolve hook (Node 22.15+): `@keel/kernel` is always the CLI's;
 * any other `@keel/*` import that fails from the importing file falls back to the CLI's copy.
 * Contract: true when the hook is in place (native import of a config is then safe whatever the
 * project installed); false on a Node without `module.registerHooks`. Never throws.
 */
export function pinHostPackages(): boolean {
  if (registered !== undefined) return registered;
  const register = (nodeModule as unknown as { registerHooks?: RegisterHooks }).registerHooks;
  if (typeof register !== "function") return (registered = false);
  try {
    register({
      resolve(specifier, context, next) {
        if (!specifier.startsWith("@keel/")) return next(specifier, context);
        const pinned = PINNED[specifier] ? hostUrl(specifier) : undefined;
        if (pinned) return { url: pinned, shortCircuit: true };
        try {
          return next(specifier, context);
        } catch (err) {
          const host = hostUrl(specifier);
          if (host) return { url: host, shortCircuit: true };
          throw err;
        }
      },
    });
    registered = true;
  } catch {
    registered = false;
  }
  return registered;
}

/**
 * For jiti (a Node without the hook, or a config native import cannot load): each `@keel/*`
 * dependency of the CLI that `dir`'s project cannot resolve, mapped to the CLI's copy.
 * Contract: never throws; the kernel and testkit are not listed (jiti pins them as virtual modules).
 */
export function hostAliases(configFile: string): Record<string, string> {
  const out: Record<string, string> = {};
  let names: string[] = [];
  try {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    names = Object.keys(pkg.dependencies ?? {}).filter((n) => n.startsWith("@keel/"));
  } catch {
    return out;
  }
  for (const name of names) {
    if (name === "@keel/kernel" || name === "@keel/agent" || name === "@keel/testkit") continue;
    try {
      createRequire(configFile).resolve(name);
    } catch {
      const host = hostUrl(name);
      if (host) out[packageOf(name)] = fileURLToPath(host);
    }
  }
  return out;
}
