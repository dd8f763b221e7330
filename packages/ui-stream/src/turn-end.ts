/**
 * How a turn ended, as the page is told: one row per end kind of the kernel's TurnVerdict (and
 * a stream that failed), with its Keel code and a sentence for people. Both protocols read it.
 */
import { maskCredentials, preview } from "@keel/kernel";
import type { GuardName, TurnVerdict } from "@keel/kernel";

/**
 * How a turn ended, for the page (the UI stream's `data-keel-end` part, AG-UI's `metadata.keel`).
 * Contract: `status` and `reason` are the verdict's (`error` for a stream that failed); `code` is
 * the Keel error code (docs/errors.md) for every end but a normal one; `message` is a sentence for
 * people, credentials masked and cut by code points; `note` is set when the end needs saying on
 * the page (everything but an answer that ended on its own and a pause, whose approvals show).
 */
export interface TurnEnd {
  status: TurnVerdict["status"] | "error";
  reason: string;
  code?: string;
  message: string;
  /** The plugin that failed the turn, when the verdict names one. */
  plugin?: string;
  /** The line shown on the page: `Stopped: … (KEEL_…)`. */
  note?: string;
}

/** Longest message a TurnEnd carries (code points). */
export const TURN_END_CHARS = 2_000;

type Row = { code?: string; message: string; note: boolean };
type Reason<S extends TurnVerdict["status"]> = Extract<TurnVerdict, { status: S }>["reason"];

/** A model that ended on its own. Contract: a Record over every reason, so a new one does not compile without a row. */
const COMPLETED: Record<Reason<"completed">, Row> = {
  end_turn: { message: "The answer is complete.", note: false },
  other: { message: "The model ended the answer.", note: false },
  max_tokens: { message: "The answer was cut short: the model reached its output token limit.", note: true },
  refusal: { message: "The model declined to answer.", note: true },
};

const GUARD = "KEEL_GUARD_TRIPPED";

/** A guard or a plugin stopped the turn. */
const STOPPED: Record<GuardName | "plugin_stop", Row> = {
  max_rounds: { code: GUARD, message: "The turn reached its limit of rounds (limits.maxRounds).", note: true },
  max_tool_calls: {
    code: GUARD,
    message: "The turn reached its limit of tool calls (limits.maxToolCalls).",
    note: true,
  },
  token_budget: { code: GUARD, message: "The turn reached its token limit (limits.tokenBudget).", note: true },
  wall_time: { code: GUARD, message: "The turn ran out of time (limits.wallTimeMs).", note: true },
  context_ceiling: {
    code: GUARD,
    message: "The conversation filled the model's context window up to limits.contextCeiling.",
    note: true,
  },
  budget: {
    code: "KEEL_BUDGET_EXCEEDED",
    message: "The next request would pass a spending limit (limits.maxCostUsd, maxSessionCostUsd or maxSessionTokens).",
    note: true,
  },
  plugin_stop: { code: "KEEL_TURN_STOPPED", message: "A plugin stopped the turn.", note: true },
};

/** A turn cancelled, or cut by its process. */
const INTERRUPTED: Record<Reason<"interrupted">, Row> = {
  aborted: { code: "KEEL_TURN_ABORTED", message: "The turn was cancelled.", note: true },
  process_exit: {
    code: "KEEL_TURN_INTERRUPTED",
    message: "The process running the turn stopped before it finished.",
    note: true,
  },
  handed_back: {
    code: "KEEL_TURN_HANDED_BACK",
    message: "The turn was handed back unfinished; the next worker continues it.",
    note: true,
  },
};

const HEAD: Record<TurnEnd["status"], string> = {
  completed: "Note",
  stopped: "Stopped",
  failed: "Failed",
  error: "Failed",
  paused: "Waiting",
  interrupted: "Interrupted",
};

/** Text from plugin or provider code as the page may show it. */
function shown(text: string): string {
  return preview(maskCredentials(text), TURN_END_CHARS);
}

/** `KEEL_X: problem…` or `KEEL_X (plugin "p"): problem…` without the code in front (the code is its own field). */
function withoutCode(message: string, code: string): string {
  if (!message.startsWith(code)) return message;
  const rest = message.slice(code.length);
  return rest.startsWith(": ") ? rest.slice(2) : rest.replace(/^ /, "");
}

function end(
  status: TurnEnd["status"],
  reason: string,
  row: Row,
  extra: { message?: string; plugin?: string } = {},
): TurnEnd {
  const message = shown(extra.message ?? row.message);
  return {
    status,
    reason,
    ...(row.code ? { code: row.code } : {}),
    message,
    ...(extra.plugin ? { plugin: extra.plugin } : {}),
    ...(row.note ? { note: `${HEAD[status]}: ${message}${row.code ? ` (${row.code})` : ""}` } : {}),
  };
}

/**
 * The end of a turn with this verdict.
 * Contract: total over TurnVerdict (a new status or reason is a compile error here, not a silent
 * bare finish); never throws; reads the verdict's strings inside a guard (masked, cut).
 */
export function turnEnd(v: TurnVerdict): TurnEnd {
  try {
    switch (v.status) {
      case "completed":
        return end(v.status, v.reason, COMPLETED[v.reason] ?? COMPLETED.other);
      case "stopped": {
        const row = STOPPED[v.reason] ?? STOPPED.plugin_stop;
        // A budget stop's detail says what was spent and the limit; a plugin's says its reason.
        const detail = typeof v.detail === "string" && v.detail ? v.detail : undefined;
        const message =
          detail === undefined
            ? undefined
            : v.reason === "plugin_stop"
              ? `${row.message} ${detail}`
              : withoutCode(detail, row.code ?? "");
        return end(v.status, v.reason, row, message !== undefined ? { message } : {});
      }
      case "failed":
        return end(
          v.status,
          v.reason,
          { code: v.code, message: `The turn failed (${v.reason}).`, note: true },
          {
            ...(typeof v.message === "string" && v.message ? { message: withoutCode(v.message, v.code) } : {}),
            ...(typeof v.plugin === "string" ? { plugin: v.plugin } : {}),
          },
        );
      case "paused":
        return end(v.status, v.reason, {
          code: "KEEL_APPROVAL_PENDING",
          message: `The turn waits for approval of ${v.pending.length} tool call${v.pending.length === 1 ? "" : "s"}.`,
          note: false,
        });
      case "interrupted":
        return end(v.status, v.reason, INTERRUPTED[v.reason] ?? INTERRUPTED.process_exit);
      default: {
        const unknown: never = v;
        return streamError(
          "KEEL_PROCESS_FAULT",
          `The turn ended in a way this page does not know: ${String((unknown as { status?: unknown }).status)}.`,
        );
      }
    }
  } catch {
    return streamError("KEEL_PROCESS_FAULT", "The turn ended, but its verdict could not be read.");
  }
}

/** The end of a stream that failed before its turn gave a verdict (the stream's `error` event). Contract: never throws. */
export function streamError(code: string, message: string): TurnEnd {
  return end(
    "error",
    "error",
    { code: String(code), message: "The turn failed.", note: true },
    {
      message: withoutCode(String(message), String(code)),
    },
  );
}
