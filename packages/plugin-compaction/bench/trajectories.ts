/**
 * Evaluation: replay real agent trajectories (SWE-agent, mini-swe-agent, tau-bench) through
 * real kernel turns with the compaction plugin, and measure per strategy
 *  - tokens sent over the whole trajectory (every request: system + tools + messages, o200k) vs no compaction;
 *  - evidence retention: of the identifiers an assistant message takes from an earlier tool
 *    output, the share still visible in the context it was written from.
 * The recorded assistant messages are replayed by a scripted provider; tools answer with
 * the recorded outputs. Summaries, digests and subgoal extraction are deterministic (no
 * model), as in CI.
 *
 * Identifiers come from `extractIdentifiers` (regexes for paths, file names, error names,
 * dotted/snake/camel names, mixed letter-digit ids, versions, hex and 3+ digit numbers). An
 * identifier counts as evidence for an assistant message when the message contains it and
 * its first appearance in the trajectory was in a tool output (not the system prompt, the
 * user's words or the assistant's own earlier text). It is kept when the same extractor
 * finds it anywhere in the request the message was written from. Stubs, digests and
 * summaries carry identifier indexes made by that same extractor, so the "w/o indexes"
 * column also gives the share found outside those indexes.
 * Sampling: all SWE-agent and mini-swe-agent files; tau-bench trial 0 of its 50 tasks
 * (`--all` replays all 200 runs). Halves: alternate trajectories of each source (A for
 * choosing settings, B held out).
 *
 * Floor and removable share. The floor of one request is what no strategy may remove from
 * it, counted on the uncompacted ("none") request with the same counter as "tokens sent"
 * (one `countRequest` of the request reduced to these parts): the system prompt, the tool
 * definitions, the pinned user messages (the first user message, which states the task, and
 * the running turn's input with any user message after it) and the newest block (the
 * latest assistant message with its tool calls and their results, or nothing when the turn
 * has just started). Removable = none − floor and removed = none − strategy, each computed
 * per request and summed over the requests of every trajectory; the share is removed ÷
 * removable. TACO digests even the newest result, so a TACO row may pass 100% in principle.
 * A source meets the issue's goal when a strategy removes ≥ 85% of its removable tokens at
 * ≥ 95% evidence retention.
 * Env: WINDOW_SHARE, MIN_WINDOW, ONLY (labels), OPTS (plugin options JSON), CURVE=1 (the curve
 * rows instead of the strategies), BREAKDOWN=1
 * (where the tokens go, per strategy), MISSES=1 (how far back lost evidence was), DUMP (a
 * trajectory name part: print one of its requests per strategy, message by message; DUMPK = which).
 *
 * Run: `pnpm bench compaction` (or `node packages/plugin-compaction/bench/trajectories.ts [--all]`).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Message, ModelRequest, ToolDefinition } from "@keel/kernel";
import type { ScriptStep } from "@keel/testkit";
import { createAgent, defineTool } from "@keel/agent";
import { defaultTokenCounter } from "@keel/tokens";
import { headOf } from "@keel/text";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { dataDir } from "../../../test/support/data.ts";
import type { Strategy } from "../src/index.ts";
import { compaction, extractIdentifiers } from "../src/index.ts";
import { DIGEST_PREFIX, fullText, isSummary, MASK_PREFIX } from "../src/messages.ts";
import type { Trajectory } from "./support/convert.ts";
import { loadMiniSweAgent, loadSweAgent, loadTauBench } from "./support/convert.ts";

const all = process.argv.includes("--all");
/** Window = this share of the trajectory's largest uncompacted request, at least MIN_WINDOW tokens. */
const WINDOW_SHARE = Number(process.env.WINDOW_SHARE ?? 0.3);
const MIN_WINDOW = Number(process.env.MIN_WINDOW ?? 2_048);
const counter = defaultTokenCounter();

interface Config {
  label: string;
  strategy: Strategy | "none";
  taco: boolean;
  /** Intra-turn pruning on top (off in the other rows, so they compare with earlier runs). */
  prune: boolean;
  /** Plugin options on top of the row's (CURVE=1). */
  opts?: Record<string, unknown>;
}
/**
 * CURVE=1: mask + TACO from the defaults to compaction down to the floor (every round, no
 * protected tail beyond the newest call, small summaries): removed share vs evidence
 * retention per source. "eager" compacts from a fifth of the window down to a tenth.
 */
const EXTREME = {
  soft: 0.05,
  target: 0.05,
  hard: 0.06,
  cooldownRounds: 0,
  protectedTail: { messages: 1, tokens: 0, share: 0.01 },
};
const EAGER = { soft: 0.2, target: 0.1, hard: 0.3, protectedTail: { messages: 6, tokens: 0, share: 0.1 } };
const CURVE: Array<[string, Record<string, unknown>]> = [
  ["c0 defaults", {}],
  ["c1 tail .10 sum .35", { protectedTail: { share: 0.1 }, summaryShare: 0.35 }],
  ["c2 eager sum 1 ids 300", { ...EAGER, summaryShare: 1, stubIdentifiers: 300 }],
  ["c3 eager sum .25", { ...EAGER, summaryShare: 0.25 }],
  ["c4 floor sum .5", { ...EXTREME, summaryShare: 0.5 }],
  ["c5 floor sum .25", { ...EXTREME, summaryShare: 0.25 }],
];
const ALL_CONFIGS: Config[] = [
  ...(["none", "truncate", "mask", "subgoal", "subgoal_mig"] as const).flatMap((strategy): Config[] => [
    { label: strategy, strategy, taco: false, prune: false },
    { label: `${strategy}+taco`, strategy, taco: true, prune: false },
  ]),
  { label: "none+prune", strategy: "none", taco: false, prune: true },
  { label: "mask+taco+prune", strategy: "mask", taco: true, prune: true },
  { label: "subgoal+taco+prune", strategy: "subgoal", taco: true, prune: true },
];
const CONFIGS: Config[] = process.env.CURVE
  ? [
      ALL_CONFIGS[0]!,
      ...CURVE.map(([label, opts]): Config => ({ label, strategy: "mask", taco: true, prune: false, opts })),
    ]
  : ALL_CONFIGS.filter((c) => c.label === "none" || !process.env.ONLY || process.env.ONLY.split(",").includes(c.label));

const idCache = new Map<string, Set<string>>();
function idsOf(text: string): Set<string> {
  let s = idCache.get(text);
  if (!s) {
    s = new Set(extractIdentifiers(text));
    if (idCache.size > 200_000) idCache.clear();
    idCache.set(text, s);
  }
  return s;
}

/** Per model step (in order): the identifiers it takes from earlier tool outputs (first seen in a tool output). */
function evidence(t: Trajectory): Array<string[] | null> {
  const first = new Map<string, "tool" | "other">();
  const see = (text: string, kind: "tool" | "other") => {
    for (const id of idsOf(text)) if (!first.has(id)) first.set(id, kind);
  };
  see(t.system, "other");
  const out: Array<string[] | null> = [];
  for (const turn of t.turns) {
    see(turn.input, "other");
    turn.steps.forEach((step, i) => {
      const written = `${step.text}\n${step.calls.map((c) => `${c.name} ${JSON.stringify(c.args)}`).join("\n")}`;
      out.push([...idsOf(written)].filter((id) => first.get(id) === "tool"));
      see(written, "other");
      for (const c of step.calls) see(c.output ?? "", "tool");
      // A step with calls that ends its turn gets a closing request that is not measured.
      if (i === turn.steps.length - 1 && step.calls.length) out.push(null);
    });
  }
  return out;
}

/** The identifier indexes of stubs, digests and summaries (removed for the strict figure). */
const INDEXES = / Identifiers: [^\]]*\]|\[identifiers in the omitted part: [^\]]*\]|\nOther identifiers: [^\n]*/g;

interface Outcome {
  tokens: number;
  /** Floor tokens of the same requests (per request, counted on the uncompacted request). */
  floor: number;
  peak: number;
  evidence: number;
  kept: number;
  /** Kept in text other than the identifier indexes. */
  strict: number;
  compactions: number;
  /** Requests measured, and those whose messages do not start with the previous request's (a provider prompt cache misses from the first change on). */
  requests: number;
  rewrites: number;
  /** Where the tokens went (BREAKDOWN=1). */
  parts?: Record<string, number>;
}

/** Split one request's tokens: the floor's parts (system, tools, pinned, newest block), then summaries, stubs, digests and raw messages by role. */
function breakdown(req: ModelRequest, parts: Record<string, number>): void {
  const add = (k: string, n: number) => (parts[k] = (parts[k] ?? 0) + n);
  add("system", counter.countRequest({ system: req.system, messages: [], tools: [] }).total);
  add("tools", counter.countRequest({ system: "", messages: [], tools: req.tools }).total);
  const ms = req.messages;
  const first = ms.findIndex((m) => m.role === "user");
  const input = ms.findLastIndex((m) => m.role === "user" && !isSummary(m));
  const last = ms.findLastIndex((m) => m.role === "assistant");
  ms.forEach((m, i) => {
    const n = counter.countMessages([m]);
    const text = fullText(m);
    const kind =
      i === first || i === input
        ? "pinned"
        : last > input && i >= last
          ? "newest"
          : isSummary(m)
            ? "summary"
            : text.startsWith(MASK_PREFIX)
              ? "stubs"
              : text.includes('"masked":"[masked arguments')
                ? "masked-args assistant"
                : text.startsWith(DIGEST_PREFIX)
                  ? "digests"
                  : `raw ${m.role}`;
    add(kind, n);
  });
}

/** What no strategy may remove from `req` (see the header): one count of the request reduced to those parts. */
function floorOf(req: ModelRequest): number {
  const ms = req.messages;
  const keep = new Set<number>();
  const first = ms.findIndex((m) => m.role === "user");
  if (first >= 0) keep.add(first);
  // The running turn's input: the last user message that is not a tool-result carrier, and what follows it from the person.
  const input = ms.findLastIndex((m) => m.role === "user");
  if (input >= 0) for (let i = input; i < ms.length; i++) if (ms[i]!.role === "user") keep.add(i);
  // The newest block: the latest assistant message and its results (when it comes after the input).
  const last = ms.findLastIndex((m) => m.role === "assistant");
  if (last > input) for (let i = last; i < ms.length; i++) keep.add(i);
  return counter.countRequest({ system: req.system, messages: ms.filter((_, i) => keep.has(i)), tools: req.tools })
    .total;
}

async function replay(
  t: Trajectory,
  cfg: Config,
  window: number,
  home: string,
): Promise<{ outcome: Outcome; requests: ModelRequest[] }> {
  const steps: ScriptStep[] = [];
  const outputs = new Map<string, string>();
  const names = new Set<string>();
  for (const turn of t.turns) {
    turn.steps.forEach((s, i) => {
      steps.push({
        text: s.text,
        ...(s.calls.length ? { toolCalls: s.calls.map((c) => ({ id: c.id, name: c.name, args: c.args })) } : {}),
      });
      for (const c of s.calls) {
        outputs.set(c.id, c.output ?? "(no output recorded)");
        names.add(c.name);
      }
      if (i === turn.steps.length - 1 && s.calls.length) steps.push({ text: "" });
    });
  }
  const tools: ToolDefinition[] = [...names].map((name) =>
    defineTool({
      name,
      description: `Recorded tool ${name}.`,
      category: t.source === "tau-bench" ? "info" : "exec",
      parameters: { type: "object", additionalProperties: true },
      execute: (_a, ctx) => outputs.get(ctx.callId) ?? "",
    }),
  );
  const provider = scriptedProvider(steps, { contextWindow: 100_000_000 });
  const plugins =
    cfg.strategy === "none" && !cfg.taco && !cfg.prune
      ? []
      : [
          compaction({
            path: join(home, "compaction.sqlite"),
            model: false,
            window: cfg.strategy === "none" ? 100_000_000 : window,
            strategy: cfg.strategy === "none" ? "mask" : cfg.strategy,
            taco: { enabled: cfg.taco },
            prune: { enabled: cfg.prune },
            subgoals: { extractor: "heuristic", every: 1 },
            ...cfg.opts,
            ...(process.env.OPTS ? JSON.parse(process.env.OPTS) : {}),
          }),
        ];
  const agent = await createAgent({
    provider,
    instructions: t.system,
    store: new MemorySessionStore(),
    tools,
    plugins,
    limits: { maxRounds: 100_000, maxToolCalls: 100_000, tokenBudget: 1e15, wallTimeMs: 1e9 },
  });
  const session = await agent.session();
  for (const turn of t.turns) {
    const r = await session.run(turn.input);
    if (r.verdict.status !== "completed")
      throw new Error(`${t.name} (${cfg.label}): turn ended ${JSON.stringify(r.verdict)}`);
  }
  const events = await session.events();
  await agent.close();
  const compactions = events.filter((e) => e.type === "context.edited").length;
  return {
    outcome: {
      tokens: 0,
      floor: 0,
      peak: 0,
      evidence: 0,
      kept: 0,
      strict: 0,
      compactions,
      requests: 0,
      rewrites: 0,
      ...(process.env.BREAKDOWN || cfg.label === "none" ? { parts: {} } : {}),
    },
    requests: provider.requests,
  };
}

const misses = new Map<string, number>();
let baseRequests: ModelRequest[] = [];
/** Floor per request of the trajectory being measured (from its uncompacted replay). */
let floors: number[] = [];
/** Message count of each uncompacted request of that trajectory. */
let noneLengths: number[] = [];
function measure(
  t: Trajectory,
  requests: ModelRequest[],
  ev: Array<string[] | null>,
  o: Outcome,
  base: boolean,
): Outcome {
  if (requests.length !== ev.length) throw new Error(`${t.name}: ${requests.length} requests for ${ev.length} steps`);
  if (base) {
    floors = requests.map(floorOf);
    noneLengths = requests.map((r) => r.messages.length);
  }
  requests.forEach((req, k) => {
    const want = ev[k];
    if (want === null) return;
    const n = counter.countRequest({ system: req.system, messages: req.messages, tools: req.tools }).total;
    o.tokens += n;
    o.floor += floors[k]!;
    o.requests++;
    const prev = requests[k - 1]?.messages;
    if (
      prev?.some(
        (m, i) =>
          req.messages[i] === undefined ||
          (req.messages[i] !== m && JSON.stringify(req.messages[i]) !== JSON.stringify(m)),
      )
    )
      o.rewrites++;
    o.peak = Math.max(o.peak, n);
    if (o.parts) {
      breakdown(req, o.parts);
      // Above-floor tokens of requests the strategy left as they were (below its threshold).
      const touched =
        req.messages.length !== noneLengths[k] ||
        req.messages.some(
          (m) =>
            isSummary(m) || fullText(m).startsWith(MASK_PREFIX) || fullText(m).includes('"masked":"[masked arguments'),
        );
      if (!base && !touched)
        o.parts["(above floor, requests not compacted)"] =
          (o.parts["(above floor, requests not compacted)"] ?? 0) + n - floors[k]!;
    }
    if (!want!.length) return;
    const sets = [idsOf(req.system), ...req.messages.map((m: Message) => idsOf(fullText(m)))];
    const strict = [sets[0]!, ...req.messages.map((m: Message) => idsOf(fullText(m).replace(INDEXES, "")))];
    for (const id of want!) {
      o.evidence++;
      if (sets.some((s) => s.has(id))) o.kept++;
      else if (process.env.MISSES && baseRequests[k]) {
        const ms = baseRequests[k]!.messages;
        let j = ms.length - 1;
        while (j >= 0 && !idsOf(fullText(ms[j]!)).has(id)) j--;
        const back = ms.length - j;
        const b = `${t.source} ${back <= 2 ? "last2" : back <= 6 ? "3-6" : back <= 12 ? "7-12" : back <= 30 ? "13-30" : ">30"}`;
        misses.set(b, (misses.get(b) ?? 0) + 1);
      }
      if (strict.some((s) => s.has(id))) o.strict++;
    }
  });
  return o;
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const d = join(dataDir(), "trajectories");
  const trajectories = [
    ...loadSweAgent(join(d, "swe-agent")),
    ...loadMiniSweAgent(join(d, "mini-swe-agent")),
    ...loadTauBench(join(d, "tau-bench", "gpt-4o-airline.json"), all ? [0, 1, 2, 3] : [0]),
  ];
  const home = mkdtempSync(join(tmpdir(), "keel-compaction-bench-"));
  const totals = new Map<string, Map<string, Outcome>>();
  const windows: number[] = [];
  try {
    const seen = new Map<string, number>();
    for (const t of trajectories) {
      // Halves: alternate trajectories of each source (A = tuning, B = held out).
      const nth = seen.get(t.source) ?? 0;
      seen.set(t.source, nth + 1);
      const half = nth % 2 === 0 ? "half A (tuning)" : "half B (held out)";
      const ev = evidence(t);
      let window = 0;
      for (const cfg of CONFIGS) {
        const { outcome, requests } = await replay(t, cfg, window, home);
        const o = measure(t, requests, ev, outcome, cfg.label === "none");
        if (process.env.DUMP && t.name.includes(process.env.DUMP)) {
          const k = Number(process.env.DUMPK ?? requests.length - 2);
          const req = requests[k]!;
          console.log(
            `--- ${t.name} ${cfg.label} request ${k}/${requests.length}: ${counter.countRequest({ system: req.system, messages: req.messages, tools: req.tools }).total} tokens, floor ${floors[k]}, system ${counter.countText(req.system)}`,
          );
          for (const m of req.messages)
            console.log(
              `  ${m.role.padEnd(9)} ${String(counter.countMessages([m])).padStart(6)}  ${JSON.stringify(process.env.DUMPFULL ? fullText(m) : headOf(fullText(m), 160))}`,
            );
        }
        if (cfg.label === "none") baseRequests = requests;
        if (cfg.label === "none") {
          window = Math.max(MIN_WINDOW, Math.round(o.peak * WINDOW_SHARE));
          windows.push(window);
        }
        for (const key of ["all", half, t.source, `${t.source}, ${half}`]) {
          const bySource = totals.get(key) ?? new Map<string, Outcome>();
          totals.set(key, bySource);
          const acc = bySource.get(cfg.label) ?? {
            tokens: 0,
            floor: 0,
            peak: 0,
            evidence: 0,
            kept: 0,
            strict: 0,
            compactions: 0,
            requests: 0,
            rewrites: 0,
          };
          acc.tokens += o.tokens;
          acc.floor += o.floor;
          acc.peak = Math.max(acc.peak, o.peak);
          acc.evidence += o.evidence;
          acc.kept += o.kept;
          acc.strict += o.strict;
          acc.compactions += o.compactions;
          acc.requests += o.requests;
          acc.rewrites += o.rewrites;
          if (o.parts) {
            acc.parts ??= {};
            for (const [k, v] of Object.entries(o.parts)) acc.parts[k] = (acc.parts[k] ?? 0) + v;
          }
          bySource.set(cfg.label, acc);
        }
      }
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
  const counts = (s: string) => trajectories.filter((t) => t.source === s).length;
  console.log(
    `trajectories: swe-agent ${counts("swe-agent")}, mini-swe-agent ${counts("mini-swe-agent")}, tau-bench ${counts("tau-bench")}${all ? "" : " (trial 0 of each task; --all for all 200 runs)"}`,
  );
  console.log(
    `window per trajectory: ${WINDOW_SHARE * 100}% of its largest uncompacted request, min ${MIN_WINDOW} (median ${windows.sort((a, b) => a - b)[windows.length >> 1]} tokens); summaries deterministic`,
  );
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const summary: string[] = [];
  for (const [source, rows] of totals) {
    const base = rows.get("none")!;
    const removable = base.tokens - base.floor;
    console.log(`\n${source}`);
    console.log(
      `floor (per request: system, tools, pinned user messages, newest call + results): ${base.floor.toLocaleString("en-US")} tokens = ${pct(base.floor / base.tokens)} of none; removable ${removable.toLocaleString("en-US")} = ${pct(removable / base.tokens)}`,
    );
    console.log(
      `${"strategy".padEnd(20) + "tokens sent".padStart(14) + "vs none".padStart(10) + "removed".padStart(14) + "of removable".padStart(14) + "evidence kept".padStart(20) + "w/o indexes".padStart(13) + "edits".padStart(8) + "rewrites".padStart(10)}  goal (≥85% of removable at ≥95%)`,
    );
    for (const [label, o] of rows) {
      const saved = 1 - o.tokens / base.tokens;
      const removed = base.tokens - o.tokens;
      const share = removable > 0 ? removed / removable : 0;
      const kept = o.evidence ? o.kept / o.evidence : 1;
      const strict = o.evidence ? o.strict / o.evidence : 1;
      const met = share >= 0.85 && kept >= 0.95 ? "met" : "not met";
      if (o.parts && (process.env.BREAKDOWN || label === "none"))
        console.log(
          `  ${label} breakdown: ${Object.entries(o.parts)
            .sort((a, b) => b[1] - a[1])
            .map(([k, v]) => `${k} ${pct(v / o.tokens)} (${pct(v / base.tokens)} of none)`)
            .join(", ")}`,
        );
      console.log(
        `${label.padEnd(20) + o.tokens.toLocaleString("en-US").padStart(14) + `${saved >= 0 ? "-" : "+"}${Math.abs(saved * 100).toFixed(1)}%`.padStart(10) + removed.toLocaleString("en-US").padStart(14) + pct(share).padStart(14) + `${pct(kept)} of ${o.evidence}`.padStart(20) + pct(strict).padStart(13) + String(o.compactions).padStart(8) + pct(o.rewrites / Math.max(1, o.requests)).padStart(10)}  ${label === "none" ? "" : met}`,
      );
      if (label !== "none" && source.includes(", half"))
        summary.push(
          `${source.padEnd(34)} ${label.padEnd(20)} ${pct(share).padStart(7)} of removable at ${pct(kept)} evidence (${pct(strict)} w/o indexes), ${pct(o.rewrites / Math.max(1, o.requests))} of requests rewrite history`,
        );
    }
  }
  console.log(`\nper source and half: removed share of removable tokens, evidence kept\n${summary.sort().join("\n")}`);
  if (process.env.MISSES)
    console.log(
      "misses (messages back from the end, uncompacted):",
      [...misses]
        .sort()
        .map(([k, v]) => `${k}: ${v}`)
        .join(", "),
    );
  console.log(`\n${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

await main();
