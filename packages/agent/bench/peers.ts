/**
 * Keel's turn against its peers (issue 19, goal 4): the same turn (three parallel tool calls,
 * then an answer; scripted models, no I/O) in a hand-written loop, pi-agent-core's agentLoop,
 * the Vercel AI SDK's generateText and Keel (no plugins, a session per turn or 50 turns a
 * session; 5 no-op plugins on every phase;
 * the durable SQLite store, a session per turn or 10 turns per session). Every entry runs in
 * its own process, the rounds interleaved, so the ratios below are measured in one run.
 * The peers are pinned in ./peers/package.json and installed there on first use (npm ci),
 * never by the workspace. `pnpm bench peers`; BENCH_ROUNDS (default 3), BENCH_TURNS (2000).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const dir = join(dirname(fileURLToPath(import.meta.url)), "peers");
if (!existsSync(join(dir, "node_modules", "@earendil-works", "pi-agent-core"))) {
  console.log("installing the pinned peers into packages/agent/bench/peers (npm ci, once) …");
  const npm = spawnSync("npm", ["ci", "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: dir, stdio: "inherit" });
  if (npm.status !== 0) {
    console.log("could not install the peers (is the npm registry reachable?); nothing was measured.");
    process.exit(0);
  }
}

const entries = [
  { id: "hand", file: "hand.mjs", args: [] },
  { id: "floor", file: "floor.mjs", args: [] },
  { id: "pi", file: "pi.mjs", args: [] },
  { id: "ai-sdk", file: "ai-sdk.mjs", args: [] },
  { id: "bare", file: "keel.mjs", args: ["bare"] },
  { id: "bare-50", file: "keel.mjs", args: ["bare-50"] },
  { id: "plugins", file: "keel.mjs", args: ["plugins"] },
  { id: "sqlite", file: "keel.mjs", args: ["sqlite"] },
  { id: "sqlite-10", file: "keel.mjs", args: ["sqlite-10"] },
] as const;
type Id = (typeof entries)[number]["id"];
interface Row {
  name: string;
  median_us: number;
  p90_us: number;
  retained_bytes_per_turn: number;
}

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const runs = new Map<Id, Row[]>(entries.map((e) => [e.id, []]));
for (let r = 0; r < rounds; r++) {
  for (const e of entries) {
    const child = spawnSync(process.execPath, ["--expose-gc", join(dir, e.file), ...e.args], {
      cwd: dir,
      encoding: "utf8",
    });
    const line = child.stdout.trim().split("\n").pop() ?? "";
    if (child.status !== 0 || !line.startsWith("{")) {
      console.error(`${e.id} failed (exit ${child.status}):\n${child.stderr}`);
      process.exit(1);
    }
    runs.get(e.id)!.push(JSON.parse(line) as Row);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const med = (id: Id) => median(runs.get(id)!.map((x) => x.median_us));
console.log(
  `\n${rounds} interleaved rounds, ${process.env.BENCH_TURNS ?? 2000} turns each (after 200 warm-up turns); medians of the per-run medians\n`,
);
console.log("| entry | µs per turn (median) | runs | p90 µs | retained heap per turn |");
console.log("|---|---:|---|---:|---:|");
for (const e of entries) {
  const rs = runs.get(e.id)!;
  const kb = median(rs.map((x) => x.retained_bytes_per_turn)) / 1024;
  console.log(
    `| ${rs[0]!.name} | ${med(e.id).toFixed(1)} | ${rs.map((x) => x.median_us.toFixed(0)).join(" / ")} | ${median(rs.map((x) => x.p90_us)).toFixed(0)} | ${kb.toFixed(2)} KB |`,
  );
}
const ratio = (a: Id, b: Id) => (med(a) / med(b)).toFixed(2);
console.log(`
Ratios from this run (issue 31 goal 6):
  keel with 5 no-op plugins / pi agentLoop: ${ratio("plugins", "pi")} (goal ≤ 1.5)
  keel without plugins / pi agentLoop:      ${ratio("bare", "pi")} (goal ≤ 1); in sessions of 50 turns: ${ratio("bare-50", "pi")}
  keel durable SQLite / keel in memory:     ${ratio("sqlite", "bare")} a session per turn, ${ratio("sqlite-10", "bare")} with 10 turns a session
  what SQLite adds to keel / what it adds to the floor: ${((med("sqlite") - med("bare")) / (med("floor") - med("hand"))).toFixed(2)} (goal ≤ 1.5)
  (the in-memory store keeps every session's log by design; on SQLite the heap per turn is what the kernel keeps)`);
