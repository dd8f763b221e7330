/**
 * LiveMCPBench curation recall: build the 527-tool inventory from tools.json (no live
 * servers) and measure, per task, the share of the annotated gold tools inside the curated
 * set, from the task text alone and with the annotated plan steps as tool_search queries;
 * plus the tokens of tool definitions sent versus sending every tool.
 *
 * The adaptive visible set (options `adaptive`, `descriptionChars`, `compactDescriptionChars`)
 * is measured against the old fixed top 15 sent as the servers describe their tools: tokens
 * are those of the definitions the plugin would send (presentTool). Its settings are chosen on
 * half A of the tasks (a hash of the task id) and reported on half B; the curve lists every
 * grid point on both halves.
 *
 * Gold matching: a gold name matches every inventory tool with that exact tool name on any
 * server (13 names exist on several servers); failing that, names compared lowercased with
 * `-`/`_` unified. Gold names matching no tool are left out of the denominator and counted.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { ToolSchema } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import { dataDir } from "../../../test/support/data.ts";
import { assignToolNames, identityKey } from "../src/names.ts";
import { normalizeInputSchema } from "../src/schema.ts";
import { createRanker, type CatalogEntry, type KeelRankingOptions, type RankingMethod } from "../src/rank.ts";
import { curate, inventoryHash, searchTools, type CutOptions } from "../src/curation.ts";
import { presentTool, type ToolForm } from "../src/present.ts";
import { TOOL_SEARCH_SCHEMA } from "../src/tool-search.ts";

const K = 15;
const STEP_HITS = 3;
const dir = join(dataDir(), "mcp", "livemcpbench");

interface RawServer {
  name: string;
  description?: string;
  tools: Record<string, { tools: Array<{ name: string; description?: string; inputSchema?: unknown }> }>;
}
interface RawTask {
  task_id: string;
  Question: string;
  "Annotator Metadata": { Steps: string; Tools: string };
}

const servers = JSON.parse(readFileSync(join(dir, "tools.json"), "utf8")) as RawServer[];
const tasks = JSON.parse(readFileSync(join(dir, "all_annotations.json"), "utf8")) as RawTask[];

const raw: Array<{
  server: string;
  tool: string;
  description: string;
  serverDescription: string;
  inputSchema: unknown;
}> = [];
for (const s of servers)
  for (const [key, v] of Object.entries(s.tools))
    for (const t of v.tools)
      raw.push({
        server: key,
        tool: t.name,
        description: t.description ?? "",
        serverDescription: s.description ?? "",
        inputSchema: t.inputSchema,
      });
const names = assignToolNames(raw);
const catalog: CatalogEntry[] = raw.map((r) => ({
  name: names.get(identityKey(r))!,
  server: r.server,
  tool: r.tool,
  description: r.description,
  serverDescription: r.serverDescription,
}));
const schemas = new Map<string, ToolSchema>(
  raw.map((r, i) => [
    catalog[i]!.name,
    { name: catalog[i]!.name, description: r.description || r.tool, parameters: normalizeInputSchema(r.inputSchema) },
  ]),
);
const toolOf = new Map(catalog.map((e) => [e.name, e.tool]));
const hash = inventoryHash([...schemas.values()]);

const lines = (text: string) =>
  text
    .split(/\n+/)
    .map((l) => l.replace(/^\s*\d+\s*[.)、]\s*/, "").trim())
    .filter(Boolean);
const norm = (n: string) => n.toLowerCase().replace(/-/g, "_");
let unmatched = 0;
let goldTotal = 0;
const gold = tasks.map((t) => {
  const sets: string[][] = [];
  for (const g of lines(t["Annotator Metadata"].Tools)) {
    goldTotal++;
    let hits = catalog.filter((e) => e.tool === g).map((e) => e.name);
    if (!hits.length) hits = catalog.filter((e) => norm(e.tool) === norm(g)).map((e) => e.name);
    if (hits.length) sets.push(hits);
    else unmatched++;
  }
  return sets;
});

const counter = defaultTokenCounter();
const allTokens = counter.countTools([...schemas.values()]);
const searchTokens = counter.countTools([TOOL_SEARCH_SCHEMA]);

function recall(set: ReadonlySet<string>, g: string[][]): number {
  return g.filter((alts) => alts.some((n) => set.has(n))).length / g.length;
}

interface Row {
  label: string;
  text: number;
  plan: number;
  steps: number;
  tokens: number;
  planTokens: number;
  full: number;
  n: number;
}
function evaluate(
  label: string,
  method: RankingMethod,
  keel: Partial<KeelRankingOptions> = {},
  only?: (i: number) => boolean,
): Row {
  const ranker = createRanker(catalog, method, keel);
  let rText = 0,
    rPlan = 0,
    rSteps = 0,
    tok = 0,
    planTok = 0,
    full = 0,
    n = 0;
  for (const [i, t] of tasks.entries()) {
    const g = gold[i]!;
    if (!g.length || (only && !only(i))) continue;
    n++;
    const { visible } = curate({
      ranker,
      inventoryHash: hash,
      query: t.Question,
      topK: K,
      hardCap: 128,
      fixedCount: 1,
    });
    const set = new Set(visible);
    rText += recall(set, g);
    if (recall(set, g) === 1) full++;
    tok += counter.countTools(visible.map((v) => schemas.get(v)!)) + searchTokens;
    const planSet = new Set(visible);
    const stepSet = new Set<string>();
    for (const step of lines(t["Annotator Metadata"].Steps))
      for (const h of searchTools(ranker, step, STEP_HITS)) planSet.add(h.name), stepSet.add(h.name);
    rSteps += recall(stepSet, g);
    rPlan += recall(planSet, g);
    planTok += counter.countTools([...planSet].map((v) => schemas.get(v)!)) + searchTokens;
  }
  return {
    label,
    text: rText / n,
    plan: rPlan / n,
    steps: rSteps / n,
    tokens: tok / n,
    planTokens: planTok / n,
    full: full / n,
    n,
  };
}

interface Adaptive {
  cut?: CutOptions & { searchRatio: number };
  descriptionChars: number;
  compactDescriptionChars: number;
  raw?: boolean;
}
const DEFAULTS: Adaptive = {
  cut: { minK: 8, ratio: 0.3, compactBelow: 0.9, searchRatio: 0.7 },
  descriptionChars: 400,
  compactDescriptionChars: 160,
};
const BEFORE: Adaptive = { descriptionChars: Infinity, compactDescriptionChars: Infinity, raw: true };
const tokenCache = new Map<string, number>();
function defTokens(name: string, form: ToolForm, a: Adaptive): number {
  const key = `${name}\u0000${form}\u0000${a.raw ? "raw" : `${a.descriptionChars}/${a.compactDescriptionChars}`}`;
  let n = tokenCache.get(key);
  if (n === undefined) {
    const s = schemas.get(name)!;
    const shown = a.raw
      ? s
      : {
          name,
          ...presentTool(
            { tool: toolOf.get(name)!, description: s.description, parameters: s.parameters as never },
            form,
            a,
          ),
        };
    tokenCache.set(key, (n = counter.countTools([shown])));
  }
  return n;
}
interface Point {
  text: number;
  plan: number;
  tokens: number;
  planTokens: number;
  n: number;
  visible: number;
}
const adaptiveRanker = createRanker(catalog, "keel");
/** Recall and definition tokens of the plugin's visible set (and with plan steps as tool_search calls, revealed in full form). */
function adaptive(a: Adaptive, only?: (i: number) => boolean): Point {
  let rText = 0,
    rPlan = 0,
    tok = 0,
    planTok = 0,
    n = 0,
    vis = 0;
  for (const [i, t] of tasks.entries()) {
    const g = gold[i]!;
    if (!g.length || (only && !only(i))) continue;
    n++;
    const r = curate({
      ranker: adaptiveRanker,
      inventoryHash: hash,
      query: t.Question,
      topK: K,
      hardCap: 128,
      fixedCount: 1,
      ...(a.cut ? { cut: a.cut } : {}),
    });
    const compact = new Set(r.keepSet.compact ?? []);
    const cost = (v: string) => defTokens(v, compact.has(v) ? "compact" : "full", a);
    vis += r.visible.length;
    rText += recall(new Set(r.visible), g);
    tok += r.visible.reduce((sum, v) => sum + cost(v), 0) + searchTokens;
    const planSet = new Set(r.visible);
    for (const step of lines(t["Annotator Metadata"].Steps))
      for (const h of searchTools(adaptiveRanker, step, STEP_HITS, undefined, a.cut?.searchRatio ?? 0))
        planSet.add(h.name);
    rPlan += recall(planSet, g);
    planTok += [...planSet].reduce((sum, v) => sum + cost(v), 0) + searchTokens;
  }
  return { text: rText / n, plan: rPlan / n, tokens: tok / n, planTokens: planTok / n, n, visible: vis / n };
}
const half = (i: number) => parseInt(tasks[i]!.task_id.replace(/[^0-9a-f]/g, "").slice(0, 8), 16) % 2;
const A = (i: number) => half(i) === 0;
const B = (i: number) => half(i) === 1;

const rows = [
  evaluate("reference (MECHANICS.md BM25)", "reference"),
  evaluate("keel (defaults)", "keel"),
  evaluate("keel without server relevance", "keel", { serverWeight: 0 }),
  evaluate("keel without intent words", "keel", { intents: false }),
  evaluate("keel, name tokens x1", "keel", { nameWeight: 1 }),
  evaluate("keel + pseudo-relevance feedback (8 terms)", "keel", { expansionTerms: 8 }),
  evaluate("keel + server diversity (decay 0.85)", "keel", { serverDecay: 0.85 }),
];

console.log(
  `LiveMCPBench: ${servers.length} servers, ${catalog.length} tools, ${tasks.length} tasks (${rows[0]!.n} with a gold tool found in the inventory); gold tool mentions ${goldTotal}, ${unmatched} match no inventory tool (left out); K=${K}; plan: top ${STEP_HITS} tool_search hits per annotated step added to the K set`,
);
console.log(
  `all ${catalog.length} tool definitions: ${allTokens} tokens (o200k, kernel TokenCounter); tool_search itself: ${searchTokens}`,
);
console.log("");
console.log(
  "| ranking | recall, task text | tasks fully covered | recall, + plan steps | plan steps alone | def. tokens (text) | saved | def. tokens (+ plan) | saved |",
);
console.log("|---|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  console.log(
    `| ${r.label} | ${r.text.toFixed(3)} | ${(r.full * 100).toFixed(0)}% | ${r.plan.toFixed(3)} | ${r.steps.toFixed(3)} | ${r.tokens.toFixed(0)} | ${((1 - r.tokens / allTokens) * 100).toFixed(1)}% | ${r.planTokens.toFixed(0)} | ${((1 - r.planTokens / allTokens) * 100).toFixed(1)}% |`,
  );
}

// Held-out check: the defaults were chosen on all 95 tasks. Here each half of the tasks gets the
// configuration (from a small grid) that is best on the other half, and is scored with it.
const grid: Array<Partial<KeelRankingOptions>> = [];
for (const serverWeight of [0, 0.5, 0.8])
  for (const intents of [false, true])
    for (const expansionTerms of [0, 8])
      for (const nameWeight of [1, 2]) grid.push({ serverWeight, intents, expansionTerms, nameWeight });
const fold = (i: number) => parseInt(tasks[i]!.task_id.replace(/[^0-9a-f]/g, "").slice(0, 6), 16) % 2;
let heldText = 0,
  heldPlan = 0,
  heldN = 0;
const picks: string[] = [];
for (const f of [0, 1]) {
  let best = grid[0]!,
    bestScore = -1;
  for (const g of grid) {
    const r = evaluate("", "keel", g, (i) => fold(i) !== f);
    if (r.text + r.plan > bestScore) (bestScore = r.text + r.plan), (best = g);
  }
  const r = evaluate("", "keel", best, (i) => fold(i) === f);
  heldText += r.text * r.n;
  heldPlan += r.plan * r.n;
  heldN += r.n;
  picks.push(JSON.stringify(best));
}
console.log("");
console.log(
  `held-out (2-fold, config picked on the other half from ${grid.length} grid points): recall ${(heldText / heldN).toFixed(3)} from task text, ${(heldPlan / heldN).toFixed(3)} with plan steps; picks ${picks.join(" / ")}`,
);

// The adaptive visible set.
const saved = (p: Point, base: Point) =>
  `${((1 - p.tokens / base.tokens) * 100).toFixed(1)}% / ${((1 - p.planTokens / base.planTokens) * 100).toFixed(1)}%`;
const row = (label: string, p: Point, base: Point) =>
  `| ${label} | ${p.visible.toFixed(1)} | ${p.text.toFixed(3)} | ${p.plan.toFixed(3)} | ${p.tokens.toFixed(0)} | ${p.planTokens.toFixed(0)} | ${saved(p, base)} |`;
const head =
  "| visible set | tools shown | recall, task text | recall, + plan steps | def. tokens (text) | def. tokens (+ plan) | fewer tokens (text / + plan) |\n|---|---|---|---|---|---|---|";
const grid2: Adaptive[] = [];
for (const ratio of [0, 0.2, 0.3, 0.4, 0.5])
  for (const compactBelow of [0, 0.7, 0.8, 0.9])
    for (const searchRatio of [0, 0.7])
      grid2.push({
        cut: { minK: 8, ratio, compactBelow, searchRatio },
        descriptionChars: 400,
        compactDescriptionChars: 160,
      });
const baseA = adaptive(BEFORE, A),
  baseB = adaptive(BEFORE, B),
  baseAll = adaptive(BEFORE);
// Half A: the fewest tokens (text + plan) at recall at least the old set's, on both measures.
let pick = DEFAULTS,
  pickCost = Infinity;
for (const g of grid2) {
  const p = adaptive(g, A);
  if (p.text >= baseA.text && p.plan >= baseA.plan && p.tokens + p.planTokens < pickCost)
    (pick = g), (pickCost = p.tokens + p.planTokens);
}
console.log("");
console.log(
  `Adaptive visible set (all ${baseAll.n} tasks; half A ${baseA.n}, half B ${baseB.n}). Tokens: the definitions the plugin sends, plus tool_search.`,
);
console.log(head);
console.log(row("before: top 15, definitions as sent by the servers", baseAll, baseAll));
console.log(
  row(
    "top 15, tidied definitions, descriptions ≤ 400",
    adaptive({ descriptionChars: 400, compactDescriptionChars: 400 }),
    baseAll,
  ),
);
console.log(row("adaptive, defaults", adaptive(DEFAULTS), baseAll));
console.log("");
console.log(
  `Held out: settings picked on half A (fewest tokens at recall ≥ the old set's on A): ${JSON.stringify(pick.cut)}; defaults: ${JSON.stringify(DEFAULTS.cut)}`,
);
console.log(head);
console.log(row("half B, before", baseB, baseB));
console.log(row("half B, picked on A", adaptive(pick, B), baseB));
console.log(row("half B, defaults", adaptive(DEFAULTS, B), baseB));
console.log(row("half A, before", baseA, baseA));
console.log(row("half A, defaults", adaptive(DEFAULTS, A), baseA));
if (process.env.CURVE) {
  console.log("");
  console.log("Curve (minK 8; descriptions ≤ 400, compact ≤ 160): ratio, compactBelow, searchRatio → half A | half B");
  for (const g of grid2) {
    const a = adaptive(g, A),
      b = adaptive(g, B);
    console.log(
      `${g.cut!.ratio} ${g.cut!.compactBelow} ${g.cut!.searchRatio} | A ${a.text.toFixed(3)} ${a.plan.toFixed(3)} ${saved(a, baseA)} | B ${b.text.toFixed(3)} ${b.plan.toFixed(3)} ${saved(b, baseB)}`,
    );
  }
}
