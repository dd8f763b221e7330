/**
 * @keel/plugin-plan — plan mode. While it is on, only information tools are sent (the rest are
 * hidden with a tool_visibility contribution and denied if called by name); the model writes a
 * plan and calls `exit_plan_mode`, which asks for approval through the kernel's durable approval
 * flow. Approved: every tool returns for the rest of the turn and the plan is pinned in the
 * system prompt of later turns. Denied: plan mode stays, and the model reads the reason.
 * The state is read from the conversation itself, so it survives restarts and resumes.
 */
import { z } from "zod";
import type { Message, ToolCallBlock } from "@keel/kernel";
import { definePlugin, defineTool } from "@keel/kernel";
import { truncate } from "@keel/text";

export const PLUGIN_NAME = "@keel/plugin-plan";
export const PLUGIN_VERSION = "0.1.0";
export const ENTER = "enter_plan_mode";
export const EXIT = "exit_plan_mode";

/** Options of plan(). Contract: all optional. */
export interface PlanOptions {
  /** Sessions start in plan mode (until a plan is approved). Default false. */
  start?: boolean;
  /** The model may enter plan mode itself with `enter_plan_mode`. Default true. */
  modelEnters?: boolean;
  /** Longest plan pinned in the prompt, in code points. Default 8,000. */
  maxPlanChars?: number;
}

const Options = z.strictObject({
  start: z.boolean().default(false),
  modelEnters: z.boolean().default(true),
  maxPlanChars: z.number().int().positive().default(8_000),
});

/** Where the conversation stands: in plan mode or not, and the last approved plan. */
export interface PlanState {
  active: boolean;
  approved?: string;
}

/**
 * Plan state from a conversation: `enter_plan_mode` that succeeded turns it on; `exit_plan_mode`
 * that ran (it runs only once approved) turns it off and approves its plan; a denied exit leaves
 * it on. Contract: pure; `start` is the state before the first message.
 */
export function planState(messages: readonly Message[], start: boolean): PlanState {
  const state: PlanState = { active: start };
  const calls = new Map<string, ToolCallBlock>();
  for (const m of messages) {
    if (m.role === "assistant")
      for (const b of m.content)
        if (b.type === "tool_call" && (b.name === ENTER || b.name === EXIT)) calls.set(b.id, b);
    if (m.role !== "tool" || m.isError) continue;
    const call = calls.get(m.toolCallId);
    if (call?.name === ENTER) state.active = true;
    if (call?.name === EXIT) {
      state.active = false;
      const plan = (call.args as { plan?: unknown } | null)?.plan;
      if (typeof plan === "string") state.approved = plan;
    }
  }
  return state;
}

/** The plugin. Contract: adds `exit_plan_mode` (and `enter_plan_mode` unless modelEnters is false); never hides info tools. */
export function plan(options: PlanOptions = {}) {
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description: "Plan mode: information tools only until a plan is approved.",
    options: Options,
    input: options,
    setup(ctx) {
      const o = ctx.options as z.output<typeof Options>;
      /** Plan mode as it stands in each running turn (it changes mid-turn when a plan is approved). */
      const turns = new Map<string, boolean>();
      const enter = defineTool({
        name: ENTER,
        description:
          "Enter plan mode: until a plan is approved you may only read and search (information tools). Use it before changes that need the user's agreement.",
        input: z.strictObject({ reason: z.string().optional() }),
        category: "info",
        execute: (_args, tc) => {
          turns.set(tc.turnId, true);
          return `Plan mode is on: only information tools work now. Investigate, then call ${EXIT} with the complete plan; the user approves it before any change.`;
        },
      });
      const exit = defineTool({
        name: EXIT,
        description:
          "Leave plan mode with a complete plan (steps, files, risks). The user is asked to approve it; once approved all tools return and the plan is pinned.",
        input: z.strictObject({ plan: z.string().min(1) }),
        category: "info",
        parallel: false,
        execute: (_args, tc) => {
          turns.set(tc.turnId, false);
          // Every tool this plugin hid comes back for the rest of the turn.
          return { content: "The plan is approved. All tools are available again: carry it out.", unhide: true };
        },
      });

      ctx.on("turn.pre_tool_materialization", (e) => {
        const forced = e.metadata.planMode === true;
        const active = forced || planState(e.history, o.start).active;
        turns.set(e.turnId, active);
        const bundle = {
          kind: "tool_bundle" as const,
          bundleId: "plan",
          tools: active ? [exit] : o.modelEnters ? [enter] : [],
        };
        if (!active) return bundle;
        return [
          bundle,
          {
            kind: "tool_visibility" as const,
            hide: { categories: ["exec" as const, "edit" as const, "mcp" as const] },
            keep: [EXIT],
            reason: "plan mode: information tools only until the plan is approved",
          },
        ];
      });

      ctx.on("turn.pre_prompt_compile", (e) => {
        const s = planState(e.history, o.start);
        if (turns.get(e.turnId)) {
          return {
            kind: "prompt_section",
            id: "plan.mode",
            sectionId: "plan",
            title: "Plan mode",
            domain: "plan",
            content: `You are in plan mode. Only information tools are available. Investigate what you need, then call ${EXIT} with a complete plan (steps, files, risks). Do not claim to have changed anything.`,
          };
        }
        if (s.approved)
          return {
            kind: "prompt_section",
            id: "plan.approved",
            sectionId: "plan",
            title: "Approved plan",
            domain: "plan",
            content: `The user approved this plan; follow it:\n${truncate(s.approved, o.maxPlanChars)}`,
          };
        return undefined;
      });

      // Asking is the kernel's durable approval: a host callback, or a paused turn answered later.
      ctx.on("tool.pre_call", (e) => {
        if (e.call.name === EXIT)
          return {
            kind: "tool_decision",
            decision: "ask",
            reason: `approve this plan before any change:\n${truncate(String((e.call.args as { plan?: unknown } | null)?.plan ?? ""), 2_000)}`,
          };
        // A hidden tool called by name while planning is denied, with the way out.
        if (turns.get(e.turnId) && e.call.category !== "info")
          return {
            kind: "tool_decision",
            decision: "deny",
            reason: `plan mode: only information tools until the plan is approved (call ${EXIT} with your plan)`,
          };
        return undefined;
      });

      ctx.on("turn.post_turn", (e) => void turns.delete(e.turnId));
    },
  });
}

export default plan;
