/**
 * Child sessions (ToolContext.child): the one primitive delegation needs. A tool runs a turn
 * of a new durable session of a child agent that shares the parent's store, linked both ways
 * in the logs, within what the parent turn has left; its usage counts as the parent turn's. What a
 * child may spend is held out of the parent turn's budget while it runs (route.ts's ledger).
 * What to delegate, to whom and how deep is a plugin's business (@keel/plugin-tasks).
 */
import type { HostAgent as Agent, HostSession as Session } from "./host-types.ts";
import type { Limits } from "@keel/kernel";
import { emptyUsage, errorMessage, KeelError } from "@keel/kernel";
import { headOf } from "@keel/text";
import type { AgentOptions } from "./agent-options.ts";
import { budgetView, heldBy, reserve } from "./route.ts";
import type { ChildOptions, ChildRun, TurnBudget } from "@keel/kernel";
import type { Usage } from "@keel/kernel";
import type { PendingApproval, TurnResult } from "@keel/kernel";
import type { ChildHold, ChildResumes } from "@keel/kernel";
import type { RunOptions } from "@keel/kernel";
import { isTerminalEvent } from "@keel/kernel";
import { messageText } from "@keel/kernel";
export type { ChildHold, ChildResumes } from "@keel/kernel";

const NAME = /^[a-z0-9_.-]{1,64}$/;

/** The pending id of a child's call: `<call>/<child call>`, and `<call>~<n>/<child call>` for the call's n-th child (n > 1). */
export function childApprovalId(callId: string, ordinal: number, childCallId: string): string {
  return `${callId}${ordinal > 1 ? `~${ordinal}` : ""}/${childCallId}`;
}

/**
 * Run one child turn for the tool call `callId` of `parent`'s turn `turnId`, cancelled with
 * `signal` (the call's). A child that pauses for approval is put in `hold` (the parent's call
 * then pauses on it); when the call runs again, its n-th child() resumes the child its n-th
 * child() started, with the host's answers, instead of starting a session.
 */
export async function runChild<O>(
  parent: Session,
  turnId: string,
  callId: string,
  signal: AbortSignal,
  options: ChildOptions<O>,
  budget: TurnBudget,
  addToParent: (usage: Usage) => void,
  hold: ChildHold,
): Promise<ChildRun<O>> {
  const ordinal = (hold.count = (hold.count ?? 0) + 1);
  const name = options?.name;
  if (typeof name !== "string" || !NAME.test(name))
    throw new KeelError(
      "KEEL_CHILD_INVALID",
      `name ${JSON.stringify(typeof name === "string" ? headOf(name, 70) : typeof name)} must match ${NAME.source}.`,
      { path: "name" },
    );
  // What this child may spend is held out of the parent turn's budget at once (before any await),
  // so siblings started in the same round, and the parent's next request, cannot spend it too.
  const limits = clamp(options.limits, budget, parent, shares(hold));
  const held = reserve(parent, limits.maxCostUsd ?? 0, limits.tokenBudget);
  let added = false;
  let opened: { session: Session; spend: Usage; counted: Usage | undefined } | undefined;
  try {
    const host = parent.agent;
    const agent = await childAgent(host, name, options.agent);
    signal.throwIfAborted();
    const capped = cappedBy(agent.limits, limits);
    held.shrink(capped.maxCostUsd ?? 0, capped.tokenBudget!);
    const out = await childTurn(parent, turnId, callId, signal, options, hold, ordinal, agent, capped, (o) => {
      opened = o;
    });
    // What the child spent replaces what it held (a resumed child's turn counted its part before the pause already).
    addToParent(minus(out.result.usage, opened?.counted));
    added = true;
    return out;
  } finally {
    // A child that threw still spent what its session's log says it spent.
    if (!added && opened) addToParent(minus(opened.session.spend, opened.spend));
    held.release();
  }
}

/** `a` less `b` (what a resumed turn spent since it paused). */
function minus(a: Usage, b: Usage | undefined): Usage {
  if (!b) return a;
  const cost = a.costUsd !== undefined ? a.costUsd - (b.costUsd ?? 0) : undefined;
  return {
    inputTokens: Math.max(0, a.inputTokens - b.inputTokens),
    outputTokens: Math.max(0, a.outputTokens - b.outputTokens),
    cacheReadTokens: Math.max(0, a.cacheReadTokens - b.cacheReadTokens),
    cacheWriteTokens: Math.max(0, a.cacheWriteTokens - b.cacheWriteTokens),
    ...(cost !== undefined ? { costUsd: Math.max(0, cost) } : {}),
  };
}

/** A resumed turn's limits count what it spent before its pause, so it gets `limits` on top of that. */
function onTop(limits: Partial<Limits>, counted: Usage | undefined): Partial<Limits> {
  if (!counted) return limits;
  return {
    ...limits,
    ...(limits.tokenBudget !== undefined
      ? { tokenBudget: limits.tokenBudget + counted.inputTokens + counted.outputTokens }
      : {}),
    ...(limits.maxCostUsd !== undefined ? { maxCostUsd: limits.maxCostUsd + (counted.costUsd ?? 0) } : {}),
  };
}

async function childTurn<O>(
  parent: Session,
  turnId: string,
  callId: string,
  signal: AbortSignal,
  options: ChildOptions<O>,
  hold: ChildHold,
  ordinal: number,
  agent: Agent,
  capped: Partial<Limits>,
  opened: (o: { session: Session; spend: Usage; counted: Usage | undefined }) => void,
): Promise<ChildRun<O>> {
  const name = options.name;
  const host = parent.agent;
  const run = {
    signal,
    ...(options.output ? { output: options.output } : {}),
    metadata: { ...options.metadata, parent: { sessionId: parent.id, turnId, callId } },
  };
  const waiting = hold.resume?.get(ordinal);
  if (waiting) hold.resume!.delete(ordinal);
  if (waiting && waiting.name !== name) {
    await abandonChild(parent, waiting.sessionId);
    throw new KeelError(
      "KEEL_CHILD_INVALID",
      `This call's child ${ordinal} was "${waiting.name}" (session ${waiting.sessionId}, waiting for approval) and is now "${name}": the waiting one was ended. The tool must start the same children in the same order when it runs again.`,
      { path: "name" },
    );
  }
  let session: Session;
  if (waiting) session = await agent.session(waiting.sessionId);
  else if (options.session !== undefined) session = await earlier(agent, parent, name, options.session);
  else
    session = await agent.session(undefined, {
      parent: { sessionId: parent.id, turnId, callId, name, depth: host.depth + 1 },
    });
  // A paused child's turn resumes with what it spent before the pause (already the parent's).
  const counted = waiting && !waiting.recover ? session.paused?.usage : undefined;
  opened({ session, spend: { ...session.spend }, counted });
  try {
    let result: TurnResult<O>;
    if (waiting?.recover) {
      result = await goOn(session, options.input, run, capped);
    } else if (waiting) {
      result = await answerAndResume(session, waiting, run, onTop(capped, counted));
    } else {
      // The link is in the parent's log before the child does anything, so a crash leaves it findable.
      await parent.emit({ type: "child.started", callId, name, childSessionId: session.id }, turnId, true);
      result = await session.runAsChild(options.input, run, capped);
    }
    if (result.verdict.status === "paused" && result.pending) {
      // Nobody will answer a child whose parent call is over (cancelled, timed out): its turn ends instead.
      if (hold.closed || signal.aborted) await session.abandonPaused("aborted");
      else {
        const link = (p: PendingApproval) => ({
          callId,
          sessionId: session.id,
          child: name,
          childCallId: p.callId,
          ordinal,
        });
        hold.paused = [
          ...(hold.paused ?? []),
          ...result.pending.map((p) => ({ ...p, callId: childApprovalId(callId, ordinal, p.callId), via: link(p) })),
        ];
      }
    }
    return { sessionId: session.id, result };
  } finally {
    await session.close().catch(() => {});
  }
}

/** The host's answers to a waiting child's calls go to the child's log, then its turn goes on. */
async function answerAndResume<O>(
  session: Session,
  waiting: ChildResumes extends Map<number, infer W> ? W : never,
  run: RunOptions<O>,
  limits: Partial<Limits>,
): Promise<TurnResult<O>> {
  if (!session.paused)
    throw new KeelError(
      "KEEL_CHILD_INVALID",
      `Child session ${session.id} no longer waits for approval (it was resumed on its own); its answer is in that session: ask it again with session ${session.id}.`,
      { path: "session" },
    );
  // The host answered the child's calls in the parent session: they go to the child's log, then it goes on.
  for (const r of session.pendingApprovals()) {
    const a = waiting.answers.get(r.callId);
    if (a?.approved)
      await session.approve(r.callId, {
        ...(a.always ? { always: true } : {}),
        ...(a.reason ? { reason: a.reason } : {}),
        ...(a.answerer ? { answerer: a.answerer } : {}),
      });
    else
      await session.deny(r.callId, {
        reason: a ? (a.reason ?? "not approved") : "no answer came through the parent session",
        ...(a?.answerer ? { answerer: a.answerer } : {}),
      });
  }
  return session.resumeAsChild(run, limits);
}

/**
 * A child whose parent's call a stopped process cut goes on where it stopped: its unfinished turn
 * is recovered, a turn that ended gives its stored result (nothing runs again), a paused one
 * pauses the call again, and a child that never began its turn begins it now.
 */
async function goOn<O>(
  session: Session,
  input: ChildOptions["input"],
  run: RunOptions<O>,
  limits: Partial<Limits>,
): Promise<TurnResult<O>> {
  if (session.unfinished) return session.recoverAsChild(run, limits);
  const ended = await lastResult(session);
  if (ended) return ended as TurnResult<O>;
  return session.runAsChild(input, run, limits);
}

/** The result of the session's last turn as its log holds it (a paused one with what it waits for), or undefined when none ended. */
async function lastResult(session: Session): Promise<TurnResult | undefined> {
  const events = await session.events();
  const end = events.findLast((e) => isTerminalEvent(e));
  if (!end || !("verdict" in end) || !end.turnId) return undefined;
  let text = "";
  for (const e of events)
    if (e.turnId === end.turnId && e.type === "message.appended" && e.message.role === "assistant")
      text = messageText(e.message) || text;
  return {
    sessionId: session.id,
    turnId: end.turnId,
    verdict: end.verdict,
    text,
    usage: end.usage,
    rounds: end.rounds,
    toolCalls: end.toolCalls,
    ...(end.type === "turn.paused" ? { pending: session.pendingApprovals() } : {}),
  };
}

/** End the paused turn of child session `id` (and its own waiting children): no parent waits for it any more. */
export async function abandonChild(parent: Session, id: string): Promise<void> {
  try {
    const s = await parent.agent.session(id);
    try {
      await s.abandonPaused("aborted");
      await s.abandonUnfinished();
    } finally {
      await s.close();
    }
  } catch (err) {
    await Promise.resolve(
      parent.emit(
        {
          type: "diagnostic",
          level: "warn",
          code: "KEEL_CHILD_INVALID",
          message: `Child session ${id} waits for approval that no parent call will pass on, and could not be ended: ${headOf(errorMessage(err), 300)}. A follow-up task with that session ends it.`,
        },
        null,
      ),
    ).catch(() => {});
  }
}

/** An earlier child session of `parent` named `name`, opened to run another turn. Checked from its stored link before anything is written. */
async function earlier(agent: Agent, parent: Session, name: string, id: unknown): Promise<Session> {
  const shown = JSON.stringify(typeof id === "string" ? headOf(id, 80) : typeof id);
  const wrong = (why: string) => new KeelError("KEEL_CHILD_INVALID", `session ${shown} ${why}.`, { path: "session" });
  if (typeof id !== "string" || id === parent.id)
    throw wrong(id === parent.id ? "is this session itself" : "is not a session");
  const info = await agent.store.getSession(id);
  if (!info) throw wrong("is not a session");
  const first = (await agent.store.events(id))[0];
  const link = first?.type === "session.created" ? first.parent : undefined;
  if (info.agent !== parent.agent.name || link?.sessionId !== parent.id)
    throw wrong("is not a child session of this session");
  if (link.name !== name) throw wrong(`belongs to "${link.name}", not "${name}"`);
  if (agent.isOpen(id)) throw wrong("is in use by another call right now");
  const session = await agent.session(id).catch((err: unknown) => {
    throw new KeelError(
      "KEEL_CHILD_INVALID",
      `session ${shown} could not be opened: ${headOf(errorMessage(err), 300)}.`,
      { path: "session" },
      { cause: err },
    );
  });
  // A child still paused here has no parent waiting for it (this session is running a turn): that turn ends.
  if (session.paused) await session.abandonPaused("aborted");
  return session;
}

/**
 * The child's limits: the smallest of the options', and what the parent turn has left once what
 * its running children hold is counted (its dollars come net of that already). Nothing left: a
 * KEEL_CHILD_BUDGET refusal, and no child starts.
 */
function clamp(given: ChildOptions["limits"], budget: TurnBudget, parent: Session, share: number): Clamped {
  const held = heldBy(parent);
  const session = budgetView(parent.agent.limits, emptyUsage(), parent.spend, held).leftSessionTokens;
  const left = {
    maxRounds: budget.rounds,
    maxToolCalls: budget.toolCalls,
    tokenBudget: Math.min(budget.tokens - held.tokens, session ?? Infinity),
    wallTimeMs: budget.wallMs,
    ...(budget.costUsd !== undefined ? { maxCostUsd: budget.costUsd } : {}),
  };
  for (const [k, v] of Object.entries(left))
    if (!(v > 0)) {
      const shown = k === "maxCostUsd" ? `$${Math.max(0, v).toFixed(4)}` : String(Math.max(0, Math.floor(v)));
      const by = held.children
        ? `; its ${held.children} running child session(s) hold ${k === "maxCostUsd" ? `$${held.usd.toFixed(4)}` : k === "tokenBudget" ? `${held.tokens} tokens` : "their share"} until they end`
        : "";
      throw new KeelError(
        "KEEL_CHILD_BUDGET",
        `The parent turn has no ${k} left for another child session (${shown}${by}).`,
        { path: `limits.${k}` },
      );
    }
  // Not asked for: the tokens and dollars left are shared evenly with the calls of the round still to start a child.
  const out = {
    ...left,
    tokenBudget:
      given?.tokenBudget === undefined ? Math.max(1, Math.floor(left.tokenBudget / share)) : left.tokenBudget,
    ...(left.maxCostUsd !== undefined && given?.maxCostUsd === undefined
      ? { maxCostUsd: left.maxCostUsd / share }
      : {}),
  };
  for (const k of ["maxRounds", "maxToolCalls", "tokenBudget", "wallTimeMs", "maxCostUsd"] as const) {
    const v = given?.[k];
    if (v === undefined) continue;
    if (typeof v !== "number" || !(v > 0))
      throw new KeelError("KEEL_CHILD_INVALID", `limits.${k} must be a positive number (got ${String(v)}).`, {
        path: `limits.${k}`,
      });
    out[k] = Math.min(out[k] ?? Infinity, v);
  }
  return out;
}

/** How many ways the budget left is split: this child and the calls running with its call that have started none yet. */
function shares(hold: ChildHold): number {
  return 1 + (hold.group ?? []).filter((h) => h !== hold && !h.count && !h.done && !h.closed).length;
}

/** The child agent's own limits count too: the turn gets the minimum. */
function cappedBy(own: Limits, limits: Clamped): Partial<Limits> {
  const dollars = limits.maxCostUsd !== undefined ? Math.min(own.maxCostUsd ?? Infinity, limits.maxCostUsd) : undefined;
  return {
    maxRounds: Math.min(own.maxRounds, limits.maxRounds),
    maxToolCalls: Math.min(own.maxToolCalls, limits.maxToolCalls),
    tokenBudget: Math.min(own.tokenBudget, limits.tokenBudget),
    wallTimeMs: Math.min(own.wallTimeMs, limits.wallTimeMs),
    ...(dollars !== undefined ? { maxCostUsd: dollars } : {}),
  };
}

/** What a child's turn may use: the parent turn's left-overs (its dollars too, when it has a dollar limit). */
type Clamped = Pick<Limits, "maxRounds" | "maxToolCalls" | "tokenBudget" | "wallTimeMs" | "maxCostUsd">;

/** The child agent named `name`, built once from the first options given for it. */
function childAgent(host: Agent, name: string, options: ChildOptions["agent"]): Promise<Agent> {
  let made = host.children.get(name);
  if (!made) {
    const given = (options ?? {}) as Partial<AgentOptions>;
    made = host
      .spawn({
        ...given,
        name: host.name,
        provider: given.provider ?? host.options.provider,
        ...(given.sideModel === undefined && host.options.sideModel !== undefined
          ? { sideModel: host.options.sideModel }
          : {}),
        ...(given.approve === undefined && host.options.approve ? { approve: host.options.approve } : {}),
        ...(given.ask === undefined && host.options.ask ? { ask: host.options.ask } : {}),
        ...(given.recovery === undefined && host.options.recovery ? { recovery: host.options.recovery } : {}),
        ...(host.options.childSessionId ? { childSessionId: host.options.childSessionId } : {}),
        // Its plugins keep their data where the parent agent does (its home and its store), never in KEEL_HOME.
        // A runtime with no file system has no home (""), which is no option to give: the child has none either.
        ...(host.storage.home ? { home: host.storage.home } : {}),
        store: host.store,
      })
      .then(
        (a) => {
          a.depth = host.depth + 1;
          return a;
        },
        (err: unknown) => {
          host.children.delete(name);
          throw new KeelError(
            "KEEL_CHILD_INVALID",
            `Child agent "${name}": ${headOf(errorMessage(err), 500)}`,
            { path: "agent" },
            { cause: err },
          );
        },
      );
    host.children.set(name, made);
  }
  return made;
}
