import type * as z from "zod/mini";
import type { Limits } from "./limits.ts";
import type { ContentBlock } from "./messages.ts";
import type { TurnInput } from "./messages.ts";
import type { TurnResult } from "./verdict.ts";

/**
 * A zod schema, classic (`zod`) or mini (`zod/mini`, for the smallest bundle): the kernel checks a
 * value with its `safeParse` and describes it to the model with `z.toJSONSchema`, which both share.
 */
export interface ZodSchema<O = unknown, I = unknown> extends z.core.$ZodType<O, I> {
  safeParse(data: unknown): z.util.SafeParseResult<NoInfer<O>>;
}

/** A JSON Schema object, as sent to providers. */
export type JsonSchema = Record<string, unknown>;

/**
 * Tool categories and their default timeouts (ms). Contract: a tool without a category is
 * `info`; a call past its timeout is aborted and answered with an error result.
 */
export const DEFAULT_TOOL_TIMEOUTS = { exec: 600_000, mcp: 120_000, info: 30_000, edit: 30_000 } as const;

/** What a tool does, which decides its default timeout and whether it may run in parallel. */
export type ToolCategory = keyof typeof DEFAULT_TOOL_TIMEOUTS;

/** Passed to a tool's execute. Contract: `signal` aborts on timeout, cancellation or turn end. */
export interface ToolContext {
  signal: AbortSignal;
  callId: string;
  toolName: string;
  sessionId: string;
  turnId: string;
  /**
   * Report progress: a short message (cut to 200 characters) and, when known, the fraction
   * done in [0, 1]. Contract: never throws; reaches live events (`tool.progress`), turn streams
   * and the CLI; ignored once the call has ended. Not stored in the session log.
   */
  progress(message: string, fraction?: number): void;
  /** What this turn had left when the call started. A child session (`child`) gets at most this. */
  budget: TurnBudget;
  /** 0 in a session the host opened; a child session's turns run at its parent's depth + 1. */
  depth: number;
  /** True when this call runs again because a child it started waited for approval (see `child`). */
  rerun: boolean;
  /**
   * Run one turn of a child session: a new durable session of a child agent (`options.agent`,
   * sharing this agent's store, model and approve callback unless given), linked in both logs to
   * this turn and call, with turn trigger `subagent`. Its limits are clamped to `budget`; its
   * usage is added to this turn's; cancelling this call cancels it. A child that pauses for
   * approval pauses this call: the turn waits with the child's calls (PendingApproval.via), and
   * whatever the tool returns is dropped. On resume the call runs again (so it must be safe to
   * repeat) and its n-th child() resumes the child its n-th child() started, with the answers
   * (so it must start the same children in the same order). Cancelling or timing out the
   * call cancels its children; a child nobody will answer any more is ended (interrupted).
   * Contract: resolves with the child's TurnResult (a failed child is a result, not a throw);
   * throws KEEL_CHILD_INVALID for bad options and KEEL_CHILD_BUDGET when nothing is left.
   */
  child<O = unknown>(
    options: ChildOptions<O>,
    /** @internal the call's signal */ callSignal?: AbortSignal,
  ): Promise<ChildRun<O>>;
}

/** What is left of a turn's limits. Contract: never negative. */
export interface TurnBudget {
  rounds: number;
  toolCalls: number;
  /** Input plus output tokens. */
  tokens: number;
  wallMs: number;
  /** Dollars the parent turn (and its session) may still spend; absent when no dollar limit is set. */
  costUsd?: number;
}

/** A child session to run (ToolContext.child). */
export interface ChildOptions<O = unknown> {
  /** The child agent's name within this agent, [a-z0-9_.-]{1,64}; its agent is built once per name and reused. */
  name: string;
  /**
   * The child agent: createAgent's options (AgentOptions) but `store`, `home` and `observers`,
   * which are always the parent's; `provider` defaults to the parent's. Checked as createAgent
   * checks its options when the child agent is built (KEEL_CHILD_INVALID naming the option).
   */
  agent?: Readonly<Record<string, unknown>>;
  input: TurnInput;
  /**
   * Continue this earlier child session (a ChildRun's `sessionId`, also one a crash cut off):
   * the new turn sees its history. It must be a child of this session under the same `name`,
   * and not waiting for approval (KEEL_CHILD_INVALID otherwise).
   */
  session?: string;
  /**
   * Lower than the budget, if you like: the child gets the minimum of these, the child agent's and
   * the budget. What it gets of the parent's tokens and dollars is held for it while it runs (its
   * siblings and the parent's next request cannot spend it); give `maxCostUsd` to let parallel
   * children share a dollar limit, else the first takes all that is left.
   */
  limits?: Partial<Pick<Limits, "maxRounds" | "maxToolCalls" | "tokenBudget" | "wallTimeMs" | "maxCostUsd">>;
  /** Structured output of the child's final answer (as RunOptions.output). */
  output?: ZodSchema<O>;
  metadata?: Record<string, unknown>;
}

/** A child turn that ran. */
export interface ChildRun<O = unknown> {
  sessionId: string;
  result: TurnResult<O>;
}

/** What a tool returns: a string, or content with an error flag. */
export type ToolOutput =
  | string
  | {
      content: string | ContentBlock[];
      isError?: boolean;
      details?: unknown;
      /** Names of hidden tools to show the model for the rest of the turn (e.g. a tool search). */
      reveal?: readonly string[];
      /** Show again, for the rest of the turn, every tool this tool's own plugin hid with tool_visibility (plan mode ends). */
      unhide?: boolean;
    };

/** Where a tool came from. Contract: set by the kernel, never trusted from a tool's name. */
export interface ToolSource {
  kind: "builtin" | "plugin";
  plugin?: string;
  bundle?: string;
  /** Free-form provenance a plugin adds (e.g. `{ mcpServer: "fs" }`). */
  meta?: Record<string, unknown>;
}

/**
 * A tool the model can call.
 * Contract: `name` matches ^[a-zA-Z0-9_-]{1,64}$; arguments are read by `input` (zod) when
 * given, else passed as parsed JSON with the top-level `default`s of `parameters` filled —
 * before `tool.pre_call`, so plugins decide on what `execute` gets (its schema's output must
 * read as its input again: a rewrite and an approved pause are read once more);
 * `parameters` (JSON Schema) is what the model sees and is derived from `input` when absent.
 */
export interface ToolDefinition<A = any> {
  name: string;
  description: string;
  input?: ZodSchema<A>;
  parameters?: JsonSchema;
  category?: ToolCategory;
  timeoutMs?: number;
  /**
   * Safe to run again when a crash cut a call of it short (the turn then goes on, agent
   * `recovery: "auto"`). Default: true for `category: "info"` tools, false otherwise. A call
   * of a tool that is not repeatable gets one "interrupted" result the model reads instead.
   * A call that started child sessions (ToolContext.child) runs again and its children go on.
   */
  repeatable?: boolean;
  /** May run concurrently with other calls of the same response. Default: info and mcp tools. */
  parallel?: boolean;
  /**
   * Not advertised to the model until revealed (by a tool output's `reveal` or the preflight
   * plan); it can still be called by name. For large catalogs (MCP) where only a few fit.
   */
  hidden?: boolean;
  /** Free-form metadata for plugins (e.g. the MCP server a tool came from). */
  meta?: Record<string, unknown>;
  execute(args: A, ctx: ToolContext): ToolOutput | Promise<ToolOutput>;
}

/** Identity helper that infers a tool's argument type from its zod `input`. */
export function defineTool<A>(tool: ToolDefinition<A>): ToolDefinition<A> {
  return tool;
}

export const TOOL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;
