import type { ZodType } from "zod";
import type { ContentBlock } from "./messages.ts";

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
 * Contract: `name` matches ^[a-zA-Z0-9_-]{1,64}$; arguments are validated against `input`
 * (zod) when given, else passed as parsed JSON; `parameters` (JSON Schema) is what the model
 * sees and is derived from `input` when absent.
 */
export interface ToolDefinition<A = any> {
  name: string;
  description: string;
  input?: ZodType<A>;
  parameters?: JsonSchema;
  category?: ToolCategory;
  timeoutMs?: number;
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

/** The part of a tool the model sees. */
export interface ToolSchema {
  name: string;
  description: string;
  parameters: JsonSchema;
}

export const TOOL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;
