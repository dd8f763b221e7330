/**
 * How an eval answers tool calls: from the case's fixtures, from the recording a case was made
 * of, or live; and never twice for a call that already ran in an interrupted attempt of the case
 * (`--resume`). One plugin (`keel-eval`) on tool.pre_call, told per case by the runner what to
 * answer; it finds the case by the turn metadata the runner sets (`{ experiment, case }`).
 */
import type { KeelEvent, KeelPlugin, SessionStore, ToolDefinition } from "@keel/agent";
import { canonicalJson, definePlugin, KeelError } from "@keel/kernel";
import type { ContentBlock } from "@keel/kernel";
import { headOf } from "@keel/text";
import { subsetMatch } from "./scorers.ts";
import type { EvalCase, ToolFixtureSpec } from "./types.ts";

/**
 * What answers a call that no fixture answers. Contract: `fixtures` (the default) runs only tools
 * whose effect is read-only (the kernel's rule for a safe re-run: `repeatable: true`, or
 * `category: "info"` declared) and refuses the rest; `recorded` answers from the session the case
 * was made of (`metadata.session`, as `keel eval add` writes it) and refuses a call the recording
 * does not hold; `live` runs every tool.
 */
export type EvalToolsMode = "live" | "fixtures" | "recorded";

/** The modes, for flag checks. */
export const EVAL_TOOLS_MODES: readonly EvalToolsMode[] = ["live", "fixtures", "recorded"];

/**
 * One fixture of a case (`tools: { refund: { result: "ok" } }`, or a list of them per tool).
 * Contract: the first fixture of the tool whose `args` is a subset of the call's arguments (no
 * `args`: any call) answers it; a string result is the tool's text, any other value its JSON.
 */
export type ToolFixture = ToolFixtureSpec;

/** A call as it ran (or started) before: its name, arguments and, when it finished, its result. */
interface PastCall {
  name: string;
  args: string;
  result?: { content: ContentBlock[]; isError: boolean };
  session: string;
  used?: boolean;
}

/** What the plugin knows of one case while it runs. */
interface CaseTools {
  mode: EvalToolsMode;
  fixtures: Record<string, ToolFixture[]>;
  /** The recording's calls (mode `recorded`), in order. */
  recorded: PastCall[];
  /** Calls of earlier attempts of this case in this experiment (a killed run, resumed). */
  earlier: PastCall[];
}

/**
 * The eval's tool seam: add `plugin` to the agent's plugins, and pass the handle to runEval
 * (`tools`). Contract: a call of a case the handle was not told about is left alone.
 */
export interface EvalTools {
  plugin: KeelPlugin;
  /** @internal the runner's: what to answer for one case of one experiment. */
  bind(experiment: string, caseId: string, state: CaseTools): () => void;
  /** @internal the agent's configured tools, to tell a read-only one (set by the runner). */
  known?: ReadonlyMap<string, ToolDefinition>;
  /** Told of each call the eval refused to run, with the reason (`keel eval` notes each tool once). */
  onRefused?: (call: { tool: string; case: string; reason: string }) => void;
}

const NOT_RUN = (what: string) => new KeelError("KEEL_EVAL_TOOL_NOT_RUN", what).message;

const keyOf = (experiment: unknown, caseId: unknown) =>
  typeof experiment === "string" && typeof caseId === "string" ? `${experiment}\u0000${caseId}` : undefined;

function argsKey(args: unknown): string {
  try {
    return canonicalJson(args ?? {});
  } catch {
    return "?";
  }
}

function asContent(result: unknown): string {
  if (typeof result === "string") return result;
  try {
    return JSON.stringify(result) ?? "null";
  } catch {
    return String(result);
  }
}

/** The fixtures a case declares, each tool's as a list. Contract: reads only plain data (the dataset was validated). */
export function fixturesOf(c: EvalCase): Record<string, ToolFixture[]> {
  const out: Record<string, ToolFixture[]> = {};
  for (const [name, f] of Object.entries(c.tools ?? {})) out[name] = Array.isArray(f) ? f : [f];
  return out;
}

/**
 * Whether a call may run unasked in an eval: the tool says its effect is read-only. Contract:
 * a configured tool by its own definition (`repeatable`, else a declared `category: "info"`);
 * a plugin's tool by the category the kernel resolved for it.
 */
function readOnly(name: string, category: string, known: ReadonlyMap<string, ToolDefinition> | undefined): boolean {
  const def = known?.get(name);
  if (def) {
    try {
      return def.repeatable ?? def.category === "info";
    } catch {
      return false;
    }
  }
  return category === "info";
}

/** Create the eval's tool seam (one per agent). */
export function evalTools(): EvalTools {
  const cases = new Map<string, CaseTools>();
  const handle: EvalTools = {
    plugin: definePlugin({
      name: "keel-eval",
      version: "1.0.0",
      setup(ctx) {
        ctx.on(
          "tool.pre_call",
          (e) => {
            const key = keyOf(e.metadata.experiment, e.metadata.case);
            const state = key ? cases.get(key) : undefined;
            if (!state) return undefined;
            const args = argsKey(e.call.args);
            const shown = `${e.call.name}(${headOf(args, 200)})`;
            // 1. A call that ran in an interrupted attempt of this case never runs again.
            const before = state.earlier.find((p) => !p.used && p.name === e.call.name && p.args === args);
            if (before) {
              before.used = true;
              if (before.result)
                return {
                  kind: "tool_decision",
                  decision: "allow",
                  result: { content: before.result.content, isError: before.result.isError },
                };
              return {
                kind: "tool_decision",
                decision: "deny",
                reason: NOT_RUN(
                  `${shown} already started in an interrupted attempt of this case (session ${before.session}) and may have taken effect; it is not run again on resume.`,
                ),
              };
            }
            // 2. The case's fixture.
            const fixture = (state.fixtures[e.call.name] ?? []).find(
              (f) => !f.args || subsetMatch(f.args, e.call.args),
            );
            if (fixture)
              return {
                kind: "tool_decision",
                decision: "allow",
                result: { content: asContent(fixture.result), ...(fixture.isError ? { isError: true } : {}) },
              };
            if (state.mode === "live") return undefined;
            // 3. The recording the case was made of.
            if (state.mode === "recorded") {
              const r = state.recorded.find((p) => !p.used && p.name === e.call.name && p.args === args && p.result);
              if (r) {
                r.used = true;
                return { kind: "tool_decision", decision: "allow", result: { ...r.result! } };
              }
              return {
                kind: "tool_decision",
                decision: "deny",
                reason: NOT_RUN(
                  `the recording of this case holds no result for ${shown} (tools: "recorded"); give the case a fixture for ${e.call.name}.`,
                ),
              };
            }
            // 4. Fixtures mode: a read-only tool runs, anything else is refused.
            if (readOnly(e.call.name, e.call.category, handle.known)) return undefined;
            const reason = NOT_RUN(
              `${shown} has no fixture in this case and ${e.call.name} is not declared read-only, so the eval did not run it (tools: "fixtures"); add tools: { ${e.call.name}: { result: … } } to the case, or run with --tools live.`,
            );
            try {
              handle.onRefused?.({ tool: e.call.name, case: String(e.metadata.case), reason });
            } catch {
              // A host's note must not change the answer.
            }
            return { kind: "tool_decision", decision: "deny", reason };
          },
          { stage: "post" },
        );
      },
    }),
    bind(experiment, caseId, state) {
      const key = keyOf(experiment, caseId)!;
      cases.set(key, state);
      return () => cases.delete(key);
    },
  };
  return handle;
}

/** The calls of one session's log: each started call, with its result when it finished. */
export function callsOf(events: readonly KeelEvent[]): PastCall[] {
  const out = new Map<string, PastCall>();
  const results = new Map<string, { content: ContentBlock[]; isError: boolean }>();
  for (const e of events) {
    const key = `${e.turnId ?? ""}\u0000${"callId" in e ? e.callId : ""}`;
    if (e.type === "tool.started") out.set(key, { name: e.name, args: argsKey(e.args), session: e.sessionId });
    else if (e.type === "message.appended" && e.message.role === "tool")
      results.set(`${e.turnId ?? ""}\u0000${e.message.toolCallId}`, {
        content: e.message.content,
        isError: e.message.isError,
      });
    else if (e.type === "tool.completed" && e.raw) results.set(key, e.raw);
  }
  for (const [key, call] of out) {
    const r = results.get(key);
    if (r) call.result = r;
  }
  return [...out.values()];
}

/**
 * The calls of earlier attempts of `caseId` in `experiment`: the sessions the runner opened for it
 * (their turns carry `{ experiment, case }`), created since the experiment started.
 * Contract: never throws (a store that cannot be read gives none, and the case runs as if first).
 */
export async function earlierCalls(
  store: SessionStore,
  agent: string,
  experiment: { id: string; startedAt: number },
  caseIds: ReadonlySet<string>,
): Promise<Map<string, PastCall[]>> {
  const out = new Map<string, PastCall[]>();
  try {
    const listed = await store.listSessions({ agent, limit: 10_000 });
    for (const s of listed) {
      if (s.createdAt < experiment.startedAt - 1_000) continue;
      const events = await store.events(s.id);
      const mark = evalMark(events);
      if (!mark || mark.experiment !== experiment.id || !caseIds.has(mark.case)) continue;
      out.set(mark.case, [...(out.get(mark.case) ?? []), ...callsOf(events)]);
    }
  } catch {
    // Nothing known: the case runs as on a first attempt.
  }
  return out;
}

/**
 * The recorded calls of the session a case was made of (`metadata.session`). Contract: [] when
 * the case names none or the session is gone.
 */
export async function recordedCalls(store: SessionStore, c: EvalCase): Promise<PastCall[]> {
  const session = c.metadata?.session;
  if (typeof session !== "string") return [];
  try {
    return callsOf(await store.events(session)).filter((p) => p.result);
  } catch {
    return [];
  }
}

/**
 * The experiment and case a session ran for, when `runEval` opened it (its turns carry
 * `{ experiment, case }`). Contract: undefined for any other session; reads only the log.
 */
export function evalMark(events: readonly KeelEvent[]): { experiment: string; case: string } | undefined {
  for (const e of events) {
    if (e.type !== "turn.started") continue;
    const m = e.metadata as Record<string, unknown> | undefined;
    if (m && typeof m.experiment === "string" && m.experiment.startsWith("exp_") && typeof m.case === "string")
      return { experiment: m.experiment, case: m.case };
    return undefined;
  }
  return undefined;
}
