/**
 * The session's append-only event log: one discriminated union of typed events. The
 * conversation, every phase run, every prompt manifest and every verdict are here, so a
 * session can be resumed and audited from its log alone.
 */
import type { ContributionKind, MessageEdit } from "./contributions.ts";
import type { PromptManifest } from "./manifest.ts";
import type { ContentBlock, Message } from "./messages.ts";
import type { ProviderErrorClass, StopReason } from "./provider.ts";
import type { Usage } from "./usage.ts";
import type { ChildApprovalLink, GuardName, TurnVerdict } from "./verdict.ts";

/**
 * How a session's turns run. `agent`: tools are materialised and sent, tool calls run. `chat`:
 * a direct conversation: no tool is materialised or sent (the tool-materialisation phase and the
 * preflight are skipped), prompt plugins still run.
 */
export type SessionMode = "agent" | "chat";

/** What happened to one contribution. */
export interface ContributionRecord {
  plugin: string;
  kind: ContributionKind | string;
  id?: string;
  status: "applied" | "rejected" | "truncated" | "omitted" | "fallback";
  reason?: string;
}

/** Summary of one handler run. Contract: `durationMs` is wall time to settle (or to the deadline). */
export interface HandlerSummary {
  plugin: string;
  subscription: string;
  status: "ok" | "threw" | "timeout" | "invalid" | "queued" | "aborted";
  durationMs: number;
  contributions: number;
  error?: string;
}

/** Time spent in phases and plugin handlers during one turn (ms, rounded to µs). */
export interface TurnTimings {
  phases: Record<string, { runs: number; ms: number }>;
  plugins: Record<string, { calls: number; ms: number }>;
}

/** Durable events, by type. */
export type KeelEventData =
  /** `parent`: set on a child session (ToolContext.child): the turn and tool call that started it. */
  | {
      type: "session.created";
      agent: string;
      parent?: { sessionId: string; turnId: string; callId: string; name: string; depth: number };
    }
  /** A tool call started a child session (ToolContext.child); recorded before the child runs. */
  | { type: "child.started"; callId: string; name: string; childSessionId: string }
  /** The host switched the session's mode (session.setMode): `chat` sends no tools, `agent` does. */
  | { type: "session.mode"; mode: SessionMode }
  | {
      type: "session.resumed";
      agent: string;
      interruptedTurn?: string;
      /** With agent `recovery: "auto"`: a turn a dead process left unfinished, to be continued. */
      unfinishedTurn?: string;
      /**
       * The turn's holder whose lease was taken over (it died, or stalled past its lease): with
       * `interruptedTurn`, the turn ended here; with `unfinishedTurn`, the turn left to go on (whoever
       * goes on says it again in its `turn.resumed`, even when the lease was free again by then).
       */
      leaseTakenOver?: { pid: number; host: string; reason: "expired" | "holder_dead" };
    }
  /** `content`: the input's blocks when run() was given content blocks (`input` is their text). */
  /** `mode`: present when the turn ran in chat mode (no tools). */
  | {
      type: "turn.started";
      input: string;
      trigger: "user" | "follow_up" | "resume" | "subagent";
      metadata: Record<string, unknown>;
      content?: ContentBlock[];
      mode?: "chat";
    }
  | { type: "message.appended"; message: Message }
  | { type: "message.queued"; queue: "steering" | "follow_up"; queueId: string; text: string }
  | { type: "message.dequeued"; queue: "steering" | "follow_up"; queueId: string }
  | { type: "context.edited"; plugin: string; reason: string; edits: MessageEdit[]; before: number; after: number }
  | { type: "context.repaired"; synthesizedResults: string[]; droppedResults: string[] }
  | {
      type: "phase.completed";
      phase: string;
      durationMs: number;
      handlers: HandlerSummary[];
      contributions: ContributionRecord[];
    }
  | { type: "phase.background"; phase: string; handler: HandlerSummary; contributions: ContributionRecord[] }
  /** What the merge of a phase's contributions applied, truncated, omitted or rejected (caps, conflicts). */
  | { type: "contributions.merged"; phase: string; contributions: ContributionRecord[] }
  /**
   * `system`: the system prompt's text, on a turn's first request and whenever it changed since
   * the turn's previous one (cut to 16,000 code points), so a replay can show what changed; absent
   * in older logs and while it is unchanged.
   */
  | { type: "prompt.compiled"; manifest: PromptManifest; system?: string }
  /** `provider`: the `<provider>:<model>` that answered; `model`: the model name the server reported; `firstChunkMs`: request to first streamed delta. */
  | {
      type: "model.responded";
      round: number;
      stopReason: StopReason;
      usage: Partial<Usage>;
      durationMs: number;
      attempt: number;
      provider?: string;
      model?: string;
      firstChunkMs?: number;
    }
  | { type: "model.failed"; round: number; errorClass: ProviderErrorClass; message: string; status?: number }
  /** A plugin answered the round (an `answer` contribution): no request was sent; the assistant message follows. */
  | { type: "round.answered"; round: number; plugin: string; reason: string; calls: number }
  /** A provider's notice: a retried stream, a fallback to another model (ModelEvent `notice`). */
  | {
      type: "model.notice";
      round: number;
      kind: "retry" | "fallback" | "info";
      message: string;
      provider?: string;
      data?: Record<string, unknown>;
    }
  | { type: "tool.started"; round: number; callId: string; name: string; args: unknown }
  | {
      type: "tool.completed";
      round: number;
      callId: string;
      name: string;
      status: "ok" | "error" | "timeout" | "denied" | "skipped" | "cancelled";
      durationMs: number;
      decision?: string;
      rewrittenBy?: string[];
      /** A plugin answered the call (tool_decision `result`): the tool did not run. */
      answeredBy?: string;
      /** With `rewrittenBy`: the result before tool.post_result rewrote it (a replay feeds it to today's plugins). */
      raw?: { content: ContentBlock[]; isError: boolean };
    }
  /** The preflight plan ran (AgentOptions.preflight) and revealed these hidden tools. */
  | {
      type: "preflight.completed";
      status: "ok" | "timeout" | "failed" | "invalid";
      revealed: string[];
      ignored: string[];
      plan?: string;
      durationMs: number;
      usage: Partial<Usage>;
      error?: string;
    }
  /** A tool's output revealed hidden tools for the rest of the turn. */
  | { type: "tools.revealed"; by: string; names: string[]; unknown?: string[] }
  | { type: "guard.tripped"; guard: GuardName; limit: number; value: number }
  /** A plugin's `ask` decision: the call waits for an answer (the host's approve() callback, or the turn pauses). */
  | {
      type: "approval.requested";
      round: number;
      callId: string;
      name: string;
      args: unknown;
      reason?: string;
      plugin?: string;
      via?: ChildApprovalLink;
    }
  /** The answer to an approval request: from the host (session.approve/deny), the approve() callback, or an earlier "always". */
  | {
      type: "approval.resolved";
      callId: string;
      name: string;
      approved: boolean;
      always?: boolean;
      reason?: string;
      by: "host" | "callback" | "always";
      /** Who answered, when the host or callback said (ApprovalAnswer.answerer); absent in older logs. */
      answerer?: string;
    }
  /** A paused turn continues (session.resume()): its turn id is open again. */
  /**
   * A paused turn goes on (`answered`), or one a stopped process left unfinished (`recovered`:
   * `cut`, the calls that had started; each then runs again or gets an "interrupted" result).
   */
  | {
      type: "turn.resumed";
      answered: string[];
      recovered?: { cut: string[]; leaseTakenOver?: { pid: number; host: string; reason: "expired" | "holder_dead" } };
    }
  | {
      type: "diagnostic";
      level: "info" | "warn" | "error";
      code: string;
      message: string;
      plugin?: string;
      phase?: string;
      data?: unknown;
    }
  /** A durable job, recorded before it runs (JobRecord); `origin`: the session whose turn it belongs to when another session adopted it. */
  | {
      type: "job.pending";
      plugin: string;
      name: string;
      idempotencyKey: string;
      payload?: unknown;
      attempts: number;
      timeoutMs: number;
      retryDelayMs: number;
      origin?: { sessionId: string; turnId: string | null };
    }
  /** One attempt of a durable job starts (attempts count across restarts). */
  | {
      type: "job.started";
      plugin: string;
      name: string;
      idempotencyKey: string;
      attempt: number;
      pid?: number;
      host?: string;
      instance?: string;
    }
  /** A durable job was cut short (close grace, shutdown) and stays pending: it re-runs on resume or at the next start. */
  | { type: "job.deferred"; plugin: string; name: string; idempotencyKey: string; attempts: number; reason: string }
  /** The process-level last line of defence caught an error from plugin or tool code while a turn was open. */
  | {
      type: "fault";
      code: "KEEL_PROCESS_FAULT";
      source: "uncaughtException" | "unhandledRejection";
      message: string;
      plugin?: string;
    }
  | {
      type: "job.completed";
      plugin: string;
      name: string;
      idempotencyKey: string;
      status: "ok" | "failed" | "timeout" | "aborted" | "skipped_duplicate";
      durationMs: number;
      error?: string;
      attempts?: number;
    }
  | {
      type: "turn.completed";
      verdict: TurnVerdict;
      usage: Usage;
      rounds: number;
      toolCalls: number;
      timings?: TurnTimings;
    }
  | {
      type: "turn.failed";
      verdict: TurnVerdict;
      usage: Usage;
      rounds: number;
      toolCalls: number;
      timings?: TurnTimings;
    }
  | {
      type: "turn.interrupted";
      verdict: TurnVerdict;
      usage: Usage;
      rounds: number;
      toolCalls: number;
      timings?: TurnTimings;
    }
  /** The turn waits for approval of tool calls (verdict `paused`); it ends this run, and session.resume() continues it. */
  | {
      type: "turn.paused";
      verdict: TurnVerdict;
      usage: Usage;
      rounds: number;
      toolCalls: number;
      timings?: TurnTimings;
    };

/** A durable event type. */
export type KeelEventType = KeelEventData["type"];

/**
 * One stored event.
 * Contract: `seq` starts at 1 and increases by 1 within a session; events are never
 * updated or deleted.
 */
export type KeelEvent = KeelEventData & { sessionId: string; seq: number; ts: number; turnId: string | null };

/** Live-only events: streamed to subscribers, never stored. */
export type LiveEvent =
  | {
      type: "model.delta";
      sessionId: string;
      turnId: string;
      round: number;
      channel: "text" | "thinking" | "tool_args";
      text: string;
    }
  | { type: "phase.started"; sessionId: string; turnId: string | null; phase: string }
  /** A running tool reported progress (ToolContext.progress); `elapsedMs` since the call started. */
  | {
      type: "tool.progress";
      sessionId: string;
      turnId: string;
      callId: string;
      name: string;
      message: string;
      fraction?: number;
      elapsedMs: number;
    };

/** Everything an agent subscriber sees. */
export type AgentEvent = KeelEvent | LiveEvent;

/** True for events that end a turn. */
export function isTerminalEvent(e: { type: string }): boolean {
  return (
    e.type === "turn.completed" || e.type === "turn.failed" || e.type === "turn.interrupted" || e.type === "turn.paused"
  );
}
