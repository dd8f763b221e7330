/**
 * `pnpm bench workflow`: the workflow gate on the shared trajectories (tau-bench airline 200 runs,
 * SWE-agent 22, mini-swe-agent 40), cut into turns (a user message and the model's rounds until
 * the next). Tuned on one half (tau-bench tasks 0-24, even SWE files), reported on the other.
 *
 * Each half is played in time order (trial by trial) with an empty store, through the plugin's own
 * code: learnFrom after every successful turn, decide at the gate, nextRound to run an offer.
 * An offer is *served* when the workflow makes exactly the calls the model made in that turn
 * (names and arguments; each step is fed the recorded output of that call), a *false offer*
 * otherwise. A turn is a *repeat* when a workflow for its tool sequence existed when it came.
 * Saved: the model rounds of served turns and their tokens (o200k; system prompt and history
 * per round, plus the output; tool schemas are not in the logs, so savings are understated).
 */
import { performance } from "node:perf_hooks";
import { join } from "node:path";
import type { Message } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import { dataDir } from "../../../test/support/data.ts";
import { loadMiniSweAgent, loadSweAgent, loadTauBench } from "../../plugin-compaction/bench/support/convert.ts";
import type { Trajectory } from "../../plugin-compaction/bench/support/convert.ts";
import type { Example, Json, Workflow } from "../src/index.ts";
import {
  decide,
  learnFrom,
  nextRound,
  OFFER_TOOL,
  offerable,
  planOf,
  sequenceKey,
  WorkflowStore,
} from "../src/index.ts";

interface SimTurn {
  source: string;
  order: [number, number];
  input: string;
  calls: Array<{ name: string; args: Record<string, Json>; output: string }>;
  answer: string;
  ok: boolean;
  rounds: number;
  tokens: number;
  lead: string;
}

const count = (s: string) => defaultTokenCounter().countText(s);

/** The turns of a trajectory, each with the tokens its model rounds cost (input per round + output). */
function turnsOf(t: Trajectory, order: [number, number]): SimTurn[] {
  let history = count(t.system);
  let lead = "";
  return t.turns.map((turn) => {
    history += count(turn.input);
    let tokens = 0;
    const calls: SimTurn["calls"] = [];
    for (const step of turn.steps) {
      const out = count(step.text) + count(JSON.stringify(step.calls.map((c) => [c.name, c.args])));
      tokens += history + out;
      history += out;
      for (const c of step.calls) {
        history += count(c.output ?? "");
        calls.push({ name: c.name, args: c.args as Record<string, Json>, output: c.output ?? "" });
      }
    }
    const answer = turn.steps.at(-1)?.text ?? "";
    const ok = calls.length > 0 && calls.every((c) => !/^error\b/i.test(c.output.trim()));
    const out = {
      source: t.source,
      order,
      input: turn.input,
      calls,
      answer,
      ok,
      rounds: turn.steps.length,
      tokens,
      lead,
    };
    lead = answer.trim() ? answer : lead;
    return out;
  });
}

interface Tally {
  turns: number;
  repeats: number;
  offers: number;
  served: number;
  falseOffers: number;
  falseOnNonRepeats: number;
  needModel: number;
  ambiguous: number;
  roundsSaved: number;
  tokensSaved: number;
  tokensAll: number;
  gateMs: number;
}

/** Would the offer make exactly the recorded calls? Runs the plan through nextRound, fed the recorded outputs. */
function serves(w: Workflow, params: Record<string, Json>, turn: SimTurn): boolean {
  const plan = planOf(w, params);
  const messages: Message[] = [
    { role: "user", content: [{ type: "text", text: turn.input }] },
    { role: "assistant", content: [{ type: "tool_call", id: "offer", name: OFFER_TOOL, args: plan }] },
    {
      role: "tool",
      toolCallId: "offer",
      toolName: OFFER_TOOL,
      content: [{ type: "text", text: "approved" }],
      isError: false,
    },
  ];
  for (let i = 0; ; i++) {
    const next = nextRound(messages);
    if (next?.kind === "done") return i === turn.calls.length;
    if (next?.kind !== "call") return false;
    const rec = turn.calls[i];
    if (!rec || rec.name !== next.tool || JSON.stringify(rec.args) !== JSON.stringify(next.args)) return false;
    messages.push(
      { role: "assistant", content: [{ type: "tool_call", id: `s${i}`, name: next.tool, args: next.args }] },
      {
        role: "tool",
        toolCallId: `s${i}`,
        toolName: next.tool,
        content: [{ type: "text", text: rec.output }],
        isError: false,
      },
    );
  }
}

/**
 * Play a half in time order. `oracle`: parameters only a model could fill are filled with the
 * values the recorded model used (an upper bound for a perfect side model); else such
 * workflows are not offered (no model runs here).
 */
function play(turns: readonly SimTurn[], minExamples: number, minCue: number, oracle = false): Tally {
  const store = new WorkflowStore(":memory:");
  const t: Tally = {
    turns: turns.length,
    repeats: 0,
    offers: 0,
    served: 0,
    falseOffers: 0,
    falseOnNonRepeats: 0,
    needModel: 0,
    ambiguous: 0,
    roundsSaved: 0,
    tokensSaved: 0,
    tokensAll: 0,
    gateMs: 0,
  };
  for (const turn of turns) {
    t.tokensAll += turn.tokens;
    const visible = store.visible("default").filter((w) => offerable(w));
    const repeat = turn.calls.length > 0 && visible.some((w) => w.key === sequenceKey(turn.calls));
    if (repeat) t.repeats++;
    const t0 = performance.now();
    const d = decide(
      turn.input,
      visible.map((w) => w.workflow),
      { minCue },
      turn.lead,
    );
    t.gateMs += performance.now() - t0;
    let served = false;
    if (d.kind === "ambiguous") t.ambiguous++;
    if (d.kind === "match") {
      const w = d.match.workflow;
      if (w.modelParams.length && !oracle) t.needModel++;
      else {
        t.offers++;
        served = serves(w, { ...d.match.params, ...(oracle ? oracleParams(w, turn) : {}) }, turn);
        store.outcome("default", w.id, served);
        if (served) {
          t.served++;
          t.roundsSaved += turn.rounds;
          t.tokensSaved += turn.tokens;
        } else {
          if (process.env.WF_DEBUG)
            console.log(
              `FALSE ${repeat ? "repeat" : "new"} | ${JSON.stringify(turn.input.slice(0, 100))} | wf ${d.match.workflow.name} ${JSON.stringify(d.match.params)} cue ${d.match.workflow.cue} | did ${turn.calls.map((c) => `${c.name}(${JSON.stringify(c.args).slice(0, 60)})`).join(" ")}`,
            );
          t.falseOffers++;
          if (!repeat) t.falseOnNonRepeats++;
        }
      }
    }
    if (!served && turn.ok) {
      const example: Example = {
        input: turn.input,
        calls: turn.calls.map((c) => ({ name: c.name, args: c.args })),
        results: turn.calls.map((c) => c.output),
        answer: turn.answer,
        ...(turn.lead ? { lead: turn.lead } : {}),
      };
      learnFrom(store, "default", example, minExamples);
    }
  }
  store.close();
  return t;
}

/** The values the recorded model gave the parameters a model must fill (matched by step and argument name). */
function oracleParams(w: Workflow, turn: SimTurn): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const p of w.modelParams) {
    const [, step, name] = /^step(\d+)\.(.+)$/.exec(p) ?? [];
    const v = turn.calls[Number(step) - 1]?.args[name ?? ""];
    if (v !== undefined) out[p] = v;
  }
  return out;
}

const objective = (t: Tally) => t.served - 2 * t.falseOffers;
const pct = (a: number, b: number) => (b ? `${((100 * a) / b).toFixed(1)}%` : "n/a");

function line(name: string, t: Tally): string {
  return `${name}: ${t.turns} turns, ${t.repeats} repeats; offers ${t.offers}, served ${t.served} (${pct(t.served, t.repeats)} of repeats), false offers ${t.falseOffers} (${t.falseOnNonRepeats} on non-repeats), not offered for want of a model ${t.needModel}, ambiguous ${t.ambiguous}; saved ${t.roundsSaved} model rounds, ${t.tokensSaved.toLocaleString("en")} tokens of ${t.tokensAll.toLocaleString("en")} (${pct(t.tokensSaved, t.tokensAll)}); gate ${((1000 * t.gateMs) / t.turns).toFixed(1)} µs/turn`;
}

function main(): void {
  const d = join(dataDir(), "trajectories");
  const tau = loadTauBench(join(d, "tau-bench", "gpt-4o-airline.json"), [0, 1, 2, 3]);
  const swe = [...loadSweAgent(join(d, "swe-agent")), ...loadMiniSweAgent(join(d, "mini-swe-agent"))];
  const halves: [SimTurn[], SimTurn[]] = [[], []];
  for (const t of tau) {
    const [, task, , trial] = t.name.split(" ").map(Number);
    halves[task! < 25 ? 0 : 1].push(...turnsOf(t, [trial!, task!]));
  }
  for (const [i, t] of swe.entries()) halves[i % 2]!.push(...turnsOf(t, [0, -1]));
  for (const h of halves) h.sort((a, b) => a.order[0] - b.order[0] || a.order[1] - b.order[1]);
  const [tune, report] = halves;
  const all = [...tune, ...report];
  const tauTurns = all.filter((x) => x.source === "tau-bench").length;
  console.log(
    `turns: tau-bench ${tauTurns} (${tau.length} runs), SWE ${all.length - tauTurns} (${swe.length} runs); tune half ${tune.length}, held-out half ${report.length}`,
  );

  console.log("tune half (tau-bench tasks 0-24, even SWE files):");
  let best: { minExamples: number; minCue: number; t: Tally } | undefined;
  for (const minExamples of [2, 3, 4])
    for (const minCue of [0.34, 0.5, 0.75, 1]) {
      const t = play(tune, minExamples, minCue);
      console.log(`  ${line(`minExamples ${minExamples}, minCue ${minCue}`, t)}`);
      if (!best || objective(t) > objective(best.t)) best = { minExamples, minCue, t };
    }
  console.log(
    `chosen on the tune half (served - 2 x false offers): minExamples ${best!.minExamples}, minCue ${best!.minCue}`,
  );
  console.log("held-out half (tau-bench tasks 25-49, odd SWE files):");
  console.log(`  ${line("chosen", play(report, best!.minExamples, best!.minCue))}`);
  console.log(`  ${line("defaults (3, 1)", play(report, 3, 1))}`);
  console.log(
    `  ${line("chosen, a side model filling what the input cannot (oracle: the recorded values)", play(report, best!.minExamples, best!.minCue, true))}`,
  );
  const nonRepeatSources = report.filter((x) => x.source !== "tau-bench");
  console.log(
    `  ${line("SWE turns only (no repeats expected)", play(nonRepeatSources, best!.minExamples, best!.minCue))}`,
  );
}

main();
