/**
 * A session's event log as turns a person can read: per turn a timeline (phases with each
 * plugin's handler time, provider requests with streaming time and tokens, tool calls, jobs),
 * the prompt manifest of every request, what compaction removed, diagnostics and rejected
 * contributions with their plugin and phase, and the approvals a paused turn waits for.
 */
import type {
  ContributionRecord,
  HandlerSummary,
  KeelEvent,
  PromptManifest,
  TurnTimings,
  TurnVerdict,
  Usage,
} from "@keel/kernel";
import { droppedMarker, headOf, truncate } from "@keel/text";

/** One bar of a turn's timeline. Contract: `start`/`end` are ms from the turn's start, `end >= start`. */
export interface TimelineItem {
  kind: "phase" | "background" | "request" | "tool" | "job" | "compaction" | "guard";
  label: string;
  start: number;
  end: number;
  status: string;
  plugins?: string[];
  handlers?: HandlerSummary[];
  detail?: Record<string, unknown>;
}

/** One provider request: its manifest and what came back. */
export interface RequestView {
  round: number;
  at: number;
  manifest?: PromptManifest;
  provider?: string;
  model?: string;
  durationMs?: number;
  firstChunkMs?: number;
  usage?: Partial<Usage>;
  stopReason?: string;
  attempt?: number;
  error?: { errorClass: string; message: string; status?: number };
  notices: Array<{ kind: string; message: string }>;
  /** Compactions applied since the previous request (what the model did not see again). */
  compactions: Array<{ plugin: string; reason: string; before: number; after: number; edits: number; what: string[] }>;
}

/** A finding about a plugin: a diagnostic, or a contribution not applied as given. */
export interface Finding {
  level: "info" | "warn" | "error";
  code: string;
  message: string;
  plugin?: string;
  phase?: string;
  seq: number;
}

/**
 * One tool call: what it was called with and what it returned, as text (cut by code points,
 * saying how much was dropped; the log holds them redacted). Contract: never markup: the page escapes it.
 */
export interface CallView {
  callId: string;
  name: string;
  round: number;
  /** The arguments as JSON (indented), cut. */
  args: string;
  /** The result's text (non-text blocks as `[image]` …), cut; absent until the result is in the log. */
  result?: string;
  isError?: boolean;
  status?: string;
  durationMs?: number;
  decision?: string;
  /** A plugin answered the call (the tool did not run). */
  answeredBy?: string;
}

/** One approval asked in the turn, and its answer once given: who, when, why. */
export interface ApprovalView {
  callId: string;
  name: string;
  args: string;
  /** Why it was asked (the rule or plugin's reason), when the request carries one. */
  reason?: string;
  plugin?: string;
  via?: { child: string; sessionId: string };
  /** When it was asked (ms since the epoch); absent for an "always" answer, which asks no one. */
  askedAt?: number;
  answer?: {
    approved: boolean;
    always?: boolean;
    reason?: string;
    /** How the answer came: the host (approve/deny), the approve() callback, or an earlier "always". */
    by: string;
    /** Who answered, when the log records it (logs before it was recorded have none). */
    answerer?: string;
    at: number;
  };
}

/** What a turn's own model requests cost. Contract: `usd` sums the requests that carry a cost; `unpriced` counts those that do not. */
export interface CostView {
  usd: number;
  priced: number;
  unpriced: number;
}

/** One turn, as the studio shows it. */
export interface TurnView {
  id: string;
  index: number;
  startedAt: number;
  endedAt?: number;
  input: string;
  trigger: string;
  /** `chat`: the turn ran with no tools (session.setMode / keel --mode). */
  mode: "agent" | "chat";
  status: "running" | TurnVerdict["status"];
  verdict?: TurnVerdict;
  usage?: Usage;
  rounds: number;
  toolCalls: number;
  timings?: TurnTimings;
  timeline: TimelineItem[];
  requests: RequestView[];
  findings: Finding[];
  guards: Array<{ guard: string; limit: number; value: number }>;
  /** Every tool call of the turn with its arguments and result. */
  calls: CallView[];
  /** Every approval asked in the turn, answered ones included (oldest first). */
  approvals: ApprovalView[];
  /** What the turn's model requests (and its preflight plan) cost, from the usage the log records. */
  cost: CostView;
  /** Tool calls a paused turn waits for. */
  pending: Array<{
    callId: string;
    name: string;
    args: string;
    reason?: string;
    plugin?: string;
    via?: { child: string; sessionId: string };
  }>;
  answer?: string;
  /**
   * Set when a stopped process left the turn unfinished and it went on (recovery "auto", keel
   * worker): the calls it cut, and whose lease was taken over.
   */
  recovered?: { cut: string[]; at: number; takenOver?: { pid: number; host: string; reason: string } };
  /** Items left out of a huge turn (the middle of each list is dropped; its first and last halves are kept). */
  omitted?: { timeline?: number; requests?: number; findings?: number; calls?: number; approvals?: number };
}

/** Most items of each list sent for one turn. */
const CAPS = { timeline: 1_500, requests: 300, findings: 500, calls: 500, approvals: 300 } as const;
/** Longest arguments and result text of one call sent to the page, in code points. */
const MAX_ARGS = 2_000;
const MAX_RESULT = 4_000;

/** Edits of one compaction listed one by one; the rest are counted. */
const MAX_EDITS_SHOWN = 20;
/** Longest input or answer text sent to the page, in code points. */
const MAX_TEXT = 4_000;

function text(value: unknown, max = MAX_TEXT): string {
  const s = typeof value === "string" ? value : (JSON.stringify(value) ?? "");
  return truncate(s, max);
}

/** Arguments as indented JSON, cut; a value that does not serialize says so. */
function argsText(value: unknown): string {
  let s: string;
  try {
    s = JSON.stringify(value, null, 2) ?? "";
  } catch {
    s = "(arguments that are not JSON)";
  }
  return truncate(s, MAX_ARGS, { marker: droppedMarker });
}

/** A cost from a usage record, when it carries a valid one. */
function costOf(usage: Partial<Usage> | undefined): number | undefined {
  const c = usage?.costUsd;
  return typeof c === "number" && Number.isFinite(c) && c >= 0 ? c : undefined;
}

function addCost(t: TurnView, usage: Partial<Usage> | undefined): void {
  const c = costOf(usage);
  if (c === undefined) t.cost.unpriced++;
  else {
    t.cost.usd += c;
    t.cost.priced++;
  }
}

/** What the turns cost together. Contract: pure. */
export function totalCost(turns: readonly TurnView[]): CostView {
  const total: CostView = { usd: 0, priced: 0, unpriced: 0 };
  for (const t of turns) {
    total.usd += t.cost.usd;
    total.priced += t.cost.priced;
    total.unpriced += t.cost.unpriced;
  }
  return total;
}

/** Group a session's events into turns, oldest first. Contract: pure; events in seq order. */
export function turnsOf(events: readonly KeelEvent[]): TurnView[] {
  const turns = new Map<string, TurnView>();
  const openTools = new Map<string, { start: number; name: string; round: number }>();
  const openJobs = new Map<string, { start: number; plugin: string; name: string; attempt: number }>();
  const children = new Map<string, string>();
  /** Per turn: its calls and approvals by call id (the latest with that id: ids can repeat across rounds). */
  const callsById = new Map<string, Map<string, CallView>>();
  const approvalsById = new Map<string, Map<string, ApprovalView>>();
  const callOf = (t: TurnView, callId: string, name: string, round: number, args?: string): CallView => {
    let byId = callsById.get(t.id);
    if (!byId) callsById.set(t.id, (byId = new Map()));
    let c = byId.get(callId);
    if (!c) {
      c = { callId, name, round, args: args ?? approvalsById.get(t.id)?.get(callId)?.args ?? "" };
      byId.set(callId, c);
      t.calls.push(c);
    }
    return c;
  };
  let pendingCompactions: RequestView["compactions"] = [];
  const rel = (t: TurnView, ts: number) => Math.max(0, ts - t.startedAt);
  for (const e of events) {
    if (e.type === "turn.started") {
      turns.set(e.turnId!, {
        id: e.turnId!,
        index: turns.size + 1,
        startedAt: e.ts,
        input: text(e.input),
        trigger: e.trigger,
        mode: e.mode === "chat" ? "chat" : "agent",
        status: "running",
        rounds: 0,
        toolCalls: 0,
        timeline: [],
        requests: [],
        findings: [],
        guards: [],
        calls: [],
        approvals: [],
        cost: { usd: 0, priced: 0, unpriced: 0 },
        pending: [],
      });
      pendingCompactions = [];
      continue;
    }
    const t = e.turnId ? turns.get(e.turnId) : undefined;
    if (!t) continue;
    switch (e.type) {
      case "turn.resumed":
        t.status = "running";
        t.pending = [];
        if (e.recovered)
          t.recovered = {
            cut: e.recovered.cut.slice(0, 50).map((c) => text(c, 200)),
            at: e.ts,
            ...(e.recovered.leaseTakenOver ? { takenOver: { ...e.recovered.leaseTakenOver } } : {}),
          };
        break;
      case "phase.completed":
      case "phase.background": {
        const handlers = e.type === "phase.completed" ? e.handlers : [e.handler];
        const duration = e.type === "phase.completed" ? e.durationMs : e.handler.durationMs;
        const end = rel(t, e.ts);
        t.timeline.push({
          kind: e.type === "phase.completed" ? "phase" : "background",
          label: e.phase,
          start: Math.max(0, end - duration),
          end,
          status: handlers.some((h) => h.status !== "ok") ? handlers.find((h) => h.status !== "ok")!.status : "ok",
          plugins: [...new Set(handlers.map((h) => h.plugin))],
          handlers,
        });
        addRecords(t, e.contributions, e.phase, e.seq);
        break;
      }
      case "contributions.merged":
        addRecords(t, e.contributions, e.phase, e.seq);
        break;
      case "prompt.compiled":
        t.requests.push({
          round: e.manifest.round,
          at: rel(t, e.ts),
          manifest: e.manifest,
          notices: [],
          compactions: pendingCompactions,
        });
        pendingCompactions = [];
        break;
      case "context.edited": {
        const what = e.edits
          .slice(0, MAX_EDITS_SHOWN)
          .map((x) =>
            x.op === "replace"
              ? `messages ${x.start + 1}–${x.end} replaced by ${x.messages.length} (${headOf(x.messages.map((m) => m.content.map((b) => (b.type === "text" ? b.text : `[${b.type}]`)).join(" ")).join(" / "), 160)})`
              : `result of call ${headOf(x.toolCallId, 60)} masked: ${headOf(x.text, 160)}`,
          );
        if (e.edits.length > MAX_EDITS_SHOWN) what.push(`… and ${e.edits.length - MAX_EDITS_SHOWN} more edits`);
        pendingCompactions.push({
          plugin: e.plugin,
          reason: e.reason,
          before: e.before,
          after: e.after,
          edits: e.edits.length,
          what,
        });
        const at = rel(t, e.ts);
        t.timeline.push({
          kind: "compaction",
          label: `${e.plugin}: ${e.before} → ${e.after} messages`,
          start: at,
          end: at,
          status: "ok",
          plugins: [e.plugin],
        });
        break;
      }
      case "model.notice":
        request(t, e.round, rel(t, e.ts)).notices.push({ kind: e.kind, message: text(e.message, 500) });
        break;
      case "model.responded": {
        addCost(t, e.usage);
        const r = request(t, e.round, rel(t, e.ts) - e.durationMs);
        Object.assign(r, {
          durationMs: e.durationMs,
          usage: e.usage,
          stopReason: e.stopReason,
          attempt: e.attempt,
          ...(e.provider ? { provider: e.provider } : {}),
          ...(e.model ? { model: e.model } : {}),
          ...(e.firstChunkMs !== undefined ? { firstChunkMs: e.firstChunkMs } : {}),
        });
        const end = rel(t, e.ts);
        t.timeline.push({
          kind: "request",
          label: `round ${e.round}${e.model ? ` · ${e.model}` : e.provider ? ` · ${e.provider}` : ""}`,
          start: Math.max(0, end - e.durationMs),
          end,
          status: e.stopReason,
          detail: { usage: e.usage, firstChunkMs: e.firstChunkMs, attempt: e.attempt },
        });
        break;
      }
      case "model.failed": {
        const r = request(t, e.round, rel(t, e.ts));
        r.error = {
          errorClass: e.errorClass,
          message: text(e.message, 1_000),
          ...(e.status !== undefined ? { status: e.status } : {}),
        };
        t.timeline.push({
          kind: "request",
          label: `round ${e.round} failed`,
          start: r.at,
          end: Math.max(r.at, rel(t, e.ts)),
          status: e.errorClass,
        });
        break;
      }
      case "preflight.completed":
        if (costOf(e.usage) !== undefined) addCost(t, e.usage);
        break;
      case "child.started":
        children.set(e.callId, e.childSessionId);
        break;
      case "tool.started": {
        openTools.set(e.callId, { start: rel(t, e.ts), name: e.name, round: e.round });
        // A call that starts again (recovery) is the same call: its arguments are the latest.
        callsById.get(t.id)?.delete(e.callId);
        callOf(t, e.callId, e.name, e.round, argsText(e.args));
        break;
      }
      case "tool.completed": {
        const o = openTools.get(e.callId);
        openTools.delete(e.callId);
        const end = rel(t, e.ts);
        t.timeline.push({
          kind: "tool",
          label: e.name,
          start: o?.start ?? Math.max(0, end - e.durationMs),
          end,
          status: e.status,
          detail: {
            callId: e.callId,
            round: e.round,
            durationMs: e.durationMs,
            ...(e.decision ? { decision: e.decision } : {}),
            ...(children.has(e.callId) ? { childSession: children.get(e.callId) } : {}),
          },
        });
        Object.assign(callOf(t, e.callId, e.name, e.round), {
          status: e.status,
          durationMs: e.durationMs,
          ...(e.decision ? { decision: text(e.decision, 500) } : {}),
          ...(e.answeredBy ? { answeredBy: text(e.answeredBy, 200) } : {}),
        });
        break;
      }
      case "message.appended": {
        const m = e.message;
        if (m.role === "tool") {
          const item = [...t.timeline].reverse().find((i) => i.kind === "tool" && i.detail?.callId === m.toolCallId);
          const chars = m.content.reduce((n, b) => n + (b.type === "text" ? [...b.text].length : 0), 0);
          if (item) item.detail = { ...item.detail, resultChars: chars, ...(m.isError ? { isError: true } : {}) };
          const call = callsById.get(t.id)?.get(m.toolCallId);
          if (call) {
            const body = m.content.map((b) => (b.type === "text" ? b.text : `[${b.type}]`)).join("\n");
            call.result = truncate(body, MAX_RESULT, { marker: droppedMarker });
            if (m.isError) call.isError = true;
          }
        } else if (m.role === "assistant") {
          const answer = m.content
            .filter((b) => b.type === "text")
            .map((b) => (b as { text: string }).text)
            .join("");
          if (answer) t.answer = text(answer);
        }
        break;
      }
      case "job.started":
        openJobs.set(e.idempotencyKey, { start: rel(t, e.ts), plugin: e.plugin, name: e.name, attempt: e.attempt });
        break;
      case "job.completed": {
        const o = openJobs.get(e.idempotencyKey);
        openJobs.delete(e.idempotencyKey);
        const end = rel(t, e.ts);
        t.timeline.push({
          kind: "job",
          label: `${e.plugin}: ${e.name}`,
          start: o?.start ?? Math.max(0, end - e.durationMs),
          end,
          status: e.status,
          plugins: [e.plugin],
          detail: { durationMs: e.durationMs, ...(e.error ? { error: text(e.error, 500) } : {}) },
        });
        break;
      }
      case "diagnostic":
        t.findings.push({
          level: e.level,
          code: e.code,
          message: text(e.message, 1_000),
          ...(e.plugin ? { plugin: e.plugin } : {}),
          ...(e.phase ? { phase: e.phase } : {}),
          seq: e.seq,
        });
        break;
      case "fault":
        t.findings.push({
          level: "error",
          code: e.code,
          message: text(e.message, 1_000),
          ...(e.plugin ? { plugin: e.plugin } : {}),
          seq: e.seq,
        });
        break;
      case "guard.tripped": {
        t.guards.push({ guard: e.guard, limit: e.limit, value: e.value });
        const at = rel(t, e.ts);
        t.timeline.push({
          kind: "guard",
          label: `${e.guard}: ${e.value} of ${e.limit}`,
          start: at,
          end: at,
          status: "tripped",
        });
        break;
      }
      case "approval.requested": {
        const asked: ApprovalView = {
          callId: e.callId,
          name: e.name,
          args: argsText(e.args),
          askedAt: e.ts,
          ...(typeof e.reason === "string" && e.reason ? { reason: text(e.reason, 500) } : {}),
          ...(e.plugin ? { plugin: text(e.plugin, 200) } : {}),
          ...(e.via ? { via: { child: e.via.child, sessionId: e.via.sessionId } } : {}),
        };
        let byId = approvalsById.get(t.id);
        if (!byId) approvalsById.set(t.id, (byId = new Map()));
        byId.set(e.callId, asked);
        t.approvals.push(asked);
        t.pending.push({
          callId: e.callId,
          name: e.name,
          args: text(e.args, 1_000),
          ...(e.reason ? { reason: text(e.reason, 500) } : {}),
          ...(e.plugin ? { plugin: e.plugin } : {}),
          ...(e.via ? { via: { child: e.via.child, sessionId: e.via.sessionId } } : {}),
        });
        break;
      }
      case "approval.resolved": {
        t.pending = t.pending.filter((p) => p.callId !== e.callId);
        let asked = approvalsById.get(t.id)?.get(e.callId);
        // An earlier "always" answers without a request: the answer stands alone in the history.
        // A second answer before the resume (the last counts) is listed too, under the same request.
        if (!asked || asked.answer) {
          const { answer: _, ...request } = asked ?? { callId: e.callId, name: e.name, args: "" };
          asked = request;
          approvalsById.get(t.id)?.set(e.callId, asked);
          t.approvals.push(asked);
        }
        // Read defensively: fields of a log written by another version may be missing or odd.
        const answerer = (e as { answerer?: unknown }).answerer;
        asked.answer = {
          approved: e.approved === true,
          ...(e.always === true ? { always: true } : {}),
          ...(typeof e.reason === "string" && e.reason ? { reason: text(e.reason, 1_000) } : {}),
          by: typeof e.by === "string" ? e.by : "host",
          ...(typeof answerer === "string" && answerer ? { answerer: text(answerer, 200) } : {}),
          at: e.ts,
        };
        break;
      }
      case "turn.completed":
      case "turn.failed":
      case "turn.interrupted":
      case "turn.paused":
        Object.assign(t, {
          status: e.verdict.status,
          verdict: e.verdict,
          usage: e.usage,
          rounds: e.rounds,
          toolCalls: e.toolCalls,
          endedAt: e.ts,
          ...(e.timings ? { timings: e.timings } : {}),
        });
        if (e.type !== "turn.paused") t.pending = [];
        break;
    }
  }
  for (const t of turns.values())
    for (const key of ["timeline", "requests", "findings", "calls", "approvals"] as const) capList(t, key);
  return [...turns.values()];
}

/** Keep the first and last halves of a list longer than its cap, and count the rest. */
function capList(t: TurnView, key: keyof typeof CAPS): void {
  const list = t[key] as unknown[];
  const cap = CAPS[key];
  if (list.length <= cap) return;
  const half = cap / 2;
  (t.omitted ??= {})[key] = list.length - cap;
  list.splice(half, list.length - cap);
}

function request(t: TurnView, round: number, at: number): RequestView {
  const last = t.requests.at(-1);
  if (last && last.round === round && last.durationMs === undefined && !last.error) return last;
  const r: RequestView = { round, at: Math.max(0, at), notices: [], compactions: [] };
  t.requests.push(r);
  return r;
}

function addRecords(t: TurnView, records: readonly ContributionRecord[], phase: string, seq: number): void {
  for (const c of records) {
    if (c.status === "applied") continue;
    t.findings.push({
      level: c.status === "rejected" ? "warn" : "info",
      code: `contribution ${c.status}`,
      message: `${c.kind}${c.id ? ` "${headOf(c.id, 80)}"` : ""}${c.reason ? `: ${text(c.reason, 500)}` : ""}`,
      plugin: c.plugin,
      phase,
      seq,
    });
  }
}
