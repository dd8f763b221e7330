/**
 * @keel/agent/node: what only Node has, for the host. Loading it installs Node's runtime for
 * createAgent (useHostRuntime): the home folder (`KEEL_HOME`, else `~/.keel`), the default
 * SQLite store in it (`node:sqlite`), the o200k token counter with its on-disk cache, digests
 * and error messages that never derive from a secret (@keel/secrets' scanner); and it
 * exports the process fault guard. createAgent on Node loads this entry by itself, so a Node
 * application may import everything from here or from `@keel/agent` alike.
 */
import { join, resolve } from "node:path";
import { defaultKeelHome } from "@keel/safe-path";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { setCredentialMask } from "@keel/kernel";
import { maskCredentials } from "@keel/secrets";
import { TokenCounter as O200kCounter } from "@keel/tokens";
import { digestSeam } from "./digest.ts";
import type { HostRuntime } from "../storage.ts";
import { useHostRuntime } from "../storage.ts";

/** Node's runtime for the host. Contract: opens nothing until `sqlite` is called. */
export const nodeRuntime: HostRuntime = {
  name: "node",
  defaultHome: defaultKeelHome,
  resolveHome: (home) => resolve(home),
  sqlite: (home) => new SqliteSessionStore({ path: join(home, "sessions.sqlite") }),
  tokenCounter: () => new O200kCounter(),
  digest: digestSeam,
  maskCredentials,
};

useHostRuntime(nodeRuntime);
// Error messages mask connection credentials with the full scanner from the moment Node's entry
// is loaded, not from the first createAgent: what fails before one (a config that throws, a
// command that builds no agent) shows no password either.
setCredentialMask(maskCredentials);

export { defaultKeelHome };
export { guardProcess, MAX_RECORDED_FAULTS } from "./faults.ts";
export type { FaultTarget, GuardOptions, ProcessFault, ProcessGuard } from "./faults.ts";
export { digestOf, requestDigest } from "./digest.ts";
export * from "../index.ts";
