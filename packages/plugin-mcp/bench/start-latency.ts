/**
 * Start latency: session spawn → first model request, with five real MCP servers from npm
 * (the held-out check of issue 19, goal 3): gitlab, notion, desktop-commander, everything,
 * filesystem.
 *
 * The servers are not dependencies of the repository: they are installed once, with npm,
 * into a cache dir this benchmark owns (<tmpdir>/keel-mcp-bench, or $KEEL_MCP_BENCH_DIR),
 * and run as `node <bin>`. If the install fails the benchmark says so and exits 0.
 *
 * Each run creates an agent (scripted provider, no network model) with all five servers and
 * measures from just before `agent.session()` (which spawns them) to the moment the first
 * request reaches the provider. "new" is the default (`startGraceMs` 500); "old" sets
 * `startGraceMs` past every connect timeout, i.e. the first turn waits for every server, as
 * before. Runs alternate old/new; medians are printed. Each server's ready time (spawn →
 * tools listed) comes from a third pass per run that only starts an McpPool with the same
 * servers, and, in new runs where some server joined late, from the plugin's own
 * `mcp.servers_started` diagnostic (then "new − fastest" is measured within that run). Gitlab and notion get fake tokens: they list their tools without calling out.
 *
 * Env: BENCH_RUNS (default 3 per mode), KEEL_MCP_BENCH_DIR, BENCH_LAUNCH=npm-exec to start each
 * server through `npm exec --offline` (from the same cache dir) the way agent configs usually
 * do (`npx …`), which adds npm's own start-up to every server.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createAgent, type AgentEvent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { mcp, McpOptionsSchema, McpPool, type McpOptions } from "../src/index.ts";

const RUNS = Math.max(1, Number(process.env.BENCH_RUNS ?? 3));
const dir = process.env.KEEL_MCP_BENCH_DIR ?? join(tmpdir(), "keel-mcp-bench");
const PACKAGES = {
  gitlab: { pkg: "@modelcontextprotocol/server-gitlab", bin: "mcp-server-gitlab" },
  notion: { pkg: "@notionhq/notion-mcp-server", bin: "notion-mcp-server" },
  "desktop-commander": { pkg: "@wonderwhy-er/desktop-commander", bin: "desktop-commander" },
  everything: { pkg: "@modelcontextprotocol/server-everything", bin: "mcp-server-everything" },
  filesystem: { pkg: "@modelcontextprotocol/server-filesystem", bin: "mcp-server-filesystem" },
} as const;
type Key = keyof typeof PACKAGES;

function binOf(pkg: string, bin: string): string | undefined {
  const manifest = join(dir, "node_modules", pkg, "package.json");
  if (!existsSync(manifest)) return undefined;
  const p = JSON.parse(readFileSync(manifest, "utf8")) as { bin?: string | Record<string, string> };
  const rel = typeof p.bin === "string" ? p.bin : p.bin?.[bin];
  return rel ? join(dirname(manifest), rel) : undefined;
}

function install(): Record<Key, string> | undefined {
  const missing = Object.values(PACKAGES).filter((p) => !binOf(p.pkg, p.bin));
  if (missing.length) {
    mkdirSync(dir, { recursive: true });
    console.log(`installing ${missing.map((p) => p.pkg).join(", ")} into ${dir} (once) …`);
    const npm = process.platform === "win32" ? "npm.cmd" : "npm";
    const r = spawnSync(
      npm,
      ["install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", ...missing.map((p) => p.pkg)],
      { stdio: ["ignore", "inherit", "inherit"], timeout: 600_000 },
    );
    if (r.status !== 0) {
      console.log(
        `start-latency: skipped — npm install into ${dir} failed (${r.error?.message ?? `exit ${r.status}`}); the benchmark needs the five servers from the npm registry.`,
      );
      return undefined;
    }
  }
  const out = {} as Record<Key, string>;
  for (const [k, p] of Object.entries(PACKAGES) as Array<[Key, (typeof PACKAGES)[Key]]>) {
    const bin = binOf(p.pkg, p.bin);
    if (!bin) {
      console.log(`start-latency: skipped — ${p.pkg} installed without its "${p.bin}" bin.`);
      return undefined;
    }
    out[k] = bin;
  }
  return out;
}

const bins = install();
if (!bins) process.exit(0);

const root = mkdtempSync(join(tmpdir(), "keel-mcp-bench-fs-"));
const home = mkdtempSync(join(tmpdir(), "keel-mcp-bench-home-"));
const viaNpm = process.env.BENCH_LAUNCH === "npm-exec";
const node = (key: Key, args: string[] = [], env: Record<string, string> = {}) =>
  viaNpm
    ? {
        command: process.platform === "win32" ? "npm.cmd" : "npm",
        args: ["exec", "--prefix", dir, "--offline", "--", PACKAGES[key].bin, ...args],
        env: { HOME: home, ...env },
      }
    : { command: process.execPath, args: [bins[key], ...args], env: { HOME: home, ...env } };
console.log(
  `servers started with ${viaNpm ? "npm exec --offline (cache dir)" : "node <bin>"}; ${RUNS} run(s) per mode`,
);
const servers: McpOptions["servers"] = {
  gitlab: node("gitlab", [], {
    GITLAB_PERSONAL_ACCESS_TOKEN: "glpat-fake-token-for-bench",
    GITLAB_API_URL: "https://gitlab.invalid/api/v4",
  }),
  notion: node("notion", [], {
    NOTION_TOKEN: "ntn_fake_token_for_bench",
    OPENAPI_MCP_HEADERS: JSON.stringify({
      Authorization: "Bearer ntn_fake_token_for_bench",
      "Notion-Version": "2022-06-28",
    }),
  }),
  "desktop-commander": node("desktop-commander", [], { DISABLE_TELEMETRY: "true" }),
  everything: node("everything"),
  filesystem: node("filesystem", [root]),
};

interface Run {
  mode: "old" | "new";
  firstRequestMs: number;
  mcpTools: number;
  ready?: Record<string, number | "failed">;
}

async function run(mode: "old" | "new"): Promise<Run> {
  const provider = scriptedProvider([{ text: "ok" }]);
  let sentAt: number | undefined;
  const stream = provider.stream.bind(provider);
  provider.stream = (request, o) => ((sentAt ??= performance.now()), stream(request, o));
  const options: McpOptions = {
    servers,
    auditPath: false,
    connectTimeoutMs: 60_000,
    ...(mode === "old" ? { startGraceMs: 600_000 } : {}),
  };
  const agent = await createAgent({ provider, store: new MemorySessionStore(), plugins: [mcp(options)] });
  const events: AgentEvent[] = [];
  agent.subscribe((e) => void events.push(e));
  const t0 = performance.now();
  try {
    const session = await agent.session();
    await session.run("list the files in the project directory");
    const firstRequestMs = Math.round(sentAt! - t0);
    const mcpTools = provider.requests[0]!.tools.filter((t) => t.name.startsWith("mcp__")).length;
    let ready: Run["ready"];
    if (mode === "new") {
      // The plugin reports every server's start time once the last one settled (only when some joined late).
      const end = performance.now() + 90_000;
      const started = () => events.find((e) => e.type === "diagnostic" && e.code === "mcp.servers_started");
      // Every server in the first request's server list: none was late, no diagnostic comes.
      const listed =
        /Connected MCP servers \(tools\): ([^.]*)\./.exec(provider.requests[0]!.system ?? "")?.[1]?.split(", ")
          .length ?? 0;
      while (!started() && listed < Object.keys(PACKAGES).length && performance.now() < end)
        await new Promise((r) => setTimeout(r, 50));
      const d = started() as Extract<AgentEvent, { type: "diagnostic" }> | undefined;
      const list = (d?.data as { servers?: Array<{ server: string; ok: boolean; durationMs: number }> } | undefined)
        ?.servers;
      if (list) ready = Object.fromEntries(list.map((s) => [s.server, s.ok ? s.durationMs : "failed"]));
    }
    const failed = events.filter((e) => e.type === "diagnostic" && e.code === "KEEL_MCP_SERVER_START_FAILED");
    for (const f of failed) if (f.type === "diagnostic") console.log(`  (${mode}) ${f.message.slice(0, 300)}`);
    return { mode, firstRequestMs, mcpTools, ...(ready ? { ready } : {}) };
  } finally {
    await agent.close();
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : Math.round((s[m - 1]! + s[m]!) / 2);
};

/** Only the pool: every server's spawn → ready time. */
async function poolRun(): Promise<Record<string, number | "failed">> {
  const pool = new McpPool(McpOptionsSchema.parse({ servers }).servers, {
    clientName: "keel-bench",
    clientVersion: "0",
    connectTimeoutMs: 60_000,
    restart: { maxAttempts: 0, baseDelayMs: 500, maxDelayMs: 500 },
  });
  try {
    return Object.fromEntries((await pool.start()).map((r) => [r.server, r.ok ? r.durationMs : "failed"]));
  } finally {
    await pool.close();
  }
}

const runs: Run[] = [];
const pools: Array<Record<string, number | "failed">> = [];
try {
  for (let i = 0; i < RUNS; i++) {
    const p = await poolRun();
    pools.push(p);
    console.log(
      `run ${i + 1} pool: ready ${Object.entries(p)
        .map(([k, v]) => `${k} ${v}${v === "failed" ? "" : " ms"}`)
        .join(", ")}`,
    );
    for (const mode of i % 2 ? (["new", "old"] as const) : (["old", "new"] as const)) {
      const r = await run(mode);
      runs.push(r);
      console.log(
        `run ${i + 1} ${mode}: first request after ${r.firstRequestMs} ms with ${r.mcpTools} MCP tools advertised${
          r.ready
            ? `; ready: ${Object.entries(r.ready)
                .map(([k, v]) => `${k} ${v}${v === "failed" ? "" : " ms"}`)
                .join(", ")}`
            : ""
        }`,
      );
    }
  }
} finally {
  rmSync(root, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
}

const olds = runs.filter((r) => r.mode === "old").map((r) => r.firstRequestMs);
const news = runs.filter((r) => r.mode === "new");
const readies = [...pools, ...news.flatMap((r) => (r.ready ? [r.ready] : []))];
console.log(
  `\nmedians over ${RUNS} run(s) per mode (ms; ready = spawn → tools listed, from the pool passes and the new runs that had late servers, ${readies.length} samples):`,
);
console.log("| server | ready (median) | min | max |\n|---|---|---|---|");
for (const k of Object.keys(PACKAGES)) {
  const xs = readies.map((r) => r[k]).filter((v): v is number => typeof v === "number");
  const failed = readies.filter((r) => r[k] === "failed").length;
  console.log(
    `| ${k} | ${xs.length ? median(xs) : "n/a"}${failed ? ` (${failed} failed)` : ""} | ${xs.length ? Math.min(...xs) : "n/a"} | ${xs.length ? Math.max(...xs) : "n/a"} |`,
  );
}
const nums = (r: Record<string, number | "failed">) =>
  Object.values(r).filter((v): v is number => typeof v === "number");
const fastest = readies.map((r) => Math.min(...nums(r))).filter((v) => Number.isFinite(v));
const slowest = readies.map((r) => Math.max(...nums(r))).filter((v) => Number.isFinite(v));
const gaps = news
  .filter((r) => r.ready)
  .map(
    (r) => r.firstRequestMs - Math.min(...Object.values(r.ready!).filter((v): v is number => typeof v === "number")),
  );
const mOld = median(olds);
const mNew = median(news.map((r) => r.firstRequestMs));
console.log(`\n| measure | median ms |\n|---|---|`);
console.log(`| fastest server ready | ${fastest.length ? median(fastest) : "n/a"} |`);
console.log(`| slowest server ready (= the old wait, computed) | ${slowest.length ? median(slowest) : "n/a"} |`);
console.log(`| first request, old (wait for all) | ${mOld} |`);
console.log(`| first request, new (startGraceMs 500) | ${mNew} |`);
console.log(
  `| new first request − fastest ready (same run, ${gaps.length} run(s) with a late server) | ${gaps.length ? `${median(gaps)} (max ${Math.max(...gaps)})` : "n/a: every server was ready within the grace in every new run"} |`,
);
console.log(
  `\nratio old / new: ${(mOld / mNew).toFixed(2)}x; MCP tools in the first request: old ${median(runs.filter((r) => r.mode === "old").map((r) => r.mcpTools))}, new ${median(news.map((r) => r.mcpTools))}`,
);
