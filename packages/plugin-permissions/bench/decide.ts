/**
 * Deciding one call against large tables and hostile arguments (the adversarial review): a
 * decision costs at most (rules × argument code points), each argument's derived readings (its
 * length, its resolved path, its other readings) are made once per call, not once per rule, and
 * a glob anchored at a folder rejects a path outside it with one string compare.
 * `pnpm bench permissions`; RUNS (default 5) runs per case, the median reported.
 */
import type { CallFacts, RuleInput } from "../src/index.ts";
import { compileRules, DEFAULTS, decideWith } from "../src/index.ts";

const RUNS = Number(process.env.RUNS ?? 5);
const call = (name: string, args: unknown): CallFacts => ({
  call: { name, args, category: "edit", source: { kind: "builtin" } },
  namespace: "default",
});

function bench(what: string, table: RuleInput[], facts: CallFacts, pathCase: "sensitive" | "insensitive"): void {
  const c = compileRules(table, { cwd: "/p", maxArgChars: 10_000, pathCase });
  if (!c.ok) throw new Error(JSON.stringify(c.issues.slice(0, 3)));
  const times: number[] = [];
  let decision = "";
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    decision = decideWith(c.rules, facts, DEFAULTS, false).decision;
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  console.log(`${what} [${pathCase}]: ${decision}, median ${times[times.length >> 1]!.toFixed(1)} ms`);
}

const pathRules = Array.from({ length: 10_000 }, (_, i) => ({
  decision: "deny" as const,
  tool: "write_file",
  args: { path: `./d${i}/**` },
}));
const prefixRules = Array.from({ length: 10_000 }, (_, i) => ({
  decision: "deny" as const,
  tool: "write_file",
  args: { path: { prefix: `/d${i}/` } },
}));
const few = Array.from({ length: 20 }, (_, i) => ({
  decision: "deny" as const,
  tool: "x",
  args: { path: `**/s${i}/**` },
}));
for (const pathCase of ["sensitive", "insensitive"] as const) {
  bench(
    "10,000 path rules, a 10,000-character path",
    pathRules,
    call("write_file", { path: "Q/".repeat(4_999) }),
    pathCase,
  );
  bench(
    "10,000 prefix rules, a path of 3,333 '..'",
    prefixRules,
    call("write_file", { path: "../".repeat(3_333) }),
    pathCase,
  );
  const list = Array.from({ length: 1_000 }, () => "a/".repeat(4));
  bench("10,000 path rules, a list of 1,000 short paths", pathRules, call("write_file", { path: list }), pathCase);
  const huge = Array.from({ length: 1_000 }, () => "a/".repeat(4_999));
  bench("20 path rules, a list of 1,000 paths of 10,000 characters", few, call("x", { path: huge }), pathCase);
}
