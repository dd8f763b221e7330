/**
 * @keel/plugin-tasks — subagents. Named profiles (instructions, model, tools, plugins, limits)
 * are offered to the model as one `task` tool; each call runs a turn of a durable child session
 * through the kernel's one delegation primitive (ToolContext.child), within what the parent
 * turn has left, and returns the child's final answer (validated when a schema is given).
 */
import { z } from "zod";
import type { ModelProvider, PluginEntry, ToolContext, ToolDefinition, ToolOutput } from "@keel/kernel";
import { definePlugin, defineTool, errorMessage, KeelError } from "@keel/kernel";
import { truncate } from "@keel/text";

export const PLUGIN_NAME = "@keel/plugin-tasks";
export const PLUGIN_VERSION = "0.1.0";

/**
 * A subagent the model may delegate to.
 * Contract: `description` is what the model reads when choosing; everything else defaults to the parent's.
 */
export interface TaskProfile {
  description: string;
  instructions?: string;
  /** A model spec (`anthropic:claude-haiku-4-5`, resolved on the first task, with its key from the environment) or a provider. Default: the parent agent's model. */
  model?: ModelProvider | string;
  tools?: readonly ToolDefinition[];
  /** The child agent's plugins (add `tasks(...)` here to let it delegate further, up to `maxDepth`). */
  plugins?: readonly PluginEntry[];
  /**
   * Each task's limits; the parent's remaining budget caps them anyway. What a task gets of the
   * parent's tokens and dollars is held for it while it runs: without `tokenBudget`/`maxCostUsd`
   * a task gets an even share with the round's other calls.
   */
  limits?: {
    maxRounds?: number;
    maxToolCalls?: number;
    tokenBudget?: number;
    wallTimeMs?: number;
    maxCostUsd?: number;
  };
  /** A schema every answer of this profile must match (the model's `expected_output` is used when absent). */
  output?: z.ZodType;
}

/** Options of tasks(). Contract: `profiles` needs at least one entry; names match [a-z0-9_.-]{1,64}. */
export interface TasksOptions {
  profiles: Record<string, TaskProfile>;
  /** Deepest delegation: a session at this depth gets no task tool results. Default 2. */
  maxDepth?: number;
  /** Most tasks one parent turn may start. Default 8. */
  maxFanOut?: number;
  /** The task tool's timeout, ms (a task's own wall time is capped by the parent's budget too). Default 600,000. */
  timeoutMs?: number;
}

const PROFILE_NAME = /^[a-z0-9_.-]{1,64}$/;
const fn = z.custom<(...a: unknown[]) => unknown>((v) => typeof v === "function", { message: "expected a function" });
const Options = z.strictObject({
  profiles: z
    .record(
      z.string().regex(PROFILE_NAME, "profile names are lowercase [a-z0-9_.-], 1-64 characters"),
      z.looseObject({
        description: z.string().min(1),
        instructions: z.string().optional(),
        model: z
          .union([
            z
              .string()
              .regex(/^(anthropic|openai|openai-compatible):\S+$/, "expected <provider>:<model> or a ModelProvider"),
            z.looseObject({ stream: fn }),
          ])
          .optional(),
        tools: z.array(z.unknown()).optional(),
        plugins: z.array(z.unknown()).optional(),
        limits: z
          .strictObject({
            maxRounds: z.number().int().positive(),
            maxToolCalls: z.number().int().positive(),
            tokenBudget: z.number().positive(),
            wallTimeMs: z.number().positive(),
            maxCostUsd: z.number().positive(),
          })
          .partial()
          .optional(),
        output: z
          .custom<z.ZodType>((v) => typeof (v as z.ZodType | undefined)?.safeParse === "function", {
            message: "expected a zod schema",
          })
          .optional(),
      }),
    )
    .refine((r) => Object.keys(r).length > 0, "declare at least one profile"),
  maxDepth: z.number().int().min(1).default(2),
  maxFanOut: z.number().int().min(1).default(8),
  timeoutMs: z.number().positive().default(600_000),
});
type Resolved = z.output<typeof Options>;

/** Longest answer returned to the parent, in code points (the kernel caps tool results too). */
const MAX_ANSWER = 50_000;

/** The plugin. Contract: adds one `task` tool; everything a task does is in its child session's log. */
export function tasks(options: TasksOptions) {
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description: "Subagents: a task tool that runs named profiles in durable child sessions.",
    options: Options,
    input: options as z.input<typeof Options>,
    setup(ctx) {
      const o = ctx.options as Resolved;
      const profiles = options.profiles;
      const started = new Map<string, number>();
      const tool = taskTool(o, profiles, started);
      ctx.on("turn.pre_tool_materialization", () => ({ kind: "tool_bundle", bundleId: "tasks", tools: [tool] }));
      ctx.on("turn.post_turn", (e) => void started.delete(e.turnId));
    },
  });
}

export default tasks;

function taskTool(o: Resolved, profiles: Record<string, TaskProfile>, started: Map<string, number>): ToolDefinition {
  const names = Object.keys(profiles);
  const input = z.strictObject({
    profile: z.enum(names as [string, ...string[]]).describe("which subagent does the task"),
    prompt: z.string().min(1).describe("the task, complete: the subagent does not see this conversation"),
    expected_output: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("a JSON Schema the subagent's answer must match (its answer is then that JSON)"),
    session: z
      .string()
      .optional()
      .describe(
        "to follow up: the session id of an earlier task of this profile (from its result); the subagent then sees that session's history",
      ),
  });
  return defineTool({
    name: "task",
    description: `Delegate a self-contained task to a subagent, which works in its own session and returns its final answer. Subagents:\n${names.map((n) => `- ${n}: ${profiles[n]!.description}`).join("\n")}\nSeveral task calls in one response run in parallel. A subagent remembers nothing between tasks unless you pass the earlier task's session.`,
    input,
    category: "info",
    parallel: true,
    timeoutMs: o.timeoutMs,
    async execute(args, tc: ToolContext): Promise<ToolOutput> {
      if (tc.depth >= o.maxDepth)
        return failure(
          `KEEL_TASK_DEPTH: this session is at delegation depth ${tc.depth}, the limit (maxDepth ${o.maxDepth}); do the work here instead.`,
        );
      // A call that runs again (its subagent waited for approval) is the same task, counted once.
      const count = (started.get(tc.turnId) ?? 0) + (tc.rerun ? 0 : 1);
      if (count > o.maxFanOut)
        return failure(
          `KEEL_TASK_FAN_OUT: this turn already started ${o.maxFanOut} tasks (maxFanOut); use their answers, or do the rest here.`,
        );
      started.set(tc.turnId, count);
      const profile = profiles[args.profile]!;
      let output: z.ZodType | undefined = profile.output;
      if (!output && args.expected_output) {
        try {
          output = z.fromJSONSchema(args.expected_output as Parameters<typeof z.fromJSONSchema>[0]);
        } catch (err) {
          return failure(`expected_output is not a JSON Schema this tool can use: ${errorMessage(err)}`);
        }
      }
      let model: ModelProvider | undefined;
      try {
        model = typeof profile.model === "string" ? await resolved(profile.model) : profile.model;
      } catch (err) {
        return failure(`profile ${args.profile}'s model ${profile.model} cannot be used: ${errorMessage(err)}`);
      }
      try {
        const run = await tc.child({
          name: args.profile,
          agent: {
            ...(profile.instructions !== undefined ? { instructions: profile.instructions } : {}),
            ...(model ? { provider: model } : {}),
            tools: profile.tools ?? [],
            plugins: profile.plugins ?? [],
            ...(profile.limits ? { limits: profile.limits } : {}),
          },
          input: args.prompt,
          // Asked of the parent's budget too: a profile's tokens and dollars are held for the task as given.
          ...(profile.limits ? { limits: profile.limits } : {}),
          ...(args.session !== undefined ? { session: args.session } : {}),
          ...(output ? { output } : {}),
        });
        const r = run.result;
        const v = r.verdict;
        const head = `[task ${args.profile}: session ${run.sessionId}, ${r.rounds} round(s), ${r.toolCalls} tool call(s), ${r.usage.inputTokens + r.usage.outputTokens} tokens]`;
        if (v.status === "completed") {
          const answer = r.output !== undefined ? JSON.stringify(r.output) : r.text;
          return { content: `${head}\n${cut(answer)}`, details: { sessionId: run.sessionId, usage: r.usage } };
        }
        const why =
          v.status === "failed"
            ? (v.message.startsWith(v.code) ? v.message : `${v.code}: ${v.message}`).replace(/\.+$/, "")
            : v.status === "stopped"
              ? `stopped by ${v.reason}${v.detail ? ` (${v.detail})` : ""}`
              : v.status === "paused"
                ? `waiting for approval of ${v.pending.join(", ")} in its session; the host answers there`
                : `interrupted (${v.reason})`;
        return failure(
          `${head} the subagent did not finish: ${why}.${r.text ? `\nWhat it had so far:\n${cut(r.text)}` : ""}`,
        );
      } catch (err) {
        if (err instanceof KeelError && err.code === "KEEL_CHILD_BUDGET")
          return failure(`the task was refused (budget), nothing ran: ${err.message}`);
        return failure(`the task could not run: ${err instanceof KeelError ? err.message : errorMessage(err)}`);
      }
    },
  });
}

const models = new Map<string, Promise<ModelProvider>>();

/** A model spec resolved once per process (the providers package loads on first use). */
function resolved(spec: string): Promise<ModelProvider> {
  let p = models.get(spec);
  if (!p) {
    p = import("@keel/providers").then((m) => m.resolveModel(spec));
    p.catch(() => models.delete(spec));
    models.set(spec, p);
  }
  return p;
}

function failure(text: string): ToolOutput {
  return { content: `Error: ${text}`, isError: true };
}

function cut(text: string): string {
  return truncate(text, MAX_ANSWER);
}
