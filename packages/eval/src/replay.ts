/**
 * Replay a recorded session against today's plugins: the recorded model answers are served in
 * order, tools answer from the log (or run live), and every request's manifest is compared
 * with the one recorded, so a plugin change shows as the requests it changed.
 */
import type {
  Agent,
  AgentOptions,
  ApprovalAnswer,
  OutputFormat,
  RunOptions,
  AssistantMessage,
  ApprovalRequest,
  ContentBlock,
  KeelEvent,
  KeelPlugin,
  ModelEvent,
  ModelProvider,
  ModelRequest,
  PromptManifest,
  Session,
  SessionStore,
} from "@keel/agent";
import { definePlugin, KeelError, messageText, ProviderError } from "@keel/kernel";
import { redact } from "@keel/secrets";
import { codePointLength, droppedMarker, truncate } from "@keel/text";
import { redactEvent } from "@keel/store-kit";
import { MemorySessionStore } from "@keel/testkit";
import { z } from "zod";
import type { AppendOptions } from "@keel/kernel";
import { compareRequests, lineDiff, type RequestChange } from "./replay-diff.ts";

/** What the replay gives the agent it builds: use them in place of the config's own. */
export interface ReplayRig {
  /** Serves the recorded answers in order. */
  provider: ModelProvider;
  /** Answers tool calls from the log (`tools: "log"`); add it to the agent's plugins (empty with `tools: "live"`). */
  plugins: KeelPlugin[];
  /**
   * Answers approvals as they were answered when recorded, with the recorded reason and "always"
   * (a call asked only now is refused). Absent when the recording's approvals were answered by the
   * host on a paused turn: the replay pauses there too and answers them the same way.
   */
  approve?: (request: ApprovalRequest) => ApprovalAnswer;
  /** A scratch store: nothing of the replay reaches the recorded session's store. */
  store: SessionStore;
  /**
   * No side model: the log holds no side-model answers, and the agent's provider must not answer
   * plugins' side requests (each would take a recorded answer). Plugins use their fallbacks.
   */
  sideModel: false;
  /**
   * Gives a child session run again (a delegated task, with tools live) the id it had when
   * recorded, so what names it reads the same: pass it to createAgent as `childSessionId`.
   */
  childSessionId?: AgentOptions["childSessionId"];
}

/**
 * The replay's scratch store: in memory, and redacted as a real store writes (@keel/store-kit),
 * so what the report reads of the replay (a plugin's error, a live tool's output) is in the
 * stored form like the recording it is compared with, and shows no secret.
 */
class ScratchStore extends MemorySessionStore {
  override append(event: KeelEvent, options?: AppendOptions): void {
    const { sessionId, seq, ts, turnId, type, ...data } = event;
    super.append({ ...(redactEvent(data, type) as object), sessionId, seq, ts, turnId, type } as KeelEvent, options);
  }
}

/** Options of replaySession. Contract: `events` is one session's log, in order. */
export interface ReplayOptions {
  events: readonly KeelEvent[];
  /** Build today's agent with the rig's provider, plugins, approve callback and store. */
  build: (rig: ReplayRig) => Promise<Agent>;
  /** `log` (default): tools answer with their recorded results; `live`: they run. */
  tools?: "log" | "live";
  /**
   * The recorded provider's context window, for a log whose manifests do not hold it (written
   * before they did); the rig's provider has it (the context ceiling and compaction go by it).
   */
  contextWindow?: number;
  /**
   * With `tools: "live"`: the logs of the child sessions the recording's calls started (a
   * delegated task), by session id, so a child that runs again is served its own recorded
   * answers (matched by its input) instead of asking the model.
   */
  children?: Readonly<Record<string, readonly KeelEvent[]>>;
}

/** One turn's outcome, recorded and replayed. */
export interface TurnOutcome {
  input: string;
  /** `message`: a failed turn's error. */
  recorded: { status: string; reason?: string; message?: string; text: string };
  replayed: { status: string; reason?: string; message?: string; text: string };
  same: boolean;
}

/**
 * What a replay found.
 * Contract: `identical` is true exactly when every request's content digest (or, for logs
 * written before digests, its manifest) and every turn's outcome match the recording;
 * `firstDivergence` is the index into `requests` of the first request that differs.
 */
export interface ReplayReport {
  sessionId: string;
  tools: "log" | "live";
  identical: boolean;
  requests: RequestChange[];
  turns: TurnOutcome[];
  firstDivergence?: number;
  /** What the model would have been asked at the first divergence (the replayed request). */
  asked?: { system: string; tools: string[]; lastMessages: Array<{ role: string; text: string }> };
  /**
   * At the first divergence, when the system prompt changed: a compact line diff of the recorded
   * prompt to today's (`- ` recorded, `+ ` today; bounded, see lineDiff). Absent when the
   * recording holds no prompt text (logs before Keel recorded it): `asked.system` is all there is.
   */
  systemDiff?: { recordedChars: number; replayedChars: number; lines: string[] };
  /** Tool calls whose decision or status changed: `callId: recorded → replayed`. */
  toolChanges: Array<{ callId: string; name: string; recorded: string; replayed: string }>;
  /** Problems the replay met (a request the recording has no answer for, a call asked only now). */
  notes: string[];
  /** Plugin handlers that threw, timed out or returned invalid contributions in the replay and not in the recording. */
  pluginProblems: Array<{ phase: string; plugin: string; status: string; error?: string }>;
}

interface Answer {
  turnId: string | null;
  message?: AssistantMessage;
  stopReason?: Extract<KeelEvent, { type: "model.responded" }>["stopReason"];
  usage?: Extract<KeelEvent, { type: "model.responded" }>["usage"];
  failed?: Extract<KeelEvent, { type: "model.failed" }>;
}

/** The recorded model outcomes, in order: an answer (its message) or a failure. */
function recordedAnswers(events: readonly KeelEvent[]): Answer[] {
  const out: Answer[] = [];
  let waiting: Answer | undefined;
  for (const e of events) {
    if (e.type === "model.responded")
      out.push((waiting = { turnId: e.turnId, stopReason: e.stopReason, usage: e.usage }));
    else if (e.type === "model.failed") {
      out.push({ turnId: e.turnId, failed: e });
      waiting = undefined;
    } else if (e.type === "message.appended" && e.message.role === "assistant" && waiting) {
      waiting.message = e.message as AssistantMessage;
      waiting = undefined;
    }
  }
  return out.filter((a) => a.failed || a.message);
}

/**
 * A call's key: its turn and its id. Some providers number calls per response (`call_0`), so
 * an id alone repeats across turns; turn ids are `<session>/<n>`, the same in a replay.
 */
const callKey = (turnId: string | null, callId: string) => `${turnId ?? ""}\u0000${callId}`;

type Recorded = { content: ContentBlock[]; isError: boolean; reveal?: string[] };

/**
 * Each call's recorded result: the raw one when a plugin rewrote it, so today's plugins rewrite
 * it again; with the hidden tools its output revealed (tools.revealed comes just before the
 * call's tool.completed), so the replay shows them too.
 */
function recordedResults(events: readonly KeelEvent[]): Map<string, Recorded> {
  const out = new Map<string, Recorded>();
  const revealed = new Map<string | null, string[]>();
  const reveals = new Map<string, string[]>();
  for (const e of events) {
    if (e.type === "message.appended" && e.message.role === "tool") {
      const key = callKey(e.turnId, e.message.toolCallId);
      if (!out.has(key)) out.set(key, { content: e.message.content, isError: e.message.isError });
    }
    if (e.type === "tools.revealed" && e.names.length)
      revealed.set(e.turnId, [...(revealed.get(e.turnId) ?? []), ...e.names]);
    if (e.type === "tool.completed") {
      const key = callKey(e.turnId, e.callId);
      if (e.raw) out.set(key, e.raw);
      const names = revealed.get(e.turnId);
      if (names) reveals.set(key, names);
      revealed.delete(e.turnId);
    }
  }
  for (const [key, names] of reveals) {
    const r = out.get(key);
    if (r) out.set(key, { ...r, reveal: names });
  }
  return out;
}

interface CallState {
  callId: string;
  name: string;
  state: string;
  /** The state as a result from the log reproduces it: a call that timed out or was cut has an error result. */
  asLogged: string;
  fromLog: boolean;
}

function callStates(events: readonly KeelEvent[]): Map<string, CallState> {
  const out = new Map<string, CallState>();
  for (const e of events)
    if (e.type === "tool.completed") {
      const decision = e.decision ? ` (${e.decision})` : "";
      const status = e.status === "timeout" || e.status === "cancelled" ? "error" : e.status;
      out.set(callKey(e.turnId, e.callId), {
        callId: e.callId,
        name: e.name,
        state: `${e.status}${decision}`,
        asLogged: `${status}${decision}`,
        fromLog: e.answeredBy === "keel-replay",
      });
    }
  return out;
}

function outcomeOf(events: readonly KeelEvent[], turnId: string | null): TurnOutcome["recorded"] {
  let end: KeelEvent | undefined;
  let text = "";
  for (const e of events) {
    if (e.turnId !== turnId) continue;
    if (e.type === "message.appended" && e.message.role === "assistant") text = messageText(e.message);
    if (
      e.type === "turn.completed" ||
      e.type === "turn.failed" ||
      e.type === "turn.interrupted" ||
      e.type === "turn.paused"
    )
      end = e;
  }
  if (!end || !("verdict" in end)) return { status: "unfinished", text };
  return { ...verdictOf(end.verdict), text };
}

function verdictOf(verdict: unknown): { status: string; reason?: string; message?: string } {
  const v = verdict as { status: string; reason?: string; message?: string };
  return {
    status: v.status,
    ...(v.reason !== undefined ? { reason: v.reason } : {}),
    ...(typeof v.message === "string" ? { message: v.message } : {}),
  };
}

/**
 * Which recorded turn the replay is in, and whether the recording stops inside it (the turn was
 * interrupted, or a stopped process left it unfinished): there the replay cuts the turn too.
 */
interface Cursor {
  turnId: string | null;
  stops: boolean;
  /** Set when the replay cut the turn where the recording stops. */
  cut: boolean;
  /** Calls of a cut turn the replay answered as the cut left them (their status is not compared). */
  cutCalls: Set<string>;
  cancel(): void;
  /** Queue a recorded steering or follow-up message in the replayed session. */
  queue(m: QueuedMessage): Promise<void>;
}

/**
 * A steering or follow-up message as the recording consumed it: in `turnId`, after `at` of the
 * turn's model answers (0: at the turn's start); a steering message that let calls of that
 * answer run is queued once the last of them finished (`afterCall`), one that skipped them
 * before the answer is served, as the recording's timing had it.
 */
interface QueuedMessage {
  queue: "steering" | "follow_up";
  text: string;
  turnId: string | null;
  at: number;
  afterCall?: string;
}

function recordedQueue(events: readonly KeelEvent[], answers: readonly Answer[]): QueuedMessage[] {
  const texts = new Map<string, string>();
  const status = new Map<string, string>();
  for (const e of events) {
    if (e.type === "message.queued") texts.set(e.queueId, e.text);
    if (e.type === "tool.completed") status.set(callKey(e.turnId, e.callId), e.status);
  }
  const out: QueuedMessage[] = [];
  for (const d of events) {
    if (d.type !== "message.dequeued") continue;
    const text = texts.get(d.queueId);
    if (text === undefined) continue;
    const at = events.filter(
      (e) => (e.type === "model.responded" || e.type === "model.failed") && e.turnId === d.turnId && e.seq < d.seq,
    ).length;
    const m: QueuedMessage = { queue: d.queue, text, turnId: d.turnId, at };
    const answer = at > 0 ? answers.filter((a) => a.turnId === d.turnId)[at - 1] : undefined;
    const calls = (answer?.message?.content ?? []).flatMap((b) => (b.type === "tool_call" ? [b.id] : []));
    if (d.queue === "steering" && calls.length) {
      const ran = calls.filter((id) => status.get(callKey(d.turnId, id)) !== "skipped");
      if (ran.length) m.afterCall = callKey(d.turnId, ran.at(-1)!);
    }
    out.push(m);
  }
  return out;
}

/** Queues a steering message once the call the recording let run before it finished (any mode). */
function queuer(queued: readonly QueuedMessage[], cursor: Cursor): KeelPlugin {
  return definePlugin({
    name: "keel-replay-queue",
    version: "1.0.0",
    setup(ctx) {
      ctx.on(
        "tool.post_result",
        async (e) => {
          const key = callKey(e.turnId, e.call.id);
          for (const m of queued) if (m.afterCall === key) await cursor.queue(m);
          return undefined;
        },
        { stage: "post" },
      );
    },
  });
}

/** Each recorded child session's id, by its parent session, turn, call and name, in the order they started. */
function recordedChildIds(
  events: readonly KeelEvent[],
  children: Readonly<Record<string, readonly KeelEvent[]>>,
): NonNullable<AgentOptions["childSessionId"]> {
  const ids = new Map<string, string[]>();
  for (const log of [events, ...Object.values(children)])
    for (const e of log)
      if (e.type === "child.started") {
        const key = [e.sessionId, e.turnId, e.callId, e.name].join("\u0000");
        ids.set(key, [...(ids.get(key) ?? []), e.childSessionId]);
      }
  return (parent, ordinal) =>
    ids.get([parent.sessionId, parent.turnId, parent.callId, parent.name].join("\u0000"))?.[ordinal];
}

/** The recorded answers of child sessions, by the input of their first turn (what their requests start with). */
type ChildAnswers = Map<string, Answer[]>;

function childAnswers(children: Readonly<Record<string, readonly KeelEvent[]>> | undefined): ChildAnswers {
  const out: ChildAnswers = new Map();
  for (const log of Object.values(children ?? {})) {
    const start = log.find((e) => e.type === "turn.started");
    if (start?.type !== "turn.started") continue;
    out.set(start.input, [...(out.get(start.input) ?? []), ...recordedAnswers(log)]);
  }
  return out;
}

/**
 * A provider that serves the recording's answers turn by turn, in order, and keeps each request
 * it was asked. A turn only gets its own answers: one that asks more does not take the next
 * turn's (every later turn would be off by one).
 */
function replayProvider(
  answers: Answer[],
  asked: ModelRequest[],
  id: string,
  cursor: Cursor,
  queued: readonly QueuedMessage[],
  contextWindow: number | undefined,
  children: ChildAnswers,
): ModelProvider {
  const byTurn = new Map<string | null, Answer[]>();
  for (const a of answers) byTurn.set(a.turnId, [...(byTurn.get(a.turnId) ?? []), a]);
  const served = new Map<string | null, number>();
  return {
    id: `replay:${id}`,
    // The recorded provider's window: the context ceiling trips, and compaction works, as recorded.
    ...(contextWindow ? { contextWindow } : {}),
    async *stream(request): AsyncIterable<ModelEvent> {
      // A child session run live (a delegated task): its own recorded answers, in order.
      const child = children.get(request.messages[0] ? messageText(request.messages[0]) : "");
      if (child) {
        const c = child.shift();
        if (!c)
          throw new ProviderError("invalid_request", "The recording of this child session holds no more answers.");
        if (c.failed) throw new ProviderError(c.failed.errorClass, c.failed.message, { status: c.failed.status });
        yield { type: "response", message: c.message!, stopReason: c.stopReason ?? "end_turn", usage: c.usage ?? {} };
        return;
      }
      asked.push(request);
      const n = (served.get(cursor.turnId) ?? 0) + 1;
      served.set(cursor.turnId, n);
      const mine = byTurn.get(cursor.turnId) ?? [];
      const a = mine[n - 1];
      if (!a && cursor.stops) {
        // The recording stops here (interrupted, or left unfinished): so does the replay.
        cursor.cut = true;
        cursor.cancel();
        throw new ProviderError("aborted", "The recording of this turn stops here: the replay cut it too.");
      }
      if (!a)
        throw new ProviderError(
          "invalid_request",
          new KeelError(
            "KEEL_REPLAY_NO_ANSWER",
            `The replay asked for model request ${asked.length} (request ${n} of turn ${cursor.turnId}); the recording answered only ${mine.length} in that turn.`,
          ).message,
        );
      // Messages the recording's queue held by the time this answer came (they skip its calls).
      for (const m of queued) if (m.turnId === cursor.turnId && m.at === n && !m.afterCall) await cursor.queue(m);
      if (a.failed) throw new ProviderError(a.failed.errorClass, a.failed.message, { status: a.failed.status });
      yield { type: "response", message: a.message!, stopReason: a.stopReason ?? "end_turn", usage: a.usage ?? {} };
    },
  };
}

function fromLog(
  results: ReturnType<typeof recordedResults>,
  cutAt: ReadonlySet<string>,
  unanswered: ReadonlySet<string>,
  cursor: Cursor,
  notes: string[],
): KeelPlugin {
  return definePlugin({
    name: "keel-replay",
    version: "1.0.0",
    setup(ctx) {
      ctx.on(
        "tool.pre_call",
        (e) => {
          const key = callKey(e.turnId, e.call.id);
          const r = results.get(key);
          if (cursor.stops && (cutAt.has(key) || !r)) {
            // The recording was cut while this call ran (or before it had a result): cut the turn
            // here, the call answered as the recording's cut left it.
            cursor.cut = true;
            cursor.cutCalls.add(key);
            cursor.cancel();
            if (r)
              return { kind: "tool_decision", decision: "allow", result: { content: r.content, isError: r.isError } };
            return { kind: "tool_decision", decision: "deny", reason: "the recording of this turn stops here" };
          }
          // The recording paused on this call for an approval never given: pause here too.
          if (!r && unanswered.has(key))
            return { kind: "tool_decision", decision: "ask", reason: "the recording paused here for approval" };
          if (r)
            return {
              kind: "tool_decision",
              decision: "allow",
              result: { content: r.content, isError: r.isError, ...(r.reveal ? { reveal: r.reveal } : {}) },
            };
          notes.push(`Call ${e.call.id} (${e.call.name}) has no recorded result: it was refused.`);
          return { kind: "tool_decision", decision: "deny", reason: "the recording holds no result for this call" };
        },
        { stage: "post" },
      );
    },
  });
}

/** The recorded provider's context window, from the first manifest that holds it. */
function recordedWindow(events: readonly KeelEvent[]): number | undefined {
  for (const e of events)
    if (e.type === "prompt.compiled") {
      const w = (e.manifest as PromptManifest).contextWindow;
      if (typeof w === "number" && w > 0) return w;
    }
  return undefined;
}

/**
 * How a recorded turn ran besides its input: its metadata, and its structured-output format
 * (from its requests' manifests: turn.started does not hold it), sent back as recorded and
 * validated with a schema made from it.
 */
function runOptionsOf(events: readonly KeelEvent[], start: Extract<KeelEvent, { type: "turn.started" }>): RunOptions {
  const options: RunOptions = { metadata: { ...start.metadata } };
  for (const e of events) {
    if (e.type !== "prompt.compiled" || e.turnId !== start.turnId) continue;
    const format = (e.manifest as PromptManifest).options.output as OutputFormat | undefined;
    if (!format || typeof format.name !== "string" || typeof format.schema !== "object") continue;
    let output: z.ZodType;
    try {
      output = z.fromJSONSchema(format.schema as Parameters<typeof z.fromJSONSchema>[0]);
    } catch {
      output = z.looseObject({});
    }
    return { ...options, output, outputName: format.name, outputFormat: format };
  }
  return options;
}

/**
 * Replay one recorded session with today's plugins and compare every request with the recording.
 * Contract: never writes to the recorded session's store (the agent gets a scratch store);
 * throws KEEL_REPLAY_EMPTY when the log holds no turn to replay.
 */
export async function replaySession(options: ReplayOptions): Promise<ReplayReport> {
  const events = options.events;
  const tools = options.tools ?? "log";
  const sessionId = events[0]?.sessionId ?? "";
  const starts = events.filter(
    (e): e is Extract<KeelEvent, { type: "turn.started" }> => e.type === "turn.started" && e.trigger !== "resume",
  );
  if (!starts.length)
    throw new KeelError("KEEL_REPLAY_EMPTY", `Session ${sessionId} holds no turn to replay (no turn.started).`);
  const r = rigFor(options, tools, sessionId);
  const agent = await options.build(r.rig);
  let turns: TurnOutcome[];
  try {
    turns = await replayTurns(agent, r, starts, events);
  } finally {
    await agent.close();
  }
  return reportOf(r, tools, turns, await r.store.events(sessionId));
}

/** Everything one replay shares: the rig the agent is built with and what its parts record. */
interface Replay {
  rig: ReplayRig;
  store: ScratchStore;
  events: readonly KeelEvent[];
  sessionId: string;
  cursor: Cursor;
  queued: QueuedMessage[];
  approvals: Map<string, ApprovalAnswer>;
  notes: string[];
  asked: ModelRequest[];
  /** The replayed session, once open (the cursor cancels and queues through it). */
  open: { session?: Session };
}

/** The approvals as the recording answered them, by turn and call. */
function recordedApprovals(events: readonly KeelEvent[]): Map<string, ApprovalAnswer> {
  const approvals = new Map<string, ApprovalAnswer>();
  for (const e of events)
    if (e.type === "approval.resolved")
      approvals.set(callKey(e.turnId, e.callId), {
        approved: e.approved,
        ...(e.always ? { always: true } : {}),
        ...(e.reason !== undefined ? { reason: e.reason } : {}),
      });
  return approvals;
}

/** The provider, plugins, approvals and scratch store a replay builds today's agent with. */
function rigFor(options: ReplayOptions, tools: "log" | "live", sessionId: string): Replay {
  const events = options.events;
  const notes: string[] = [];
  const asked: ModelRequest[] = [];
  const approvals = recordedApprovals(events);
  // Calls the recording cut while they ran: a replay of that turn stops at them.
  const cutAt = new Set(
    events.flatMap((e) =>
      e.type === "tool.completed" && e.status === "cancelled" ? [callKey(e.turnId, e.callId)] : [],
    ),
  );
  // A recording that paused for approvals had no approve() callback: the replay pauses the same
  // way and answers as the host did (a denial reads as the host's, not a callback's).
  const paused = events.some((e) => e.type === "turn.paused");
  const open: Replay["open"] = {};
  const cursor: Cursor = {
    turnId: null,
    stops: false,
    cut: false,
    cutCalls: new Set(),
    cancel: () => open.session?.cancel(),
    queue: async (m) => {
      if (m.queue === "steering") await open.session?.steer(m.text);
      else await open.session?.followUp(m.text);
    },
  };
  const answers = recordedAnswers(events);
  const queued = recordedQueue(events, answers);
  const unanswered = new Set(
    events.flatMap((e) => (e.type === "approval.requested" ? [callKey(e.turnId, e.callId)] : [])),
  );
  for (const key of approvals.keys()) unanswered.delete(key);
  const store = new ScratchStore();
  const rig: ReplayRig = {
    provider: replayProvider(
      answers,
      asked,
      sessionId,
      cursor,
      queued,
      recordedWindow(events) ?? options.contextWindow,
      childAnswers(tools === "live" ? options.children : undefined),
    ),
    plugins: [
      ...(tools === "log" ? [fromLog(recordedResults(events), cutAt, unanswered, cursor, notes)] : []),
      ...(queued.some((m) => m.afterCall) ? [queuer(queued, cursor)] : []),
    ],
    ...(paused
      ? {}
      : {
          approve: (req: ApprovalRequest): ApprovalAnswer => {
            const answer = approvals.get(callKey(req.turnId, req.call.id));
            if (answer === undefined)
              notes.push(`Call ${req.call.id} (${req.call.name}) asked for approval only in the replay: refused.`);
            return answer ?? { approved: false };
          },
        }),
    store,
    sideModel: false,
    ...(tools === "live" && options.children ? { childSessionId: recordedChildIds(events, options.children) } : {}),
  };
  return { rig, store, events, sessionId, cursor, queued, approvals, notes, asked, open };
}

/**
 * Run each recorded turn again under the recorded session id (in the scratch store): what
 * plugins derive from the session's or a turn's id (a stored output's handle, a cache key)
 * comes out the same. A turn paused as recorded is answered as the host did.
 */
async function replayTurns(
  agent: Agent,
  r: Replay,
  starts: ReadonlyArray<Extract<KeelEvent, { type: "turn.started" }>>,
  events: readonly KeelEvent[],
): Promise<TurnOutcome[]> {
  const { cursor, queued, approvals } = r;
  const created = events.find((e) => e.type === "session.created");
  await r.store.createSession({ id: r.sessionId, agent: agent.name, createdAt: created?.ts ?? Date.now() });
  if (created) await r.store.append({ ...created, seq: 1 });
  const session = await agent.session(r.sessionId);
  r.open.session = session;
  const turns: TurnOutcome[] = [];
  for (const start of starts) {
    const mode = [...events].reverse().find((e) => e.type === "session.mode" && e.seq < start.seq);
    if (mode?.type === "session.mode" && mode.mode !== session.mode) await session.setMode(mode.mode);
    const input = start.content ? start.content : start.input;
    const recorded = outcomeOf(events, start.turnId);
    Object.assign(cursor, {
      turnId: start.turnId,
      stops: recorded.status === "interrupted" || recorded.status === "unfinished",
      cut: false,
    });
    const run = runOptionsOf(events, start);
    for (const m of queued) if (m.turnId === start.turnId && m.at === 0) await cursor.queue(m);
    let result = await session.run(input, run);
    // Paused as recorded: answer as the host did, and go on while the recording did.
    while (result.verdict.status === "paused") {
      const pending = session.pendingApprovals();
      const answers = pending.map((p) => approvals.get(callKey(p.turnId, p.callId)));
      if (!pending.length || answers.some((a) => !a)) break;
      for (const [i, p] of pending.entries()) {
        const a = answers[i]!;
        if (a.approved)
          await session.approve(p.callId, {
            ...(a.always ? { always: true } : {}),
            ...(a.reason ? { reason: a.reason } : {}),
          });
        else await session.deny(p.callId, a.reason ? { reason: a.reason } : {});
      }
      result = await session.resume(run);
    }
    const replayed =
      cursor.cut && recorded.status === "unfinished"
        ? { status: "unfinished", text: result.text }
        : { ...verdictOf(result.verdict), text: result.text };
    turns.push({
      input: start.input,
      recorded,
      replayed,
      same:
        recorded.status === replayed.status && recorded.reason === replayed.reason && recorded.text === replayed.text,
    });
    if (result.verdict.status === "paused") break;
  }
  return turns;
}

/** The recording and the replay's log compared: requests, turns, tool calls, plugin problems. */
function reportOf(
  r: Replay,
  tools: "log" | "live",
  turns: TurnOutcome[],
  replayed: readonly KeelEvent[],
): ReplayReport {
  const { events, notes } = r;
  const manifests = (log: readonly KeelEvent[]) =>
    log.flatMap((e) => (e.type === "prompt.compiled" ? [{ seq: e.seq, manifest: e.manifest as PromptManifest }] : []));
  const requests = compareRequests(events, manifests(events), replayed, manifests(replayed));
  const first = requests.findIndex((q) => !q.same);
  const toolChanges = diffCalls(callStates(events), callStates(replayed), r.cursor.cutCalls);
  const identical = first < 0 && turns.every((t) => t.same) && toolChanges.length === 0 && !notes.length;
  const report: ReplayReport = {
    sessionId: r.sessionId,
    tools,
    identical,
    requests,
    turns,
    toolChanges,
    notes,
    pluginProblems: newProblems(events, replayed),
  };
  const req = first >= 0 ? r.asked[first] : undefined;
  if (first >= 0) report.firstDivergence = first;
  if (req) {
    // As the log would store it: a secret in today's prompt or a live tool's output is not shown.
    report.asked = {
      system: redact(req.system),
      tools: req.tools.map((t) => t.name),
      lastMessages: req.messages.slice(-2).map((m) => ({ role: m.role, text: redact(messageText(m)) })),
    };
    const before = requests[first]!.systemSame ? undefined : systemTexts(events)[first];
    if (before !== undefined)
      report.systemDiff = {
        recordedChars: codePointLength(before),
        replayedChars: codePointLength(report.asked.system),
        // Today's cut as the log cuts it (16,000 code points), so a long prompt's end is not a change.
        lines: lineDiff(before, redact(truncate(req.system, 16_000, { marker: droppedMarker }))),
      };
  }
  return report;
}

/**
 * The system prompt of each recorded request, as the log holds it (redacted): recorded on a
 * turn's first request and when it changed, so carried forward within the turn; undefined where
 * the log has none (older logs).
 */
function systemTexts(log: readonly KeelEvent[]): Array<string | undefined> {
  const out: Array<string | undefined> = [];
  let turn: string | null | undefined;
  let text: string | undefined;
  for (const e of log) {
    if (e.type !== "prompt.compiled") continue;
    if (e.turnId !== turn) text = undefined;
    turn = e.turnId;
    if (typeof e.system === "string") text = e.system;
    out.push(text);
  }
  return out;
}

type Problem = ReplayReport["pluginProblems"][number];

function problemsOf(log: readonly KeelEvent[]): Map<string, Problem> {
  const out = new Map<string, Problem>();
  for (const e of log) {
    if (e.type !== "phase.completed") continue;
    for (const h of e.handlers) {
      if (h.status !== "threw" && h.status !== "timeout" && h.status !== "invalid") continue;
      const p = { phase: e.phase, plugin: h.plugin, status: h.status, ...(h.error ? { error: h.error } : {}) };
      out.set(JSON.stringify(p), p);
    }
  }
  return out;
}

function newProblems(recorded: readonly KeelEvent[], replayed: readonly KeelEvent[]): Problem[] {
  const before = problemsOf(recorded);
  return [...problemsOf(replayed)].filter(([k]) => !before.has(k)).map(([, p]) => p);
}

function diffCalls(
  recorded: ReturnType<typeof callStates>,
  replayed: ReturnType<typeof callStates>,
  cut: ReadonlySet<string>,
): ReplayReport["toolChanges"] {
  const out: ReplayReport["toolChanges"] = [];
  for (const [key, r] of recorded) {
    if (cut.has(key)) continue;
    const p = replayed.get(key);
    const now = p ? p.state : "not called";
    // Answered from the log, a call that timed out (or was cut, and its turn recovered) has
    // the error result it had: the same call, not a changed one.
    if (p?.fromLog && p.state === r.asLogged) continue;
    if (now !== r.state) out.push({ callId: r.callId, name: r.name, recorded: r.state, replayed: now });
  }
  for (const [key, p] of replayed)
    if (!recorded.has(key) && !cut.has(key))
      out.push({ callId: p.callId, name: p.name, recorded: "not called", replayed: p.state });
  return out;
}
