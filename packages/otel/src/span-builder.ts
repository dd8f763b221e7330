/**
 * Keel events → OpenTelemetry spans. One `invoke_agent` span per turn, parented on the span
 * that was active when the turn started (a host's HTTP request span); under it a `chat` span
 * per provider request, an `execute_tool` span per tool call, a `keel.phase` span per phase
 * run that did work, and `keel.job` spans for durable jobs. Everything else is a span event.
 */
import {
  context as otelContext,
  type Context,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
  type Attributes,
} from "@opentelemetry/api";
import type { AgentEvent, KeelEvent } from "@keel/kernel";
import { content, label, manifestAttributes, short, splitProviderId, usageAttributes } from "./attributes.ts";

/** Options the builder needs (resolved from OtelOptions). */
export interface BuilderOptions {
  tracer: Tracer;
  agentName: string;
  /** The agent's model id (`anthropic:…`, `fallback:a|b`). */
  providerId: string;
  captureContent: boolean;
  maxContentChars: number;
  /** `work`: phase runs with at least one handler; `all`: every phase run that was logged. */
  phases: "work" | "all";
}

type Ev<T extends AgentEvent["type"]> = Extract<AgentEvent, { type: T }>;

/** A span whose end waits for a later event (a tool's result message, an answer's message). */
interface Pending {
  span: Span;
  endTime?: number;
}

interface TurnState {
  span: Span;
  ctx: Context;
  round?: Pending & { round: number };
  tools: Map<string, Pending & { resultSeen: boolean }>;
  phaseStarts: Map<string, number>;
}

/** Turn contexts kept after their turn ends, for background phases and jobs that settle later. */
const RECENT_TURNS = 256;

/** Contract: `handle` never throws; spans of a turn all end by its terminal event (or `end()`). */
export class SpanBuilder {
  private readonly o: BuilderOptions;
  private readonly turns = new Map<string, TurnState>();
  private readonly recent = new Map<string, Context>();
  private readonly jobs = new Map<string, Span>();
  private readonly silent = new Set<string>();

  constructor(options: BuilderOptions) {
    this.o = options;
  }

  handle(e: AgentEvent): void {
    // A turn whose span is not recorded (no SDK, or sampled out) costs nothing more.
    if (e.turnId && this.silent.has(e.turnId) && e.type !== "turn.started" && e.type !== "turn.resumed") {
      if (
        e.type === "turn.completed" ||
        e.type === "turn.failed" ||
        e.type === "turn.interrupted" ||
        e.type === "turn.paused"
      )
        this.silent.delete(e.turnId);
      return;
    }
    switch (e.type) {
      case "turn.started":
        return this.startTurn(e, false);
      case "turn.resumed":
        return this.startTurn(e, true);
      case "phase.started":
        if (e.turnId) this.turns.get(e.turnId)?.phaseStarts.set(e.phase, Date.now());
        return;
      case "phase.completed":
        return this.phase(e, false);
      case "phase.background":
        return this.phase(e, true);
      case "prompt.compiled":
        return this.request(e);
      case "model.notice":
        return this.roundEvent(e, `keel.model.${e.kind}`, {
          "keel.message": short(e.message),
          ...(e.provider ? { "keel.provider": label(e.provider, 200) } : {}),
        });
      case "model.responded":
        return this.responded(e);
      case "model.failed":
        return this.failed(e);
      case "tool.started":
        return this.toolStarted(e);
      case "tool.completed":
        return this.toolCompleted(e);
      case "message.appended":
        return this.appended(e);
      case "context.edited":
        return this.turnEvent(e, "keel.compaction", {
          "keel.plugin": label(e.plugin, 200),
          "keel.compaction.reason": short(e.reason),
          "keel.compaction.messages_before": e.before,
          "keel.compaction.messages_after": e.after,
          "keel.compaction.edits": e.edits.length,
        });
      case "context.repaired":
        return this.turnEvent(e, "keel.context.repaired", {
          "keel.repaired.synthesized": e.synthesizedResults.length,
          "keel.repaired.dropped": e.droppedResults.length,
        });
      case "contributions.merged": {
        const notApplied = e.contributions.filter((c) => c.status !== "applied");
        for (const c of notApplied)
          this.turnEvent(e, `keel.contribution.${c.status}`, {
            "keel.phase": e.phase,
            "keel.plugin": label(c.plugin, 200),
            "keel.contribution.kind": label(c.kind, 100),
            ...(c.reason ? { "keel.contribution.reason": short(c.reason) } : {}),
          });
        return;
      }
      case "diagnostic":
        return this.turnEvent(e, "keel.diagnostic", {
          "keel.diagnostic.level": e.level,
          "keel.diagnostic.code": e.code,
          "keel.diagnostic.message": short(e.message, 1000),
          ...(e.plugin ? { "keel.plugin": label(e.plugin, 200) } : {}),
          ...(e.phase ? { "keel.phase": e.phase } : {}),
        });
      case "guard.tripped":
        return this.turnEvent(e, "keel.guard.tripped", {
          "keel.guard": e.guard,
          "keel.guard.limit": e.limit,
          "keel.guard.value": e.value,
        });
      case "tools.revealed":
        return this.turnEvent(e, "keel.tools.revealed", {
          "keel.revealed.by": label(e.by, 200),
          "keel.revealed.names": e.names.map((n) => label(n, 100)),
        });
      case "preflight.completed":
        return this.turnEvent(e, "keel.preflight", {
          "keel.preflight.status": e.status,
          "keel.preflight.revealed": e.revealed,
          "keel.preflight.duration_ms": e.durationMs,
        });
      case "approval.requested":
        return this.turnEvent(e, "keel.approval.requested", {
          "gen_ai.tool.name": e.name,
          "gen_ai.tool.call.id": e.callId,
          ...(e.plugin ? { "keel.plugin": label(e.plugin, 200) } : {}),
        });
      case "approval.resolved":
        return this.turnEvent(e, "keel.approval.resolved", {
          "gen_ai.tool.name": e.name,
          "gen_ai.tool.call.id": e.callId,
          "keel.approval.approved": e.approved,
          "keel.approval.by": e.by,
        });
      case "fault":
        return this.turnEvent(e, "keel.fault", {
          "keel.fault.source": e.source,
          "keel.fault.message": short(e.message, 1000),
          ...(e.plugin ? { "keel.plugin": label(e.plugin, 200) } : {}),
        });
      case "message.queued":
        return this.turnEvent(e, "keel.message.queued", { "keel.queue": e.queue });
      case "job.started":
        return this.jobStarted(e);
      case "job.completed":
        return this.jobCompleted(e);
      case "job.deferred":
        this.endJob(e.idempotencyKey, { code: SpanStatusCode.UNSET }, { "keel.job.deferred": short(e.reason) });
        return;
      case "turn.completed":
      case "turn.failed":
      case "turn.interrupted":
      case "turn.paused":
        return this.endTurn(e);
      default:
        return;
    }
  }

  /** End every open span (the agent is closing). */
  end(): void {
    for (const [id, t] of this.turns) {
      this.closeChildren(t);
      t.span.setStatus({ code: SpanStatusCode.ERROR, message: "the agent closed during the turn" });
      t.span.end();
      this.turns.delete(id);
    }
    for (const s of this.jobs.values()) s.end();
    this.jobs.clear();
  }

  private startTurn(e: Ev<"turn.started"> | Ev<"turn.resumed">, resumed: boolean): void {
    if (!e.turnId) return;
    const old = this.turns.get(e.turnId);
    if (old) this.endOpen(old);
    const attrs: Attributes = {
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": this.o.agentName,
      "gen_ai.conversation.id": e.sessionId,
      "keel.session.id": e.sessionId,
      "keel.turn.id": e.turnId,
    };
    if (e.type === "turn.started") {
      attrs["keel.turn.trigger"] = e.trigger;
      attrs["keel.session.mode"] = e.mode === "chat" ? "chat" : "agent";
      // A turn keel eval ran (turn metadata { experiment, case }): its trace says which run and case.
      const m = e.metadata as Record<string, unknown> | undefined;
      if (typeof m?.experiment === "string" && typeof m.case === "string") {
        attrs["keel.eval.experiment.id"] = label(m.experiment);
        attrs["keel.eval.case.id"] = label(m.case);
      }
      if (this.o.captureContent)
        attrs["gen_ai.input.messages"] = content(
          [{ role: "user", parts: [{ type: "text", content: e.input }] }],
          this.o.maxContentChars,
        );
    } else {
      attrs["keel.turn.resumed"] = true;
      attrs["keel.turn.answered"] = e.answered;
      // Went on after a stopped process left it (recovery "auto"): which calls had been cut, and whose lease was taken.
      if (e.recovered) {
        attrs["keel.turn.recovered"] = true;
        attrs["keel.turn.recovered.cut"] = e.recovered.cut;
        if (e.recovered.leaseTakenOver)
          attrs["keel.turn.recovered.lease_taken_over"] = e.recovered.leaseTakenOver.reason;
      }
    }
    // The host's active span (an HTTP request span) when the turn started is the parent.
    const parent = otelContext.active();
    // A resumed turn links to the run that paused it (same turn id), so the two read as one.
    const paused = resumed ? this.recent.get(e.turnId) : undefined;
    const pausedSpan = paused ? trace.getSpanContext(paused) : undefined;
    const span = this.o.tracer.startSpan(
      `invoke_agent ${this.o.agentName}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: attrs,
        startTime: e.ts,
        ...(pausedSpan ? { links: [{ context: pausedSpan, attributes: { "keel.link": "paused_run" } }] } : {}),
      },
      parent,
    );
    if (!span.isRecording()) {
      span.end();
      this.silent.add(e.turnId);
      if (this.silent.size > RECENT_TURNS) this.silent.delete(this.silent.values().next().value!);
      return;
    }
    this.silent.delete(e.turnId);
    this.turns.set(e.turnId, { span, ctx: trace.setSpan(parent, span), tools: new Map(), phaseStarts: new Map() });
  }

  private phase(e: Ev<"phase.completed"> | Ev<"phase.background">, background: boolean): void {
    const handlers = e.type === "phase.completed" ? e.handlers : [e.handler];
    if (this.o.phases === "work" && handlers.length === 0) return;
    const durationMs = e.type === "phase.completed" ? e.durationMs : e.handler.durationMs;
    const t = e.turnId ? this.turns.get(e.turnId) : undefined;
    const parent = t?.ctx ?? (e.turnId ? this.recent.get(e.turnId) : undefined) ?? otelContext.active();
    const started = (!background ? t?.phaseStarts.get(e.phase) : undefined) ?? e.ts - durationMs;
    t?.phaseStarts.delete(e.phase);
    const plugins = [...new Set(handlers.map((h) => h.plugin))];
    const applied = e.contributions.filter((c) => c.status === "applied").length;
    const span = this.o.tracer.startSpan(
      `keel.phase ${e.phase}`,
      {
        kind: SpanKind.INTERNAL,
        startTime: started,
        attributes: {
          "keel.phase": e.phase,
          "keel.phase.background": background,
          "keel.phase.duration_ms": durationMs,
          "keel.plugins": plugins.map((p) => label(p, 200)),
          "keel.contributions.applied": applied,
          "keel.contributions.not_applied": e.contributions.length - applied,
        },
      },
      parent,
    );
    let failed: string | undefined;
    for (const h of handlers) {
      span.addEvent(
        "keel.handler",
        {
          "keel.plugin": label(h.plugin, 200),
          "keel.subscription": label(h.subscription, 200),
          "keel.handler.status": h.status,
          "keel.handler.duration_ms": h.durationMs,
          "keel.handler.contributions": h.contributions,
          ...(h.error ? { "keel.handler.error": short(h.error, 1000) } : {}),
        },
        e.ts,
      );
      if (h.status === "threw" || h.status === "timeout" || h.status === "invalid")
        failed ??= `${label(h.plugin)}: ${h.status}${h.error ? ` (${short(h.error, 200)})` : ""}`;
    }
    for (const c of e.contributions) {
      if (c.status === "applied") continue;
      span.addEvent(
        `keel.contribution.${c.status}`,
        {
          "keel.plugin": label(c.plugin, 200),
          "keel.contribution.kind": label(c.kind, 100),
          ...(c.id ? { "keel.contribution.id": label(c.id, 200) } : {}),
          ...(c.reason ? { "keel.contribution.reason": short(c.reason) } : {}),
        },
        e.ts,
      );
    }
    if (failed) span.setStatus({ code: SpanStatusCode.ERROR, message: failed });
    span.end(Math.max(started, e.ts));
  }

  private request(e: Ev<"prompt.compiled">): void {
    const t = e.turnId ? this.turns.get(e.turnId) : undefined;
    if (t) this.openRound(t, e.sessionId, e.manifest.round, e.ts, manifestAttributes(e.manifest));
  }

  /** The open `chat` span of this event's turn, or a new one (a retried attempt has no new manifest). */
  private roundSpan(e: KeelEvent & { round: number }, startTime: number): (Pending & { round: number }) | undefined {
    const t = e.turnId ? this.turns.get(e.turnId) : undefined;
    if (!t) return undefined;
    if (t.round && t.round.round === e.round && t.round.endTime === undefined) return t.round;
    return this.openRound(t, e.sessionId, e.round, startTime, {});
  }

  /** End the turn's previous `chat` span and start one for `round`. */
  private openRound(
    t: TurnState,
    sessionId: string,
    round: number,
    startTime: number,
    more: Attributes,
  ): Pending & { round: number } {
    this.endRound(t);
    const routed = more["keel.route.provider"];
    const requested = splitProviderId(typeof routed === "string" ? routed : this.o.providerId);
    const span = this.o.tracer.startSpan(
      `chat ${requested?.model ?? "model"}`,
      {
        kind: SpanKind.CLIENT,
        startTime,
        attributes: {
          "gen_ai.operation.name": "chat",
          ...(requested ? { "gen_ai.provider.name": requested.provider, "gen_ai.request.model": requested.model } : {}),
          "gen_ai.conversation.id": sessionId,
          "keel.round": round,
          ...more,
        },
      },
      t.ctx,
    );
    t.round = { span, round };
    return t.round;
  }

  private roundEvent(e: Ev<"model.notice">, name: string, attrs: Attributes): void {
    this.roundSpan(e, e.ts)?.span.addEvent(name, attrs, e.ts);
  }

  private responded(e: Ev<"model.responded">): void {
    const r = this.roundSpan(e, e.ts - e.durationMs);
    if (!r) return;
    const answered = splitProviderId(e.provider);
    r.span.setAttributes({
      ...(answered ? { "gen_ai.provider.name": answered.provider } : {}),
      "gen_ai.response.model": typeof e.model === "string" ? label(e.model, 200) : (answered?.model ?? ""),
      "gen_ai.response.finish_reasons": [e.stopReason],
      ...usageAttributes(e.usage),
      "keel.model.attempt": e.attempt,
      "keel.model.duration_ms": e.durationMs,
      ...(e.firstChunkMs !== undefined ? { "keel.model.first_chunk_ms": e.firstChunkMs } : {}),
      ...(e.provider ? { "keel.provider": label(e.provider, 200) } : {}),
    });
    if (e.firstChunkMs !== undefined)
      r.span.addEvent("keel.model.first_chunk", {}, e.ts - e.durationMs + e.firstChunkMs);
    r.endTime = e.ts;
    // Without content capture nothing more will be added: end now. Otherwise the answer's message follows.
    if (!this.o.captureContent) this.endRound(this.turns.get(e.turnId!)!);
  }

  private failed(e: Ev<"model.failed">): void {
    const r = this.roundSpan(e, e.ts);
    if (!r) return;
    r.span.setAttributes({
      "error.type": e.errorClass,
      ...(e.status !== undefined ? { "http.response.status_code": e.status } : {}),
    });
    r.span.setStatus({ code: SpanStatusCode.ERROR, message: short(e.message) });
    r.endTime = e.ts;
    this.endRound(this.turns.get(e.turnId!)!);
  }

  private toolStarted(e: Ev<"tool.started">): void {
    const t = e.turnId ? this.turns.get(e.turnId) : undefined;
    if (!t) return;
    if (t.round?.endTime !== undefined) this.endRound(t);
    const span = this.o.tracer.startSpan(
      `execute_tool ${e.name}`,
      {
        kind: SpanKind.INTERNAL,
        startTime: e.ts,
        attributes: {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": e.name,
          "gen_ai.tool.call.id": e.callId,
          "keel.round": e.round,
          ...(this.o.captureContent
            ? { "gen_ai.tool.call.arguments": content(e.args, this.o.maxContentChars, "data") }
            : {}),
        },
      },
      t.ctx,
    );
    t.tools.set(e.callId, { span, resultSeen: false });
  }

  private toolCompleted(e: Ev<"tool.completed">): void {
    const t = e.turnId ? this.turns.get(e.turnId) : undefined;
    const p = t?.tools.get(e.callId);
    if (!t || !p) return;
    p.span.setAttributes({
      "keel.tool.status": e.status,
      "keel.tool.duration_ms": e.durationMs,
      ...(e.decision ? { "keel.tool.decision": label(e.decision, 200) } : {}),
      ...(e.rewrittenBy ? { "keel.tool.rewritten_by": e.rewrittenBy.map((r) => label(r, 200)) } : {}),
    });
    if (e.status === "error" || e.status === "timeout")
      p.span.setStatus({ code: SpanStatusCode.ERROR, message: e.status });
    if (e.status !== "ok") p.span.setAttribute("error.type", e.status);
    p.endTime = e.ts;
    if (p.resultSeen) {
      p.span.end(p.endTime);
      t.tools.delete(e.callId);
    }
  }

  private appended(e: Ev<"message.appended">): void {
    const t = e.turnId ? this.turns.get(e.turnId) : undefined;
    if (!t) return;
    const m = e.message;
    if (m.role === "tool") {
      const p = t.tools.get(m.toolCallId);
      if (!p) return;
      const parts = Array.isArray(m.content) ? m.content : [];
      const chars = parts.reduce((n, b) => n + (b.type === "text" ? [...b.text].length : 0), 0);
      p.span.setAttributes({
        "keel.tool.result_chars": chars,
        "keel.tool.result_blocks": parts.length,
        ...(m.isError ? { "keel.tool.result_error": true } : {}),
      });
      if (this.o.captureContent)
        p.span.setAttribute(
          "gen_ai.tool.call.result",
          content(parts.map((b) => (b.type === "text" ? b.text : `[${b.type}]`)).join("\n"), this.o.maxContentChars),
        );
      p.resultSeen = true;
      if (p.endTime !== undefined) {
        p.span.end(p.endTime);
        t.tools.delete(m.toolCallId);
      }
    } else if (m.role === "assistant" && t.round && t.round.endTime !== undefined) {
      if (this.o.captureContent && Array.isArray(m.content))
        t.round.span.setAttribute(
          "gen_ai.output.messages",
          content(
            [
              {
                role: "assistant",
                parts: m.content.map((b) =>
                  b.type === "text"
                    ? { type: "text", content: b.text }
                    : b.type === "tool_call"
                      ? { type: "tool_call", id: b.id, name: b.name, arguments: b.args }
                      : { type: b.type },
                ),
              },
            ],
            this.o.maxContentChars,
          ),
        );
      this.endRound(t);
    }
  }

  private jobStarted(e: Ev<"job.started">): void {
    const parent =
      (e.turnId ? (this.turns.get(e.turnId)?.ctx ?? this.recent.get(e.turnId)) : undefined) ?? otelContext.active();
    this.jobs.get(e.idempotencyKey)?.end();
    const span = this.o.tracer.startSpan(
      `keel.job ${e.name}`,
      {
        kind: SpanKind.INTERNAL,
        startTime: e.ts,
        attributes: {
          "keel.plugin": label(e.plugin, 200),
          "keel.job.name": label(e.name, 200),
          "keel.job.key": label(e.idempotencyKey, 200),
          "keel.job.attempt": e.attempt,
          "keel.session.id": e.sessionId,
        },
      },
      parent,
    );
    this.jobs.set(e.idempotencyKey, span);
    if (this.jobs.size > 1_000) this.endJob(this.jobs.keys().next().value!, { code: SpanStatusCode.UNSET }, {});
  }

  private jobCompleted(e: Ev<"job.completed">): void {
    const failed = e.status === "failed" || e.status === "timeout";
    this.endJob(
      e.idempotencyKey,
      failed ? { code: SpanStatusCode.ERROR, message: short(e.error ?? e.status) } : { code: SpanStatusCode.UNSET },
      { "keel.job.status": e.status, "keel.job.duration_ms": e.durationMs },
      e.ts,
    );
  }

  private endJob(
    key: string,
    status: { code: SpanStatusCode; message?: string },
    attrs: Attributes,
    at?: number,
  ): void {
    const span = this.jobs.get(key);
    if (!span) return;
    span.setAttributes(attrs);
    if (status.code !== SpanStatusCode.UNSET) span.setStatus(status);
    span.end(at);
    this.jobs.delete(key);
  }

  private turnEvent(e: KeelEvent, name: string, attrs: Attributes): void {
    const t = e.turnId ? this.turns.get(e.turnId) : undefined;
    t?.span.addEvent(name, attrs, e.ts);
  }

  private endTurn(e: Ev<"turn.completed"> | Ev<"turn.failed"> | Ev<"turn.interrupted"> | Ev<"turn.paused">): void {
    const t = e.turnId ? this.turns.get(e.turnId) : undefined;
    if (!t) return;
    const v = e.verdict;
    const attrs: Attributes = {
      "keel.turn.status": v.status,
      "keel.turn.reason": v.reason,
      "keel.turn.rounds": e.rounds,
      "keel.turn.tool_calls": e.toolCalls,
      ...usageAttributes(e.usage),
    };
    if (e.timings) {
      for (const [plugin, p] of Object.entries(e.timings.plugins)) attrs[`keel.plugin_ms.${label(plugin, 100)}`] = p.ms;
      for (const [phase, p] of Object.entries(e.timings.phases)) attrs[`keel.phase_ms.${phase}`] = p.ms;
    }
    if (v.status === "failed") {
      attrs["error.type"] = v.code;
      if (v.plugin) attrs["keel.plugin"] = label(v.plugin, 200);
      if (v.phase) attrs["keel.phase"] = v.phase;
      t.span.setStatus({ code: SpanStatusCode.ERROR, message: short(v.message) });
    }
    t.span.setAttributes(attrs);
    this.closeChildren(t, e.ts);
    t.span.end(e.ts);
    this.turns.delete(e.turnId!);
    this.recent.set(e.turnId!, t.ctx);
    if (this.recent.size > RECENT_TURNS) this.recent.delete(this.recent.keys().next().value!);
  }

  private endRound(t: TurnState): void {
    if (!t.round) return;
    t.round.span.end(t.round.endTime);
    t.round = undefined;
  }

  private closeChildren(t: TurnState, at?: number): void {
    this.endRound(t);
    for (const p of t.tools.values()) p.span.end(p.endTime ?? at);
    t.tools.clear();
  }

  private endOpen(t: TurnState): void {
    this.closeChildren(t);
    t.span.end();
  }
}
