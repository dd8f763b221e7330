/**
 * @keel/agent: Keel's host. createAgent, Agent and Session (the log, catch-up, approvals,
 * leases, recovery, durable jobs, child sessions), the storage rule, the config shape, and
 * routing, budgets and preflight, which reach the turn through the kernel's seams
 * (TurnSeams). This entry runs anywhere JavaScript runs; `@keel/agent/node` adds what only
 * Node has (the SQLite store, the home folder, the o200k counter, the process fault guard),
 * and createAgent on Node picks it up by itself.
 *
 * The kernel's public API is re-exported, so an application imports one package.
 */
export * from "@keel/kernel";
export { createAgent, Agent, Session } from "./agent.ts";
export type { PhaseMapRow, SessionOpenOptions } from "./agent.ts";
export type { AgentOptions } from "./agent-options.ts";
export { hasImages } from "./route.ts";
export { DEFAULT_DURABLE_ATTEMPTS, MAX_JOB_PAYLOAD_CHARS, sessionsWithPendingJobs } from "./jobs.ts";
export type { UnfinishedJob } from "./host-types.ts";
export { runPreflight } from "./preflight.ts";
export type { PreflightOptions, PreflightOutcome } from "./preflight.ts";
export { defineConfig } from "./config.ts";
export type {
  KeelConfig,
  KnownModelName,
  ModelEntry,
  PoolModelEntry,
  ModelName,
  ModelSpec,
  OfflineScript,
  PluginSpec,
} from "./config.ts";
export { MemorySessionStore } from "./memory-store.ts";
/** Store failures that pass by themselves (a worker retries them), and whether a lease's holder is a dead process on this host. */
export { holderIsDead, isTransientStoreError } from "@keel/store-kit/core";
export { resolveStorage } from "./storage.ts";
export type { HostRuntime, ResolvedStorage } from "./storage.ts";
