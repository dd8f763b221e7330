/**
 * A Keel turn as an A2A task: the task's context is the caller's Keel session, its text streams
 * as artifact chunks, its verdict becomes the final status, and a paused approval is
 * `input-required` until a follow-up message on the task answers it.
 */
import { TaskState } from "@a2a-js/sdk";
import type { Message, Part, TaskStatusUpdateEvent } from "@a2a-js/sdk";
import { AgentEvent } from "@a2a-js/sdk/server";
import type { AgentExecutor, ExecutionEventBus, RequestContext } from "@a2a-js/sdk/server";
import { errorMessage, isKeelError } from "@keel/kernel";
import type { Agent, Session, TurnResult } from "@keel/agent";
import { streamResume, streamTurn } from "@keel/stream";
import type { TurnStream } from "@keel/stream";
import { readReplies, waitingParts } from "./a2a-approvals.ts";
import { agentText, principalOf } from "./a2a-tasks.ts";
import { openOwned } from "./auth.ts";
import type { SessionOwners } from "./auth.ts";

/** The artifact a task's answer streams into. */
export const ANSWER_ARTIFACT = "answer";

const RUNNING = Symbol("running");

type Running = { contextId: string; session: Session; stream?: TurnStream };

/** The turn input a message carries: its text parts, and its data parts as JSON. */
function inputOf(message: Message): string {
  return message.parts
    .map((p) =>
      p.content?.$case === "text"
        ? p.content.value
        : p.content?.$case === "data"
          ? JSON.stringify(p.content.value)
          : "",
    )
    .filter(Boolean)
    .join("\n");
}

/**
 * Runs each A2A task as one Keel turn of the caller's session.
 * Contract: every execute publishes the task first and ends on a final or input-required
 * status; failures are a `failed` status with a message, never a thrown stack.
 */
export class KeelExecutor implements AgentExecutor {
  private readonly running = new Map<string, Running>();
  /** Tasks a message is handled on: a follow-up's claim until its execute starts, then RUNNING until it ends. */
  private readonly busy = new Map<string, symbol>();

  private readonly agent: Agent;
  private readonly owners: SessionOwners;

  constructor(agent: Agent, owners: SessionOwners) {
    this.agent = agent;
    this.owners = owners;
  }

  /**
   * Reserve `taskId` for one follow-up message before the SDK touches the task.
   * Contract: undefined while a turn runs on the task or another message is handled on it;
   * else a claim that `execute` takes over, or `unclaim` drops if the message never got there.
   */
  claim(taskId: string): symbol | undefined {
    if (this.busy.has(taskId)) return undefined;
    const claim = Symbol(taskId);
    this.busy.set(taskId, claim);
    return claim;
  }

  /** Drop a claim `execute` did not take over. Contract: a running task's mark is kept. */
  unclaim(taskId: string, claim: symbol): void {
    if (this.busy.get(taskId) === claim) this.busy.delete(taskId);
  }

  execute = async (rc: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const { taskId, contextId } = rc;
    this.busy.set(taskId, RUNNING);
    const status = (state: TaskState, message?: Message | Part[], metadata?: Record<string, unknown>) =>
      bus.publish(AgentEvent.statusUpdate(update(taskId, contextId, state, message, metadata)));
    bus.publish(
      AgentEvent.task(
        rc.task ?? {
          id: taskId,
          contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
          artifacts: [],
          history: [rc.userMessage],
          metadata: undefined,
        },
      ),
    );
    try {
      const session = await openOwned(this.agent, this.owners, principalOf(rc.context), contextId);
      this.running.set(taskId, { contextId, session });
      const pending = session.pendingApprovals();
      let stream: TurnStream;
      if (pending.length) {
        if (rc.task?.status?.state !== TaskState.TASK_STATE_INPUT_REQUIRED)
          return status(
            TaskState.TASK_STATE_FAILED,
            agentText(
              "This conversation waits for an approval in an earlier task: answer that task (or cancel it) first.",
              taskId,
              contextId,
            ),
          );
        const waiting = pending.filter((p) => !p.answer);
        const replies = waiting.length ? readReplies(rc.userMessage, waiting) : [];
        if (typeof replies === "string")
          return status(TaskState.TASK_STATE_INPUT_REQUIRED, [
            ...agentText(replies, taskId, contextId).parts,
            ...waitingParts(waiting),
          ]);
        // Recorded with the caller who answered.
        const answerer = `a2a:${principalOf(rc.context)}`;
        for (const r of replies)
          await (r.approve
            ? session.approve(r.callId, { ...(r.reason ? { reason: r.reason } : {}), answerer })
            : session.deny(r.callId, { ...(r.reason ? { reason: r.reason } : {}), answerer }));
        const still = session.pendingApprovals().filter((p) => !p.answer);
        if (still.length) return status(TaskState.TASK_STATE_INPUT_REQUIRED, waitingParts(still));
        stream = streamResume(session);
      } else {
        const input = inputOf(rc.userMessage);
        if (!input.trim())
          return status(
            TaskState.TASK_STATE_FAILED,
            agentText("The message holds no text: send the task as text (or data) parts.", taskId, contextId),
          );
        stream = streamTurn(session, input);
      }
      this.running.set(taskId, { contextId, session, stream });
      status(TaskState.TASK_STATE_WORKING);
      await this.pump(stream, rc, bus);
    } catch (err) {
      // The kernel's busy advice (steer(), followUp()) names calls an A2A caller cannot make.
      const why = isKeelError(err, "KEEL_TURN_BUSY")
        ? "Another task in this conversation (contextId) is still running: wait for its final status (or cancel it), then send this message again."
        : `The turn failed: ${errorMessage(err)}`;
      status(TaskState.TASK_STATE_FAILED, agentText(why, taskId, contextId));
    } finally {
      // Kept while the task waits for approval (cancel needs its session); forgotten once it ended.
      this.busy.delete(taskId);
      const entry = this.running.get(taskId);
      if (entry) delete entry.stream;
      if (entry && !entry.session.pendingApprovals().length) this.running.delete(taskId);
    }
  };

  /** Relay a turn stream: text deltas as answer chunks, tool calls as working notes, the verdict as the final status. */
  private async pump(stream: TurnStream, rc: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId } = rc;
    let sent = rc.task?.artifacts.some((a) => a.artifactId === ANSWER_ARTIFACT) ?? false;
    const chunk = (text: string, lastChunk: boolean) => {
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          artifact: {
            artifactId: ANSWER_ARTIFACT,
            name: "answer",
            description: "The agent's answer as it streamed",
            parts: text
              ? [
                  {
                    content: { $case: "text", value: text },
                    metadata: undefined,
                    filename: "",
                    mediaType: "text/plain",
                  },
                ]
              : [],
            metadata: undefined,
            extensions: [],
          },
          append: sent,
          lastChunk,
          metadata: undefined,
        }),
      );
      sent = true;
    };
    for await (const e of stream) {
      if (e.type === "text") chunk(e.delta, false);
      else if (e.type === "tool.started")
        bus.publish(
          AgentEvent.statusUpdate(
            update(taskId, contextId, TaskState.TASK_STATE_WORKING, agentText(`Calling ${e.name}.`, taskId, contextId)),
          ),
        );
      else if (e.type === "error")
        bus.publish(
          AgentEvent.statusUpdate(
            update(
              taskId,
              contextId,
              TaskState.TASK_STATE_FAILED,
              agentText(`The turn failed: ${e.message}`, taskId, contextId),
            ),
          ),
        );
      else if (e.type === "verdict") {
        if (e.result.verdict.status !== "paused") chunk(sent ? "" : e.result.text, true);
        bus.publish(AgentEvent.statusUpdate(finalStatus(e.result, taskId, contextId)));
      }
    }
  }

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    const entry = this.running.get(taskId);
    if (entry?.stream) return entry.stream.abort();
    if (entry?.session.pendingApprovals().length) await entry.session.abandonPaused("aborted");
    this.running.delete(taskId);
    bus.publish(
      AgentEvent.statusUpdate(
        update(
          taskId,
          entry?.contextId ?? "",
          TaskState.TASK_STATE_CANCELED,
          agentText("Cancelled.", taskId, entry?.contextId ?? ""),
        ),
      ),
    );
  };
}

function update(
  taskId: string,
  contextId: string,
  state: TaskState,
  message?: Message | Part[],
  metadata?: Record<string, unknown>,
): TaskStatusUpdateEvent {
  const m = Array.isArray(message) ? { ...agentText("", taskId, contextId), parts: message } : message;
  return {
    taskId,
    contextId,
    status: { state, message: m, timestamp: new Date().toISOString() },
    metadata: metadata ?? undefined,
  };
}

/** A verdict as the task's status: completed, input-required (paused), cancelled or failed. */
function finalStatus(result: TurnResult, taskId: string, contextId: string): TaskStatusUpdateEvent {
  const v = result.verdict;
  const meta = { keel: { sessionId: result.sessionId, turnId: result.turnId, verdict: v } };
  const say = (text: string) => agentText(text, taskId, contextId);
  switch (v.status) {
    case "completed":
      return update(taskId, contextId, TaskState.TASK_STATE_COMPLETED, say(result.text), meta);
    case "stopped":
      return update(
        taskId,
        contextId,
        TaskState.TASK_STATE_COMPLETED,
        say(result.text || `The turn was stopped (${v.reason}).`),
        meta,
      );
    case "paused":
      return update(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, waitingParts(result.pending ?? []), meta);
    case "interrupted":
      return update(
        taskId,
        contextId,
        v.reason === "aborted" ? TaskState.TASK_STATE_CANCELED : TaskState.TASK_STATE_FAILED,
        say(v.reason === "aborted" ? "Cancelled." : `The turn was interrupted (${v.reason}).`),
        meta,
      );
    case "failed":
      return update(
        taskId,
        contextId,
        TaskState.TASK_STATE_FAILED,
        say(`The turn failed (${v.code}): ${v.message}`),
        meta,
      );
  }
}
