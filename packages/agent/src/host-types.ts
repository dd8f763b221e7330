/**
 * The agent and session as the modules beside them see them (children, durable jobs): what
 * they call, declared here so none of them imports agent.ts (which imports them). Agent and
 * Session implement these.
 */
import type { Usage } from "@keel/kernel";
import type { AgentOptions } from "./agent-options.ts";
import type { KeelEvent, KeelEventData } from "@keel/kernel";
import type { Limits } from "@keel/kernel";
import type { ModelProvider } from "@keel/kernel";
import type { PluginRegistry } from "@keel/kernel";
import type { SessionStore } from "@keel/kernel";
import type { AgentStorage } from "@keel/kernel";
import type { PendingApproval, TurnResult } from "@keel/kernel";
import type { TurnInput } from "@keel/kernel";
import type { PausedTurn, RunOptions } from "@keel/kernel";

/** A durable job this agent left pending (cut by close) or gave up on. */
export interface UnfinishedJob {
  status: "pending" | "failed";
  sessionId: string;
  plugin: string;
  name: string;
  idempotencyKey: string;
  attempts: number;
  error?: string;
}

/** The outcome of one attempt of a background job. */
export type AttemptOutcome = { status: "ok" | "failed" | "timeout" | "aborted"; error?: string };

/** An agent, as children and jobs use it. */
export interface HostAgent {
  readonly name: string;
  readonly options: AgentOptions;
  readonly store: SessionStore;
  readonly storage: AgentStorage;
  readonly limits: Limits;
  readonly registry: PluginRegistry;
  readonly runner: { readonly model: ModelProvider | undefined };
  depth: number;
  readonly children: Map<string, Promise<HostAgent>>;
  readonly unfinishedJobs: UnfinishedJob[];
  session(
    id?: string,
    options?: { parent?: { sessionId: string; turnId: string; callId: string; name: string; depth: number } },
  ): Promise<HostSession>;
  isOpen(id: string): boolean;
  claimJob(key: string): boolean;
  releaseJob(key: string): void;
  /** A child agent built from `options` on this agent's store and home (ToolContext.child). */
  spawn(options: AgentOptions): Promise<HostAgent>;
}

/** A session, as children and jobs use it. */
export interface HostSession {
  readonly id: string;
  readonly agent: HostAgent;
  readonly paused: PausedTurn | undefined;
  /** What this session's provider calls (and its children's) cost so far, from its log. */
  readonly spend: Usage;
  readonly completedJobs: Set<string>;
  readonly lastTurnStart: { turnId: string; seq: number } | undefined;
  emit(data: KeelEventData, turnId: string | null, durable?: boolean): Promise<void> | void;
  flush(): Promise<void>;
  close(): Promise<void>;
  trackJob(job: Promise<unknown>): void;
  pause(ms: number): Promise<boolean>;
  runAttempt(
    plugin: string,
    name: string,
    timeoutMs: number,
    fn: (signal: AbortSignal) => unknown,
  ): Promise<AttemptOutcome>;
  pendingApprovals(): PendingApproval[];
  approve(callId: string, options?: { always?: boolean; reason?: string; answerer?: string }): Promise<void>;
  deny(callId: string, options?: { reason?: string; answerer?: string }): Promise<void>;
  abandonPaused(reason: "aborted" | "process_exit"): Promise<void>;
  /** End the turn a stopped process left unfinished here (no parent call goes on with it). */
  abandonUnfinished(): Promise<void>;
  runAsChild<O>(input: TurnInput, options: RunOptions<O>, limits: Partial<Limits>): Promise<TurnResult<O>>;
  resumeAsChild<O>(options: RunOptions<O>, limits: Partial<Limits>): Promise<TurnResult<O>>;
  /** The turn a stopped process left unfinished, when this handle found it under the lease (recovery). */
  readonly unfinished: PausedTurn | undefined;
  recoverAsChild<O>(options: RunOptions<O>, limits: Partial<Limits>): Promise<TurnResult<O>>;
  events(): Promise<KeelEvent[]>;
}
