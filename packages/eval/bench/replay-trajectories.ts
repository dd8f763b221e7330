/**
 * Replay of the shared trajectories (issue 33's measure): every SWE-agent, mini-swe-agent and
 * tau-bench trajectory is recorded as a Keel session with the full-stack example's plugins
 * (memory, skills, compaction with TACO, and with --mcp the MCP filesystem server), then
 * replayed with the same plugins. All of them must replay identically. Prints how many did, the
 * requests compared, the calls whose recorded output went through a rewriter again, and the
 * replay's cost per request.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { KeelPlugin } from "@keel/kernel";
import compaction from "@keel/plugin-compaction";
import mcp from "@keel/plugin-mcp";
import memory from "@keel/plugin-memory";
import skills from "@keel/plugin-skills";
import { dataDir } from "../../../test/support/data.ts";
import { allTrajectories, recordTrajectory, replayTrajectory, scratchHome } from "./support/trajectory-sessions.ts";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const fullStack = join(repo, "examples", "full-stack");
const withMcp = process.argv.includes("--mcp");
const fsServer = createRequire(join(fullStack, "agent.config.ts")).resolve(
  "@modelcontextprotocol/server-filesystem/dist/index.js",
);

const plugins = (): KeelPlugin[] => [
  memory({ namespace: "team" }),
  skills({ dirs: [join(fullStack, "skills")] }),
  ...(withMcp
    ? [
        mcp({
          topK: 5,
          servers: {
            fs: {
              command: process.execPath,
              args: [fsServer, join(fullStack, "project")],
              cwd: join(fullStack, "project"),
            },
          },
        }),
      ]
    : []),
  compaction(),
];

const trajectories = allTrajectories(dataDir());
const bySource = new Map<string, { n: number; identical: number }>();
let requests = 0;
let rewritten = 0;
let recordMs = 0;
let replayMs = 0;
const failures: string[] = [];
for (const t of trajectories) {
  const a = scratchHome();
  const b = scratchHome();
  try {
    const t0 = performance.now();
    const events = await recordTrajectory(t, plugins, a.home);
    const t1 = performance.now();
    const report = await replayTrajectory(t, events, plugins, b.home);
    replayMs += performance.now() - t1;
    recordMs += t1 - t0;
    requests += report.requests.length;
    rewritten += events.filter((e) => e.type === "tool.completed" && e.raw).length;
    const s = bySource.get(t.source) ?? { n: 0, identical: 0 };
    s.n++;
    if (report.identical) s.identical++;
    else
      failures.push(
        `${t.source} ${t.name}: first divergence at request ${report.firstDivergence ?? "-"}; notes ${report.notes.join(" | ") || "none"}; turns ${report.turns.filter((x) => !x.same).length} differ; tool changes ${report.toolChanges.length}`,
      );
    bySource.set(t.source, s);
  } finally {
    a.drop();
    b.drop();
  }
}
const total = [...bySource.values()].reduce((x, s) => x + s.n, 0);
const same = [...bySource.values()].reduce((x, s) => x + s.identical, 0);
console.log(`plugins: memory, skills, compaction${withMcp ? ", mcp (filesystem server)" : ""}`);
for (const [source, s] of bySource) console.log(`${source.padEnd(15)} ${s.identical}/${s.n} identical`);
console.log(
  `all             ${same}/${total} identical; ${requests} requests compared; ${rewritten} recorded results rewritten by a plugin (replayed from their raw output)`,
);
console.log(
  `record ${(recordMs / 1000).toFixed(1)} s, replay ${(replayMs / 1000).toFixed(1)} s (${((replayMs * 1000) / Math.max(1, requests)).toFixed(0)} µs per request, agent setup included)`,
);
for (const f of failures.slice(0, 20)) console.log(`  DIFFERS ${f}`);
process.exitCode = same === total ? 0 : 1;
