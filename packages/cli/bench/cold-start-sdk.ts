/**
 * Cold start against its floor (issue 19, goal 2): `keel run` with the full-stack example's
 * config without MCP (memory, skills, compaction; a TypeScript config), from spawn to the first
 * provider request at a local Anthropic-wire server, against a script that only imports the
 * Anthropic SDK and streams the very request Keel sent. Interleaved runs in one process;
 * reports medians and the ratio (goal ≤ 1.3). `pnpm bench cold-start-sdk`; RUNS (default 9).
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { echoResponder, startWireServer } from "@keel/wire-server";

const here = dirname(fileURLToPath(import.meta.url));
const bin = join(here, "..", "bin", "keel.js");
const config = join(here, "fixtures", "full-stack-no-mcp.config.ts");
const floor = join(here, "fixtures", "sdk-floor.mjs");
const RUNS = Number(process.env.RUNS ?? 9);
let arrivals: number[] = [];
const server = await startWireServer({ onEmpty: (req) => (arrivals.push(performance.now()), echoResponder(req)) });
const home = mkdtempSync(join(tmpdir(), "keel-cold-sdk-"));
const env = {
  ...process.env,
  ANTHROPIC_API_KEY: "bench",
  ANTHROPIC_BASE_URL: server.anthropicBaseURL,
  KEEL_HOME: home,
};

function once(args: string[], extra: Record<string, string> = {}): Promise<number> {
  arrivals = [];
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env: { ...env, ...extra }, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) =>
      code === 0 && arrivals[0] !== undefined
        ? resolve(arrivals[0] - t0)
        : reject(new Error(`${args.join(" ")} exited ${code}: ${stderr.slice(-2000)}`)),
    );
  });
}

// Published packages run built JavaScript: `--conditions=keel-dist` picks dist/ here (built first, as in cold-start.ts).
const repo = join(here, "..", "..", "..");
if (process.env.SKIP_BUILD !== "1" && spawnSync("pnpm", ["build"], { cwd: repo, stdio: "ignore" }).status !== 0)
  throw new Error("pnpm build failed; run it to see why");
const keel = [bin, "run", "--config", config, "--home", home, "What is left in TODO.md?"];
const built = ["--conditions=keel-dist", ...keel];
await once(keel); // warm the OS file cache and the tokenizer cache; also captures the request
const body = server.requests.at(-1)!.body as Record<string, unknown>;
const floorEnv = { KEEL_FLOOR_BODY: JSON.stringify(body) };
// keel.js turns on Node's compile cache; the floor is measured without and with one (its own dir).
const cachedEnv = { ...floorEnv, NODE_COMPILE_CACHE: join(home, "floor-compile-cache") };
await once([floor], floorEnv);
await once([floor], cachedEnv);
await once(built);
const times = { floor: [] as number[], cached: [] as number[], keel: [] as number[], built: [] as number[] };
for (let i = 0; i < RUNS; i++) {
  times.floor.push(await once([floor], floorEnv));
  times.cached.push(await once([floor], cachedEnv));
  times.keel.push(await once(keel));
  times.built.push(await once(built));
}
await server.close();
rmSync(home, { recursive: true, force: true });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const f = median(times.floor);
const c = median(times.cached);
const k = median(times.keel);
const b = median(times.built);
console.log(`spawn → first provider request, median of ${RUNS} interleaved runs (ms)`);
console.log(`| run | median | min | max |\n|---|---:|---:|---:|`);
console.log(
  `| floor: import @anthropic-ai/sdk, stream the same request | ${f.toFixed(0)} | ${Math.min(...times.floor).toFixed(0)} | ${Math.max(...times.floor).toFixed(0)} |`,
);
console.log(
  `| floor with Node's compile cache | ${c.toFixed(0)} | ${Math.min(...times.cached).toFixed(0)} | ${Math.max(...times.cached).toFixed(0)} |`,
);
console.log(
  `| keel run, full-stack config without MCP (sources; compile cache on) | ${k.toFixed(0)} | ${Math.min(...times.keel).toFixed(0)} | ${Math.max(...times.keel).toFixed(0)} |`,
);
console.log(
  `| keel run, the same, built (--conditions=keel-dist, as published) | ${b.toFixed(0)} | ${Math.min(...times.built).toFixed(0)} | ${Math.max(...times.built).toFixed(0)} |`,
);
console.log(`ratio built keel / floor: ${(b / f).toFixed(2)}; `);
console.log(
  `ratio keel / floor: ${(k / f).toFixed(2)} (goal ≤ 1.3); keel / floor with compile cache: ${(k / c).toFixed(2)}; request: ${JSON.stringify(body).length} bytes`,
);
