/**
 * @keel/plugin-retry — the tool retry controller (Pioneer's, MECHANICS "Retry controller").
 * At tool.post_result each failed call is classified (invalid arguments, not found, permission
 * denied, timeout, internal, output truncated) and counted per turn: per failure signature (tool
 * + normalised arguments + class) and per tool and class. Within the class's budget the result
 * gets a one-line note on how to retry; beyond it the note tells the model to stop and why, and
 * the same call (same tool, same normalised arguments) is denied at tool.pre_call without
 * running, until a call that may change state (any category but `info`) succeeds: then the
 * counts start afresh. Every decision is a diagnostic in the session log.
 */
import { z } from "zod";
import type { ContentBlock, ContributionFor } from "@keel/kernel";

type Out = ContributionFor<"tool.post_result">;
import { definePlugin, errorMessage } from "@keel/kernel";
import { classifyFailure, DEFAULT_BUDGETS, FAILURE_CLASSES, normalizeArgs } from "./classify.ts";
import type { FailureClass } from "./classify.ts";
import { RetryLedger } from "./ledger.ts";

export { classifyFailure, DEFAULT_BUDGETS, FAILURE_CLASSES, normalizeArgs, RetryLedger };
export type { FailureVerdict, LedgerLimits } from "./ledger.ts";
export type { FailureClass };

export const PLUGIN_NAME = "@keel/plugin-retry";
export const PLUGIN_VERSION = "0.1.0";

/** Budgets of one tool. Contract: a class left out keeps the plugin-wide budget. */
export interface ToolRetryOptions {
  /** Retries allowed after the first failure, per class. */
  budgets?: Partial<Record<FailureClass, number>>;
  /** Most retries of one exact call (same normalised arguments) that fails the same way. */
  maxPerSignature?: number;
  /** Leave this tool alone. */
  off?: boolean;
}

/** Options of retry(). Contract: all optional; budgets are whole numbers ≥ 0. */
export interface RetryOptions extends Omit<ToolRetryOptions, "off"> {
  /** Per-tool budgets, by tool name. */
  tools?: Record<string, ToolRetryOptions>;
  /** Your classifier, tried first; return undefined to use the built-in one. */
  classify?: (failure: { tool: string; text: string; args: unknown }) => FailureClass | undefined;
  /** Add a note to failed results that are still within budget (how to retry). Default true. */
  hints?: boolean;
}

const budget = z.number().int().min(0);
const Budgets = z.strictObject(
  Object.fromEntries(FAILURE_CLASSES.map((c) => [c, budget.optional()])) as Record<
    FailureClass,
    z.ZodOptional<typeof budget>
  >,
);
const ToolOptions = z.strictObject({
  budgets: Budgets.optional(),
  maxPerSignature: budget.optional(),
  off: z.boolean().optional(),
});
const Options = z.strictObject({
  budgets: Budgets.optional(),
  maxPerSignature: budget.default(3),
  tools: z.record(z.string(), ToolOptions).optional(),
  classify: z
    .custom<NonNullable<RetryOptions["classify"]>>((v) => typeof v === "function", { message: "expected a function" })
    .optional(),
  hints: z.boolean().default(true),
});
type Resolved = z.output<typeof Options>;

/** What to tell the model per class. */
const ADVICE: Record<FailureClass, { retry: string; stop: string }> = {
  invalid_arguments: {
    retry: "fix the arguments to match the tool's schema and call it again",
    stop: "read the tool's description and change your approach instead of guessing arguments",
  },
  not_found: {
    retry: "check the name, path or id (list or search first) before calling again",
    stop: "what you are looking for is not there; look it up another way or tell the user",
  },
  permission_denied: {
    retry: "retry only if something changed that grants access",
    stop: "you do not have access; do not try again, ask the user or do without it",
  },
  timeout: {
    retry: "retry with a smaller request (narrower query, fewer items)",
    stop: "it keeps timing out; use a smaller request or another tool",
  },
  internal: {
    retry: "retry once if the failure looks transient",
    stop: "the tool failed internally; do not repeat the call, work around it or report it",
  },
  output_truncated: {
    retry: "ask for less (a filter, a range, a page) to see the rest",
    stop: "stop re-reading it; narrow the request or use what you have",
  },
};

/** The plugin. Contract: never changes a successful result; never denies a call that has not failed this turn. */
export function retry(options: RetryOptions = {}) {
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description: "Tool retry controller: classified failures, retry budgets per class and signature.",
    options: Options,
    input: options as z.input<typeof Options>,
    setup(ctx) {
      const o = ctx.options as Resolved;
      const turns = new Map<string, RetryLedger>();
      const ledger = (turnId: string): RetryLedger => {
        let l = turns.get(turnId);
        if (!l) turns.set(turnId, (l = new RetryLedger(o)));
        return l;
      };

      ctx.on("tool.pre_call", (e) => {
        if (o.tools?.[e.call.name]?.off) return undefined;
        const current = turns.get(e.turnId);
        // Normalising (and hashing) arguments only once some call is out of retries.
        const hit = current?.hasBlocks ? current.blocked(e.call.name, normalizeArgs(e.call.args)) : undefined;
        if (!hit) return undefined;
        return [
          {
            kind: "tool_decision",
            decision: "deny",
            reason: `this exact call already failed ${hit.failures} time(s) this turn (${label(hit.cls)}), past its retry budget, and nothing has changed since; ${ADVICE[hit.cls].stop}`,
          },
          {
            kind: "diagnostic",
            level: "info",
            code: "TOOL_RETRY_BLOCKED",
            message: `${e.call.name}: a repeat of a call out of retries (${label(hit.cls)}) was denied without running.`,
            data: { tool: e.call.name, callId: e.call.id, class: hit.cls, failures: hit.failures },
          },
        ];
      });

      ctx.on("tool.post_result", (e) => {
        const tool = e.call.name;
        if (o.tools?.[tool]?.off) return undefined;
        if (!e.result.isError) {
          // Something may have changed (a file written, a record fixed): failures may not repeat now.
          if (e.call.category !== "info") turns.get(e.turnId)?.changed();
          return undefined;
        }
        const text = textOf(e.result.content);
        let cls: FailureClass | undefined;
        const notes: Out[] = [];
        try {
          const mine = o.classify?.({ tool, text, args: e.call.args });
          cls = FAILURE_CLASSES.includes(mine as FailureClass) ? mine : undefined;
        } catch (err) {
          notes.push({
            kind: "diagnostic",
            level: "warn",
            code: "TOOL_RETRY_CLASSIFY_FAILED",
            message: `Your classify option threw for ${tool}: ${errorMessage(err)}. The built-in classes were used; fix classify.`,
          });
        }
        cls ??= classifyFailure(text);
        const {
          failures,
          failuresOfClass,
          budget: classBudget,
          left,
        } = ledger(e.turnId).failed(tool, normalizeArgs(e.call.args), cls);
        const data = {
          tool,
          callId: e.call.id,
          class: cls,
          failures,
          failuresOfClass,
          budget: classBudget,
          left: Math.max(0, left),
        };
        if (left > 0) {
          return [
            ...notes,
            ...(o.hints
              ? [
                  rewrite(
                    e.result.content,
                    `[retry: ${label(cls)}; ${ADVICE[cls].retry} (${left} ${left === 1 ? "retry" : "retries"} left)]`,
                    `retry controller: ${cls}, within budget`,
                  ),
                ]
              : []),
            {
              kind: "diagnostic",
              level: "info",
              code: "TOOL_RETRY_ALLOWED",
              message: `${tool} failed (${label(cls)}); ${left} retr${left === 1 ? "y" : "ies"} left this turn.`,
              data,
            },
          ];
        }
        return [
          ...notes,
          rewrite(
            e.result.content,
            `[retry: do not call ${tool} again with these arguments unless something changes first: ${label(cls)} ${failures > 1 ? `${failures} times` : "and this class gets no retries"}. ${cap(ADVICE[cls].stop)}.]`,
            `retry controller: ${cls}, budget spent`,
          ),
          {
            kind: "diagnostic",
            level: "info",
            code: "TOOL_RETRY_EXHAUSTED",
            message: `${tool} failed (${label(cls)}) past its retry budget (${classBudget} for this class); the same call is denied for the rest of the turn.`,
            data,
          },
        ];
      });

      ctx.on("turn.post_turn", (e) => void turns.delete(e.turnId));
    },
  });
}

export default retry;

function label(cls: FailureClass): string {
  return cls.replace("_", " ");
}

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function textOf(content: string | readonly ContentBlock[]): string {
  if (typeof content === "string") return content;
  return content.map((b) => (b.type === "text" ? b.text : "")).join("\n");
}

/** The result with a note after its text (images kept). */
function rewrite(content: string | readonly ContentBlock[], note: string, reason: string): Out {
  const blocks: ContentBlock[] = typeof content === "string" ? [{ type: "text", text: content }] : [...content];
  return { kind: "tool_result_rewrite", content: [...blocks, { type: "text", text: note }], isError: true, reason };
}
