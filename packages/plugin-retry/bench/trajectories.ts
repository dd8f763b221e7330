/**
 * Evaluation: on the recorded trajectories in ../shared/data/trajectories (SWE-agent,
 * mini-swe-agent, tau-bench, all runs), the share of repeated failing calls the retry
 * controller stops. Each turn's calls are replayed in order through the plugin's own ledger
 * and classifier (the code its hooks run): a call the ledger has blocked counts as stopped;
 * otherwise a failed call is classified and counted.
 *  - repeated failing call: a call that fails with the same tool and normalised arguments as
 *    an earlier failed call of the same turn with no state-changing call succeeding in between
 *    (a blind retry: what a retry budget is for; the shell and tau-bench's writes change state);
 *  - stopped: such a call the controller denies before it runs (repeats after a state change
 *    are allowed on purpose: re-running a test after an edit is the normal loop of a coder);
 *  - false stop: a call it would deny whose recorded run succeeded (the cost).
 * Failure as recorded: tau-bench output starting "Error"; mini-swe-agent `<returncode>` ≠ 0;
 * SWE-agent (no exit code recorded) an output matching common error words, a heuristic.
 * Run: `pnpm bench retry`.
 */
import { dataDir } from "../../../test/support/data.ts";
import { join } from "node:path";
import { loadMiniSweAgent, loadSweAgent, loadTauBench } from "../../plugin-compaction/bench/support/convert.ts";
import type { Trajectory } from "../../plugin-compaction/bench/support/convert.ts";
import { classifyFailure, normalizeArgs, RetryLedger } from "../src/index.ts";
import type { FailureClass } from "../src/index.ts";

const root = join(dataDir(), "trajectories");
/** What may change state: the shell; tau-bench's tools other than reads and calculations. */
const changes = (tool: string) => !/^(get|search|list|calculate|think|find)_?/.test(tool) || tool === "bash";
const sets: Array<[string, Trajectory[], (out: string) => boolean]> = [
  [
    "tau-bench",
    loadTauBench(join(root, "tau-bench", "gpt-4o-airline.json"), [0, 1, 2, 3]),
    (o) => /^\s*Error\b/.test(o),
  ],
  [
    "mini-swe-agent",
    loadMiniSweAgent(join(root, "mini-swe-agent")),
    (o) => {
      const rc = /<returncode>(\d+)<\/returncode>/.exec(o);
      return !!rc && rc[1] !== "0";
    },
  ],
  [
    "swe-agent",
    loadSweAgent(join(root, "swe-agent")),
    (o) =>
      /command not found|Traceback \(most recent|No such file|^(?:Error|error)\b|Usage: |SyntaxError|is not defined|cannot (?:open|access)/m.test(
        o,
      ),
  ],
];

console.log(
  "source          trajectories  calls  failed  repeats  blind  stopped  share of blind  false stops  classes of failures",
);
const all = { calls: 0, failed: 0, repeatedAny: 0, repeated: 0, stopped: 0, falseStops: 0 };
for (const [name, trajectories, failedOf] of sets) {
  const n = { calls: 0, failed: 0, repeatedAny: 0, repeated: 0, stopped: 0, falseStops: 0 };
  const classes = new Map<FailureClass, number>();
  for (const t of trajectories) {
    for (const turn of t.turns) {
      const ledger = new RetryLedger({ maxPerSignature: 3 });
      const failedBefore = new Set<string>();
      const failedEver = new Set<string>();
      for (const step of turn.steps) {
        for (const call of step.calls) {
          if (call.output === undefined) continue;
          n.calls++;
          const args = normalizeArgs(call.args);
          const key = `${call.name}\u0000${args}`;
          const failed = failedOf(call.output);
          const repeated = failed && failedBefore.has(key);
          if (failed) n.failed++;
          if (repeated) n.repeated++;
          if (failed && failedEver.has(key)) n.repeatedAny++;
          if (failed) failedEver.add(key);
          if (ledger.blocked(call.name, args)) {
            if (repeated) n.stopped++;
            else if (!failed) n.falseStops++;
            continue;
          }
          if (!failed) {
            if (changes(call.name)) {
              ledger.changed();
              failedBefore.clear();
            }
            continue;
          }
          failedBefore.add(key);
          const cls = classifyFailure(call.output);
          classes.set(cls, (classes.get(cls) ?? 0) + 1);
          ledger.failed(call.name, args, cls);
        }
      }
    }
  }
  for (const k of Object.keys(all) as Array<keyof typeof all>) all[k] += n[k];
  const share = n.repeated ? `${((100 * n.stopped) / n.repeated).toFixed(1)}%` : "n/a";
  console.log(
    `${name.padEnd(16)}${String(trajectories.length).padStart(12)}${String(n.calls).padStart(7)}${String(n.failed).padStart(8)}${String(n.repeatedAny).padStart(9)}${String(n.repeated).padStart(7)}${String(n.stopped).padStart(9)}  ${share.padEnd(14)}${String(n.falseStops).padStart(12)}  ${[
      ...classes,
    ]
      .sort((a, b) => b[1] - a[1])
      .map(([c, k]) => `${c} ${k}`)
      .join(", ")}`,
  );
}
console.log(
  `${"all".padEnd(16)}${"".padStart(12)}${String(all.calls).padStart(7)}${String(all.failed).padStart(8)}${String(all.repeatedAny).padStart(9)}${String(all.repeated).padStart(7)}${String(all.stopped).padStart(9)}  ${`${((100 * all.stopped) / Math.max(1, all.repeated)).toFixed(1)}%`.padEnd(14)}${String(all.falseStops).padStart(12)}`,
);
console.log(
  "\nrepeats = failures of a call that already failed in the turn; blind = with no state-changing call succeeding in between;",
);
console.log("stopped = blind repeats denied before running; false stop = a denied call whose recorded run succeeded.");
