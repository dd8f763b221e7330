/**
 * Phase dispatch. Each phase of the table gets one series of taps, the phase's subscriptions in
 * resolved order (a small series runner: tapable compiles its hooks with `new Function`, which
 * workerd forbids); one tracer is told at the start of every phase, for all
 * of them. A handler call runs under its await and failure policies and is reduced to an
 * Outcome; the kernel only ever sees validated contributions.
 */
import { trackAbandoned } from "./abandoned.ts";
import type { Contribution } from "./contributions.ts";
import { describeInvalid, validateContribution } from "./contributions.ts";
import type { ErrorCode, ErrorLocation } from "./errors.ts";
import { errorMessage, isKeelError, KeelError, plainThrown, preview } from "./errors.ts";
import type { ContributionRecord, HandlerSummary } from "./events.ts";
import type { PhaseName } from "./phases.ts";
import { PHASES } from "./phases.ts";
import type { HookContext } from "./plugin.ts";
import type { ModelProvider } from "./provider.ts";
import type { PluginRegistry, Subscription } from "./registry.ts";
import { freezeEvent } from "./snapshot.ts";
import type { FaultScope } from "./fault-scope.ts";
import { faultScopesActive, inFaultScope } from "./fault-scope.ts";

/** A diagnostic produced while running a phase. */
export interface PhaseDiagnostic {
  level: "info" | "warn" | "error";
  code: string;
  message: string;
  plugin: string;
  phase: PhaseName;
  data?: unknown;
}

/** A contribution with the plugin that made it. */
export interface Contributed<C extends Contribution = Contribution> {
  plugin: string;
  value: C;
}

/**
 * The result of one phase run.
 * Contract: `contributions` are valid, accepted by the phase, in subscription order;
 * `failed` is set when a required or fail-closed subscription failed.
 */
export interface PhaseResult {
  phase: PhaseName;
  durationMs: number;
  handlers: HandlerSummary[];
  contributions: Contributed[];
  records: ContributionRecord[];
  diagnostics: PhaseDiagnostic[];
  failed?: KeelError;
}

/** Called after each waterfall handler with its accepted contributions; returns the event for the next handler. */
export type WaterfallStep = (event: any, added: Contributed[]) => any;

/** Receives what the runner observes. Contract: called synchronously, must not throw. */
export interface PhaseTracer {
  phaseStarted(phase: PhaseName, owner: unknown): void;
  /** A background handler settled after its phase closed. */
  backgroundSettled(
    phase: PhaseName,
    summary: HandlerSummary,
    contributions: Contributed[],
    records: ContributionRecord[],
    diagnostics: PhaseDiagnostic[],
    owner: unknown,
  ): void;
}

interface Outcome {
  sub: Subscription;
  status: HandlerSummary["status"];
  durationMs: number;
  valid: Contribution[];
  invalid: Array<{ kind: string | undefined; reason: string }>;
  error?: unknown;
}

const LATE_KINDS = new Set(["diagnostic", "background_job"]);

/** How one phase run is made. */
export interface RunPhaseOptions {
  /** Aborts the handlers of this run (the turn's signal). */
  signal: AbortSignal;
  /** Waterfall phases: applies each handler's contributions before the next handler. */
  step?: WaterfallStep;
  /** Passed back to the tracer (the session and turn the run belongs to). */
  owner?: unknown;
  /** Aborts background handlers (they outlive the run); default: never. */
  backgroundSignal?: AbortSignal;
  /** Caps every handler's own `timeoutMs` (a phase with no turn, and so no wall-time limit, over it). */
  maxHandlerMs?: number;
}

class Run {
  /** The last clock reading: a handler run back-to-back after another starts when it ended. */
  mark = 0;
  /** True while `mark` is still now: read as the phase started, or as a synchronous handler that returned nothing ended. */
  markIsNow = false;
  readonly slots: Array<Outcome | Promise<Outcome> | undefined> = [];
  async = false;
  crashed: unknown;
  waterfallStop: KeelError | undefined;
  readonly phase: PhaseName;
  event: any;
  readonly options: RunPhaseOptions;
  readonly result: PhaseResult;
  constructor(phase: PhaseName, event: any, options: RunPhaseOptions, result: PhaseResult) {
    this.phase = phase;
    this.event = event;
    this.options = options;
    this.result = result;
  }
}

let never: AbortSignal | undefined;
/** A signal that never aborts, made on first use (a Worker may not create one while its modules load). */
function neverSignal(): AbortSignal {
  return (never ??= new AbortController().signal);
}
const NONE: never[] = Object.freeze([]) as unknown as never[];

class HookCtx implements HookContext {
  private ctrl: AbortController | undefined;
  private reason: unknown;
  private settled = false;
  readonly plugin: string;
  readonly phase: PhaseName;
  readonly subscription: string;
  private readonly parent: AbortSignal;
  private onParent: (() => void) | undefined;
  readonly model: ModelProvider | undefined;
  constructor(
    plugin: string,
    phase: PhaseName,
    subscription: string,
    parent: AbortSignal,
    model: ModelProvider | undefined,
  ) {
    this.model = model;
    this.plugin = plugin;
    this.phase = phase;
    this.subscription = subscription;
    this.parent = parent;
  }
  get signal(): AbortSignal {
    if (!this.ctrl) {
      this.ctrl = new AbortController();
      if (this.reason !== undefined) this.ctrl.abort(this.reason);
      else if (this.parent.aborted) this.ctrl.abort(this.parent.reason);
      else if (!this.settled) {
        this.onParent = () => this.abort(this.parent.reason);
        this.parent.addEventListener("abort", this.onParent, { once: true });
      }
    }
    return this.ctrl.signal;
  }
  /** Abort the handler's signal, unless the handler has already settled. */
  abort(reason: unknown): void {
    if (this.settled) return;
    this.reason = reason;
    try {
      this.ctrl?.abort(reason);
    } catch {
      // A plugin's abort listener threw; that is the plugin's fault and must not escape.
    }
  }
  /** The handler settled: stop listening to the turn, never abort this context again. */
  dispose(): void {
    this.settled = true;
    if (this.onParent) this.parent.removeEventListener("abort", this.onParent);
  }
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (
    v !== null &&
    (typeof v === "object" || typeof v === "function") &&
    typeof (v as { then?: unknown }).then === "function"
  );
}

/** One subscription's step in a phase's series: it finishes when it returns (`sync`) or calls back (`async`). */
interface Tap {
  sync?: (run: Run) => void;
  async?: (run: Run, cb: () => void) => void;
}

/**
 * Run the taps in order, each after the one before has finished; `done` once, with the first
 * throw (the rest are skipped) or nothing. A tap that calls back at once continues in this
 * same call stack, so a phase whose handlers all answer synchronously never waits on a promise.
 */
function callSeries(taps: readonly Tap[], run: Run, done: (err?: unknown) => void): void {
  let i = 0;
  const next = (): void => {
    while (i < taps.length) {
      const tap = taps[i++]!;
      try {
        if (tap.sync) {
          tap.sync(run);
          continue;
        }
        let inline = true;
        let again = false;
        tap.async!(run, () => (inline ? (again = true) : next()));
        inline = false;
        if (!again) return;
      } catch (err) {
        done(err);
        return;
      }
    }
    done();
  };
  next();
}

/**
 * Runs phases for one frozen registry.
 * Contract: `run` never throws or rejects for a plugin's fault (a throw, a hang, a thenable
 * that misbehaves, a contribution whose getters throw); it reports it in the PhaseResult.
 */
export class PhaseRunner {
  private readonly hooks = new Map<PhaseName, readonly Tap[]>();
  readonly background = new Set<Promise<unknown>>();
  readonly registry: PluginRegistry;
  private readonly tracer: PhaseTracer;

  /** The model handlers may use for side calls (HookContext.model). */
  readonly model: ModelProvider | undefined;
  constructor(registry: PluginRegistry, tracer: PhaseTracer, model?: ModelProvider) {
    this.model = model;
    this.registry = registry;
    this.tracer = tracer;
    for (const [phase, subs] of registry.phases) {
      const waterfall = PHASES[phase].kind === "waterfall";
      const taps: Tap[] = subs.map((sub) =>
        sub.await === "background"
          ? { sync: (run: Run) => this.launchBackground(run, sub) }
          : waterfall
            ? { async: (run: Run, cb: () => void) => this.step(run, sub, cb) }
            : { sync: (run: Run) => this.launch(run, sub) },
      );
      if (taps.length) this.hooks.set(phase, taps);
    }
  }

  private readonly scopes = new Map<Subscription, FaultScope>();
  /** Who runs: carried across the handler's timers and promises (faults.ts). */
  private scopeOf(sub: Subscription): FaultScope {
    let s = this.scopes.get(sub);
    if (!s) this.scopes.set(sub, (s = Object.freeze({ plugin: sub.plugin, phase: sub.phase })));
    return s;
  }

  /** True when any plugin subscribes to `phase`. */
  has(phase: PhaseName): boolean {
    return this.hooks.has(phase);
  }

  /** The subscriptions of `phase` in run order. */
  subscriptions(phase: PhaseName): readonly Subscription[] {
    return this.registry.phases.get(phase) ?? [];
  }

  /**
   * Run every subscription of `phase` on `event`.
   * Contract: when every handler answers synchronously the result is returned directly (no
   * promise, no microtask); otherwise a promise of it, which never rejects.
   */
  run(phase: PhaseName, event: object, options: RunPhaseOptions): PhaseResult | Promise<PhaseResult> {
    const result: PhaseResult = { phase, durationMs: 0, handlers: [], contributions: [], records: [], diagnostics: [] };
    const hook = this.hooks.get(phase);
    if (!hook) return result;
    const t0 = performance.now();
    // Every event a handler sees is deep-frozen, here and only here (one place for all phases).
    const run = new Run(phase, freezeEvent(event), options, result);
    run.mark = t0;
    run.markIsNow = true;
    let called = false;
    let resume: (() => void) | undefined;
    this.tracer.phaseStarted(phase, options.owner);
    callSeries(hook, run, (err) => {
      if (err) run.crashed = err;
      called = true;
      resume?.();
    });
    if (called && !run.async) return this.finish(run, t0, run.slots as Array<Outcome | undefined>);
    const done = called ? undefined : new Promise<void>((r) => (resume = r));
    return (async () => {
      await done;
      return this.finish(run, t0, await Promise.all(run.slots));
    })();
  }

  /** Settle collect-phase outcomes in subscription order. */
  private finish(run: Run, t0: number, outcomes: Array<Outcome | undefined>): PhaseResult {
    const result = run.result;
    if (!run.options.step) for (const o of outcomes) if (o) this.settle(run, o);
    if (run.crashed !== undefined) {
      // Unreachable unless the dispatcher itself has a bug: record it rather than lose it.
      result.diagnostics.push({
        level: "error",
        code: "KEEL_HANDLER_THREW",
        message: `Dispatch of ${run.phase} failed: ${preview(errorMessage(run.crashed))}`,
        plugin: "(kernel)",
        phase: run.phase,
      });
    }
    if (run.waterfallStop && !result.failed) result.failed = run.waterfallStop;
    result.durationMs = performance.now() - t0;
    return result;
  }

  private launch(run: Run, sub: Subscription): void {
    const waits = sub.waitFor.length ? sub.waitFor.map((p) => run.slots[p]).filter(isThenable) : [];
    const slot = waits.length
      ? Promise.all(waits).then(() => this.invoke(run, sub, run.options.signal, true))
      : this.invoke(run, sub);
    if (isThenable(slot)) run.async = true;
    run.slots[sub.position] = slot;
  }

  private step(run: Run, sub: Subscription, cb: () => void): void {
    if (run.waterfallStop) return cb();
    // Starts when the handler before it ended, as in a collect phase, unless time may have passed since (an async handler, contributions checked and applied).
    const out = this.invoke(run, sub, run.options.signal, !run.markIsNow);
    if (!isThenable(out)) {
      this.settleStep(run, out);
      return cb();
    }
    void out.then((o) => {
      this.settleStep(run, o);
      cb();
    });
  }

  private settleStep(run: Run, out: Outcome): void {
    const before = run.result.contributions.length;
    this.settle(run, out);
    if (run.result.failed) {
      run.waterfallStop = run.result.failed;
      return;
    }
    if (out.sub.stage === "final") withoutRewrites(run, before, out.sub);
    const added = run.result.contributions.slice(before);
    if (!added.length || !run.options.step) return;
    try {
      run.event = freezeEvent(run.options.step(run.event, added));
    } catch (err) {
      const { sub } = out;
      run.result.diagnostics.push({
        level: "warn",
        code: "KEEL_CONTRIBUTION_INVALID",
        message: new KeelError(
          "KEEL_CONTRIBUTION_INVALID",
          `The contributions could not be applied: ${preview(errorMessage(err))}.`,
          { plugin: sub.plugin, phase: sub.phase },
        ).message,
        plugin: sub.plugin,
        phase: sub.phase,
      });
    }
  }

  private launchBackground(run: Run, sub: Subscription): void {
    const out = this.invoke(run, sub, run.options.backgroundSignal ?? neverSignal(), true);
    run.result.handlers.push({
      plugin: sub.plugin,
      subscription: sub.id,
      status: "queued",
      durationMs: 0,
      contributions: 0,
    });
    const p = Promise.resolve(out).then((o) => {
      const r: PhaseResult = {
        phase: run.phase,
        durationMs: 0,
        handlers: [],
        contributions: [],
        records: [],
        diagnostics: [],
      };
      o.invalid = [
        ...o.invalid,
        ...o.valid.filter((c) => !LATE_KINDS.has(c.kind)).map((c) => ({ kind: c.kind, reason: "late" })),
      ];
      o.valid = o.valid.filter((c) => LATE_KINDS.has(c.kind));
      this.settle(new Run(run.phase, undefined, run.options, r), o);
      try {
        this.tracer.backgroundSettled(
          run.phase,
          r.handlers[0]!,
          r.contributions,
          r.records,
          r.diagnostics,
          run.options.owner,
        );
      } catch {
        // The tracer records into a store that may be closed by now; nothing else to tell.
      }
    });
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }

  /**
   * Call one handler under its deadline.
   * Contract: never throws; a returned promise never rejects.
   */
  private invoke(
    run: Run,
    sub: Subscription,
    signal: AbortSignal = run.options.signal,
    freshClock = false,
  ): Outcome | Promise<Outcome> {
    // Handlers launched back-to-back share clock readings (one per handler, not two).
    const t0 = freshClock ? performance.now() : run.mark;
    run.markIsNow = false;
    const ctx = new HookCtx(sub.plugin, sub.phase, sub.id, signal, this.model);
    let raw: unknown;
    let thenable: boolean;
    try {
      raw = faultScopesActive()
        ? inFaultScope(
            () => this.scopeOf(sub),
            () => sub.handler(run.event, ctx),
          )
        : sub.handler(run.event, ctx);
      thenable = isThenable(raw);
    } catch (error) {
      ctx.dispose();
      return failedOutcome(sub, t0, "threw", error);
    }
    if (!thenable) {
      ctx.dispose();
      const out = this.validate(sub, raw, t0);
      run.mark = t0 + out.durationMs;
      run.markIsNow = raw === undefined || raw === null;
      return out;
    }
    run.mark = performance.now();
    return new Promise<Outcome>((resolve) => {
      let settled = false;
      const finish = (o: Outcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        ctx.dispose();
        resolve(o);
      };
      const onAbort = () => {
        ctx.abort(signal.reason);
        if (!settled) trackAbandoned(`handler ${sub.id}`, raw);
        finish(failedOutcome(sub, t0, "aborted", signal.reason));
      };
      const deadlineMs = Math.min(sub.timeoutMs, run.options.maxHandlerMs ?? Number.POSITIVE_INFINITY);
      const timer = setTimeout(() => {
        const err = new KeelError(
          "KEEL_HANDLER_TIMEOUT",
          `The handler ran past its ${deadlineMs} ms deadline${deadlineMs < sub.timeoutMs ? ` (its timeoutMs of ${sub.timeoutMs} is capped by the limit ${deadlineMs} ms: limits.wallTimeMs)` : ""}.`,
          { plugin: sub.plugin, phase: sub.phase, subscription: sub.id },
        );
        ctx.abort(err);
        if (!settled) trackAbandoned(`handler ${sub.id}`, raw);
        finish(failedOutcome(sub, t0, "timeout", err));
      }, deadlineMs);
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      try {
        (raw as PromiseLike<unknown>).then(
          (v) => finish(this.validate(sub, v, t0)),
          (error) => finish(failedOutcome(sub, t0, "threw", error)),
        );
      } catch (error) {
        finish(failedOutcome(sub, t0, "threw", error));
      }
    });
  }

  /** Validate what a handler returned. Contract: never throws (a throwing getter is an invalid contribution). */
  private validate(sub: Subscription, raw: unknown, t0: number): Outcome {
    // Most handlers return nothing: their outcome shares two frozen empty lists.
    if (raw === undefined || raw === null)
      return { sub, status: "ok", durationMs: performance.now() - t0, valid: NONE, invalid: NONE };
    const out: Outcome = { sub, status: "ok", durationMs: performance.now() - t0, valid: [], invalid: [] };
    const accepts = PHASES[sub.phase].accepts as readonly string[];
    let items: unknown[];
    try {
      items = Array.isArray(raw) ? Array.from({ length: Math.min(raw.length, 10_000) }, (_, i) => raw[i]) : [raw];
    } catch (err) {
      out.invalid.push({
        kind: undefined,
        reason: `unreadable: (root): reading it threw ${preview(errorMessage(err))}`,
      });
      out.status = "invalid";
      return out;
    }
    for (const item of items) {
      if (item === undefined || item === null || item === false) continue;
      const v = validateContribution(item);
      if (!v.ok) out.invalid.push({ kind: v.kind, reason: describeInvalid(v) });
      else if (!accepts.includes(v.value.kind))
        out.invalid.push({
          kind: v.value.kind,
          reason: `not accepted by ${sub.phase} (accepts ${accepts.join(", ")})`,
        });
      else out.valid.push(v.value);
    }
    if (out.invalid.length) out.status = "invalid";
    return out;
  }

  /** Apply the failure policy to an outcome and record everything. */
  private settle(run: Run, o: Outcome): void {
    const { sub } = o;
    const r = run.result;
    if (o.status === "ok" && !o.valid.length && !o.invalid.length) {
      // Most handlers: nothing returned, nothing to record but the summary.
      r.handlers.push({
        plugin: sub.plugin,
        subscription: sub.id,
        status: o.status,
        durationMs: round(o.durationMs),
        contributions: 0,
      });
      return;
    }
    const loc =
      o.invalid.length || o.status !== "ok"
        ? { plugin: sub.plugin, phase: sub.phase, subscription: sub.id }
        : undefined;
    recordRejected(r, sub, o.invalid, loc);
    const failed =
      o.status === "threw" ||
      o.status === "timeout" ||
      (o.status === "invalid" && !o.invalid.every((b) => b.reason === "late"));
    const summary: HandlerSummary = {
      plugin: sub.plugin,
      subscription: sub.id,
      status: o.status,
      durationMs: round(o.durationMs),
      contributions: o.valid.length,
    };
    if (o.error !== undefined) summary.error = preview(errorMessage(o.error));
    r.handlers.push(summary);
    let accepted = o.valid;
    if (failed && o.status !== "invalid") recordFailure(r, o, loc);
    if (failed) {
      if (sub.failure === "fallback") {
        accepted = [...sub.fallback];
        for (const c of accepted)
          r.records.push({
            plugin: sub.plugin,
            kind: c.kind,
            ...idOf(c),
            status: "fallback",
            reason: `handler ${o.status}`,
          });
        for (const c of accepted) r.contributions.push({ plugin: sub.plugin, value: c });
        return;
      }
      if (sub.failure === "required" || sub.failure === "fail_closed") {
        r.failed ??= new KeelError(
          "KEEL_PHASE_FAILED",
          `Subscription "${sub.id}" (failure: ${sub.failure}) ${o.status === "invalid" ? "returned an invalid contribution" : o.status === "timeout" ? "timed out" : `threw: ${preview(errorMessage(o.error))}`}.`,
          loc,
          { cause: o.error, details: { failure: sub.failure } },
        );
        return;
      }
    }
    for (const c of accepted) {
      r.contributions.push({ plugin: sub.plugin, value: c });
      if (c.kind === "diagnostic")
        r.diagnostics.push({
          level: c.level,
          code: c.code,
          message: preview(c.message),
          plugin: sub.plugin,
          phase: sub.phase,
          data: c.data,
        });
    }
  }
}

/** The diagnostic of a handler that threw or timed out (a warning where its policy goes on). */
function recordFailure(r: PhaseResult, o: Outcome, loc: ErrorLocation | undefined): void {
  const { sub } = o;
  const code: ErrorCode = o.status === "timeout" ? "KEEL_HANDLER_TIMEOUT" : "KEEL_HANDLER_THREW";
  const message = isKeelError(o.error)
    ? o.error.message
    : new KeelError(code, preview(errorMessage(o.error)), loc).message;
  r.diagnostics.push({
    level: sub.failure === "best_effort" || sub.failure === "fallback" ? "warn" : "error",
    code,
    message,
    plugin: sub.plugin,
    phase: sub.phase,
  });
}

/** Record each rejected contribution of one handler, with its diagnostic. */
function recordRejected(
  r: PhaseResult,
  sub: Subscription,
  invalid: Outcome["invalid"],
  loc: ErrorLocation | undefined,
): void {
  for (const bad of invalid) {
    const late = bad.reason === "late";
    r.records.push({
      plugin: sub.plugin,
      kind: bad.kind ?? "unknown",
      status: "rejected",
      reason: late ? "arrived after the phase closed" : bad.reason,
    });
    const code: ErrorCode = late
      ? "KEEL_CONTRIBUTION_LATE"
      : bad.reason.startsWith("not accepted")
        ? "KEEL_CONTRIBUTION_NOT_ACCEPTED"
        : bad.reason.startsWith("unreadable")
          ? "KEEL_OUTPUT_UNREADABLE"
          : "KEEL_CONTRIBUTION_INVALID";
    r.diagnostics.push({
      level: "warn",
      code,
      message: new KeelError(
        code,
        `Rejected a "${bad.kind ?? "unknown"}" contribution: ${late ? "it arrived after the phase closed" : bad.reason}.`,
        loc,
      ).message,
      plugin: sub.plugin,
      phase: sub.phase,
    });
  }
}

function failedOutcome(
  sub: Subscription,
  t0: number,
  status: "threw" | "timeout" | "aborted",
  error: unknown,
): Outcome {
  return { sub, status, durationMs: performance.now() - t0, valid: [], invalid: [], error: plainThrown(error) };
}

function idOf(c: Contribution): { id?: string } {
  const id = "id" in c ? c.id : "bundleId" in c ? c.bundleId : undefined;
  return id === undefined ? {} : { id };
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/**
 * A final handler's contributions without what would rewrite the waterfall (tool arguments,
 * message edits): its decision stands, the rewrite is dropped and said (KEEL_FINAL_REWRITE).
 */
function withoutRewrites(run: Run, from: number, sub: Subscription): void {
  const list = run.result.contributions;
  let dropped = 0;
  for (let i = list.length - 1; i >= from; i--) {
    const c = list[i]!;
    if (c.value.kind === "message_edit") {
      list.splice(i, 1);
      dropped++;
    } else if (c.value.kind === "tool_decision" && c.value.args !== undefined) {
      const { args: _args, ...rest } = c.value;
      list[i] = { ...c, value: rest };
      dropped++;
    }
  }
  if (!dropped) return;
  run.result.diagnostics.push({
    level: "warn",
    code: "KEEL_FINAL_REWRITE",
    message: new KeelError(
      "KEEL_FINAL_REWRITE",
      `${sub.id} runs at stage final, so its ${dropped} rewrite${dropped === 1 ? " was" : "s were"} not applied.`,
      { plugin: sub.plugin, phase: sub.phase },
    ).message,
    plugin: sub.plugin,
    phase: sub.phase,
  });
}
