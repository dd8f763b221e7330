/**
 * Replay a recorded session against today's plugins: the recorded model answers are served in
 * order, tools answer from the log (or run live), and every request's manifest is compared
 * with the one recorded, so a plugin change shows as the requests it changed.
 */
import type {
  Agent,
  AssistantMessage,
  ApprovalRequest,
  ContentBlock,
  KeelEvent,
  KeelPlugin,
  ModelEvent,
  ModelProvider,
  ModelRequest,
  PromptManifest,
  SessionStore,
} from "@keel/kernel";
import { definePlugin, KeelError, messageText, ProviderError } from "@keel/kernel";
import { MemorySessionStore } from "@keel/testkit";
import { compareRequests, type RequestChange } from "./replay-diff.ts";

/** What the replay gives the agent it builds: use them in place of the config's own. */
export interface ReplayRig {
  /** Serves the recorded answers in order. */
  provider: ModelProvider;
  /** Answers tool calls from the log (`tools: "log"`); add it to the agent's plugins (empty with `tools: "live"`). */
  plugins: KeelPlugin[];
  /** Answers approvals as they were answered when recorded (a call asked only now is refused). */
  approve: (request: ApprovalRequest) => boolean;
  /** A scratch store: nothing of the replay reaches the recorded session's store. */
  store: SessionStore;
  /**
   * No side model: the log holds no side-model answers, and the agent's provider must not answer
   * plugins' side requests (each would take a recorded answer). Plugins use their fallbacks.
   */
  sideModel: false;
}

/** Options of replaySession. Contract: `events` is one session's log, in order. */
export interface ReplayOptions {
  events: readonly KeelEvent[];
  /** Build today's agent with the rig's provider, plugins, approve callback and store. */
  build: (rig: ReplayRig) => Promise<Agent>;
  /** `log` (default): tools answer with their recorded results; `live`: they run. */
  tools?: "log" | "live";
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
  /** Tool calls whose decision or status changed: `callId: recorded → replayed`. */
  toolChanges: Array<{ callId: string; name: string; recorded: string; replayed: string }>;
  /** Problems the replay met (a request the recording has no answer for, a call asked only now). */
  notes: string[];
  /** Plugin handlers that threw, timed out or returned invalid contributions in the replay and not in the recording. */
  pluginProblems: Array<{ phase: string; plugin: string; status: string; error?: string }>;
}

interface Answer {
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
    if (e.type === "model.responded") out.push((waiting = { stopReason: e.stopReason, usage: e.usage }));
    else if (e.type === "model.failed") {
      out.push({ failed: e });
      waiting = undefined;
    } else if (e.type === "message.appended" && e.message.role === "assistant" && waiting) {
      waiting.message = e.message as AssistantMessage;
      waiting = undefined;
    }
  }
  return out.filter((a) => a.failed || a.message);
}

/** Each call's recorded result: the raw one when a plugin rewrote it, so today's plugins rewrite it again. */
function recordedResults(events: readonly KeelEvent[]): Map<string, { content: ContentBlock[]; isError: boolean }> {
  const out = new Map<string, { content: ContentBlock[]; isError: boolean }>();
  for (const e of events) {
    if (e.type === "message.appended" && e.message.role === "tool" && !out.has(e.message.toolCallId))
      out.set(e.message.toolCallId, { content: e.message.content, isError: e.message.isError });
    if (e.type === "tool.completed" && e.raw) out.set(e.callId, e.raw);
  }
  return out;
}

function callStates(events: readonly KeelEvent[]): Map<string, { name: string; state: string }> {
  const out = new Map<string, { name: string; state: string }>();
  for (const e of events)
    if (e.type === "tool.completed")
      out.set(e.callId, { name: e.name, state: `${e.status}${e.decision ? ` (${e.decision})` : ""}` });
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

/** A provider that serves the recording's answers in order and keeps each request it was asked. */
function replayProvider(answers: Answer[], asked: ModelRequest[], id: string): ModelProvider {
  let next = 0;
  return {
    id: `replay:${id}`,
    async *stream(request): AsyncIterable<ModelEvent> {
      asked.push(request);
      const a = answers[next++];
      if (!a)
        throw new ProviderError(
          "invalid_request",
          new KeelError(
            "KEEL_REPLAY_NO_ANSWER",
            `The replay asked for model request ${next}; the recording answered only ${answers.length}.`,
          ).message,
        );
      if (a.failed) throw new ProviderError(a.failed.errorClass, a.failed.message, { status: a.failed.status });
      yield { type: "response", message: a.message!, stopReason: a.stopReason ?? "end_turn", usage: a.usage ?? {} };
    },
  };
}

/** Answers calls with their recorded results; `only`: other calls run as usual (live tools). */
function fromLog(results: ReturnType<typeof recordedResults>, notes: string[], only = false): KeelPlugin {
  return definePlugin({
    name: "keel-replay",
    version: "1.0.0",
    setup(ctx) {
      ctx.on(
        "tool.pre_call",
        (e) => {
          const r = results.get(e.call.id);
          if (r)
            return { kind: "tool_decision", decision: "allow", result: { content: r.content, isError: r.isError } };
          if (only) return undefined;
          notes.push(`Call ${e.call.id} (${e.call.name}) has no recorded result: it was refused.`);
          return { kind: "tool_decision", decision: "deny", reason: "the recording holds no result for this call" };
        },
        { stage: "post" },
      );
    },
  });
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
  const notes: string[] = [];
  const asked: ModelRequest[] = [];
  const approvals = new Map<string, boolean>();
  for (const e of events) if (e.type === "approval.resolved") approvals.set(e.callId, e.approved);
  const store = new MemorySessionStore();
  const results = recordedResults(events);
  // A call that started child sessions is answered from the log even with live tools: the
  // children's model answers are in their own sessions, not in this recording.
  const delegating = new Set(events.flatMap((e) => (e.type === "child.started" ? [e.callId] : [])));
  if (tools === "live" && delegating.size)
    notes.push(
      `${delegating.size} call(s) that started child sessions were answered from the log: their children's answers are recorded in their own sessions.`,
    );
  const informational = notes.length;
  const rig: ReplayRig = {
    provider: replayProvider(recordedAnswers(events), asked, sessionId),
    plugins:
      tools === "log"
        ? [fromLog(results, notes)]
        : delegating.size
          ? [fromLog(new Map([...results].filter(([id]) => delegating.has(id))), notes, true)]
          : [],
    approve: (req) => {
      const answer = approvals.get(req.call.id);
      if (answer === undefined)
        notes.push(`Call ${req.call.id} (${req.call.name}) asked for approval only in the replay: refused.`);
      return answer ?? false;
    },
    store,
    sideModel: false,
  };
  const agent = await options.build(rig);
  const turns: TurnOutcome[] = [];
  let replayId = "";
  try {
    // Under the recorded id (in the scratch store): what plugins derive from the session's or a
    // turn's id (a stored output's handle, a cache key) comes out the same.
    const created = events.find((e) => e.type === "session.created");
    await store.createSession({ id: sessionId, agent: agent.name, createdAt: created?.ts ?? Date.now() });
    if (created) await store.append({ ...created, seq: 1 });
    const session = await agent.session(sessionId);
    replayId = session.id;
    for (const start of starts) {
      const mode = [...events].reverse().find((e) => e.type === "session.mode" && e.seq < start.seq);
      if (mode?.type === "session.mode" && mode.mode !== session.mode) await session.setMode(mode.mode);
      const input = start.content ? start.content : start.input;
      const result = await session.run(input, { metadata: { ...start.metadata } });
      const recorded = outcomeOf(events, start.turnId);
      const replayed = { ...verdictOf(result.verdict), text: result.text };
      turns.push({
        input: start.input,
        recorded,
        replayed,
        same:
          recorded.status === replayed.status && recorded.reason === replayed.reason && recorded.text === replayed.text,
      });
      if (result.verdict.status === "paused") break;
    }
  } finally {
    await agent.close();
  }
  const replayed = await store.events(replayId);
  const manifests = (log: readonly KeelEvent[]) =>
    log.flatMap((e) => (e.type === "prompt.compiled" ? [{ seq: e.seq, manifest: e.manifest as PromptManifest }] : []));
  const requests = compareRequests(events, manifests(events), replayed, manifests(replayed));
  const first = requests.findIndex((r) => !r.same);
  const toolChanges = diffCalls(callStates(events), callStates(replayed));
  const identical = first < 0 && turns.every((t) => t.same) && !toolChanges.length && notes.length === informational;
  const report: ReplayReport = {
    sessionId,
    tools,
    identical,
    requests,
    turns,
    toolChanges,
    notes,
    pluginProblems: newProblems(events, replayed),
  };
  if (first >= 0) {
    report.firstDivergence = first;
    const req = asked[first];
    if (req)
      report.asked = {
        system: req.system,
        tools: req.tools.map((t) => t.name),
        lastMessages: req.messages.slice(-2).map((m) => ({ role: m.role, text: messageText(m) })),
      };
  }
  return report;
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
): ReplayReport["toolChanges"] {
  const out: ReplayReport["toolChanges"] = [];
  for (const [callId, r] of recorded) {
    const p = replayed.get(callId);
    const now = p ? p.state : "not called";
    if (now !== r.state) out.push({ callId, name: r.name, recorded: r.state, replayed: now });
  }
  for (const [callId, p] of replayed)
    if (!recorded.has(callId)) out.push({ callId, name: p.name, recorded: "not called", replayed: p.state });
  return out;
}
