/**
 * Token counting in the first turn (issue 19, goal 1): the full-stack example's config (memory,
 * skills, MCP filesystem, compaction) with its real Anthropic model (200k window) against the
 * local wire server, first turn in a fresh process. Reports the time the kernel and plugins
 * spend in the token counter (outermost calls), whether the o200k ranks were loaded, and how
 * the request's size compares with the point where counts must be exact; then the same with
 * extra tools of long schemas (a large MCP catalog), and with a pasted log of real trajectory
 * text near the window. Each scenario runs in its own process,
 * so the ranks start unloaded, in one run.
 * Run: `pnpm bench first-turn` (or `node packages/cli/bench/first-turn-tokens.ts`).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { dataDir } from "../../../test/support/data.ts";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..", "..");

/** About `bytes` of real agent trajectory text from the shared evaluation data. */
function realText(bytes: number): string {
  const dir = join(dataDir(), "trajectories");
  let out = "";
  for (const sub of readdirSync(dir).sort()) {
    for (const f of readdirSync(join(dir, sub)).sort()) {
      out += readFileSync(join(dir, sub, f), "utf8");
      if (out.length >= bytes) return out.slice(0, bytes);
    }
  }
  return out;
}

if (process.argv[2] === "--child") {
  const extraTools = Number(process.argv[3]);
  const pastedBytes = Number(process.argv[4] ?? 0);
  const { defineTool } = await import("@keel/kernel");
  const { TokenCounter, utf8Length } = await import("@keel/tokens");
  const { startWireServer, echoResponder } = await import("@keel/wire-server");
  const { loadConfig } = await import("../src/load-config.ts");
  const { buildAgent } = await import("../src/build-agent.ts");
  // Time the counter's outermost calls (a count inside a count is not counted twice).
  let ms = 0;
  let depth = 0;
  const proto = TokenCounter.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
  for (const name of ["countRequest", "countText", "countMessage", "countMessages", "countTools"]) {
    const original = proto[name]!;
    proto[name] = function (this: unknown, ...args: unknown[]) {
      if (depth > 0) return original.apply(this, args);
      depth++;
      const t0 = performance.now();
      try {
        return original.apply(this, args);
      } finally {
        ms += performance.now() - t0;
        if (process.env.BENCH_DEBUG)
          console.error(
            name,
            (performance.now() - t0).toFixed(1),
            "ms",
            typeof args[0] === "string" ? args[0].length : "",
          );
        depth--;
      }
    };
  }
  const server = await startWireServer({ onEmpty: echoResponder });
  const home = mkdtempSync(join(tmpdir(), "keel-first-turn-"));
  try {
    const loaded = await loadConfig({ cwd: join(root, "examples", "full-stack") });
    if (extraTools) {
      const big = (i: number) =>
        defineTool({
          name: `catalog_tool_${i}`,
          description: `Tool ${i} of a large catalog. ${"It does a specific, carefully described thing with many options. ".repeat(12)}`,
          parameters: {
            type: "object",
            properties: Object.fromEntries(
              Array.from({ length: 12 }, (_, k) => [
                `option_${k}`,
                {
                  type: "string",
                  description: `Option ${k}: ${"what this option changes and when to use it. ".repeat(3)}`,
                },
              ]),
            ),
          },
          execute: () => "ok",
        });
      (loaded.config as { tools?: unknown[] }).tools = [
        ...((loaded.config as { tools?: unknown[] }).tools ?? []),
        ...Array.from({ length: extraTools }, (_, i) => big(i)),
      ];
    }
    const built = await buildAgent(loaded, {
      home,
      env: { ...process.env, ANTHROPIC_API_KEY: "bench", ANTHROPIC_BASE_URL: server.anthropicBaseURL, KEEL_HOME: home },
    });
    const agent = built.agent;
    const session = await agent.session();
    const t0 = performance.now();
    // A pasted log: real agent trajectories (varied text, not one schema repeated), cut to size.
    const pasted = pastedBytes ? `\n\nHere is the log:\n${realText(pastedBytes)}` : "";
    await session.run(`Remember that release day is Thursday, then tell me what is left in TODO.md${pasted}`);
    const turnMs = performance.now() - t0;
    const body = server.requests[0]?.body;
    const bytes = utf8Length(JSON.stringify({ system: body?.system, messages: body?.messages, tools: body?.tools }));
    const chars = JSON.stringify({ system: body?.system, messages: body?.messages, tools: body?.tools }).length;
    const window = agent.options.provider.contextWindow ?? 0;
    const exactAbove = window * (agent.limits.contextCeiling ?? 0.95) * 0.5;
    console.log(
      JSON.stringify({
        ms,
        loaded: new TokenCounter().loaded,
        turnMs,
        bytes,
        oldBound: chars * 3,
        exactAbove,
        tools: body?.tools?.length ?? 0,
      }),
    );
    await agent.close();
  } finally {
    await server.close();
    rmSync(home, { recursive: true, force: true });
  }
  process.exit(0);
}

console.log(
  "scenario                      tools  request bytes  old bound (3×len)  exact above  vocab loaded  counting ms  first turn ms",
);
const scenarios = [
  ["full-stack example", 0, 0],
  ["+ 20 large tools", 20, 0],
  ["+ 60 large tools", 60, 0],
  ["+ 200 large tools", 200, 0],
  ["+ 300 KB pasted log", 0, 300_000],
  ["+ 560 KB pasted log", 0, 560_000],
] as const;
for (const [label, extra, pasted] of scenarios) {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--child", String(extra), String(pasted)], {
    encoding: "utf8",
    cwd: root,
  });
  const line = r.stdout.trim().split("\n").at(-1) ?? "";
  let o: {
    ms: number;
    loaded: boolean;
    turnMs: number;
    bytes: number;
    oldBound: number;
    exactAbove: number;
    tools: number;
  };
  try {
    o = JSON.parse(line);
  } catch {
    console.log(`${label}: failed\n${r.stderr.slice(-2000)}`);
    continue;
  }
  console.log(
    `${label.padEnd(30)}${String(o.tools).padStart(5)}${String(o.bytes).padStart(15)}${String(o.oldBound).padStart(19)}${String(Math.round(o.exactAbove)).padStart(13)}${String(o.loaded).padStart(14)}${o.ms.toFixed(1).padStart(13)}${o.turnMs.toFixed(0).padStart(15)}`,
  );
}
