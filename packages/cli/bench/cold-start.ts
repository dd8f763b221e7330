/**
 * Cold start of `keel run`: from spawning the process to the first provider request arriving
 * at a local Anthropic-wire server (the real SDK path), with a TypeScript config and four
 * plugins. Reports the median of several runs beside the floor (`node -e ""`) and a config
 * without plugins, all measured in this one run.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { echoResponder, startWireServer } from "@keel/wire-server";

const here = dirname(fileURLToPath(import.meta.url));
const bin = join(here, "..", "bin", "keel.js");
const RUNS = Number(process.env.RUNS ?? 9);
let arrivals: number[] = [];
const server = await startWireServer({ onEmpty: (req) => (arrivals.push(performance.now()), echoResponder(req)) });
const home = mkdtempSync(join(tmpdir(), "keel-cold-"));

function once(
  args: string[],
): Promise<{ toRequest: number | undefined; total: number; code: number | null; stderr: string }> {
  arrivals = [];
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, {
      env: { ...process.env, ANTHROPIC_API_KEY: "bench", ANTHROPIC_BASE_URL: server.anthropicBaseURL, KEEL_HOME: home },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) =>
      resolve({
        toRequest: arrivals[0] === undefined ? undefined : arrivals[0] - t0,
        total: performance.now() - t0,
        code,
        stderr,
      }),
    );
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
async function measure(label: string, args: string[], first: boolean) {
  await once(args); // warm the OS file cache; not counted
  const to: number[] = [];
  const total: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const r = await once(args);
    if (r.code !== 0) throw new Error(`${label} exited ${r.code}: ${r.stderr}`);
    if (first && r.toRequest === undefined) throw new Error(`${label}: no provider request arrived`);
    if (r.toRequest !== undefined) to.push(r.toRequest);
    total.push(r.total);
  }
  return {
    label,
    toRequest: to.length ? median(to) : undefined,
    min: to.length ? Math.min(...to) : undefined,
    total: median(total),
  };
}

// The published packages run built JavaScript; in the repository `--conditions=keel-dist` makes
// every @keel/* import resolve to dist/ (built here first: `pnpm build`), the sources otherwise.
const repo = join(here, "..", "..", "..");
if (process.env.SKIP_BUILD !== "1") {
  const b = spawnSync("pnpm", ["build"], { cwd: repo, stdio: "ignore", shell: process.platform === "win32" });
  if (b.status !== 0) throw new Error("pnpm build failed; run it to see why");
}
const bare = join(here, "fixtures", "no-plugins.config.ts");
const four = join(here, "fixtures", "four-plugins.config.ts");
const dist = "--conditions=keel-dist";
const rows = [
  await measure("node -e '' (process floor)", ["-e", ""], false),
  await measure("built: no plugin", [dist, bin, "run", "--config", bare, "hello"], true),
  await measure("built: TS config + 4 plugins", [dist, bin, "run", "--config", four, "hello"], true),
  await measure("sources (type stripping): no plugin", [bin, "run", "--config", bare, "hello"], true),
  await measure("sources (type stripping): TS config + 4 plugins", [bin, "run", "--config", four, "hello"], true),
];
await server.close();
rmSync(home, { recursive: true, force: true });
console.log(
  `cold start, median of ${RUNS} runs (ms) — target: TS config + 4 plugins, process start to first provider request < 300 ms`,
);
console.log("| run | to first request | min | whole process |\n|---|---|---|---|");
for (const r of rows)
  console.log(
    `| ${r.label} | ${r.toRequest?.toFixed(0) ?? "—"} | ${r.min?.toFixed(0) ?? "—"} | ${r.total.toFixed(0)} |`,
  );
const [floor, bareBuilt, full] = rows;
console.log(
  `built, TS config + 4 plugins: ${full!.toRequest!.toFixed(0)} ms to the first request (${(full!.toRequest! / floor!.total).toFixed(1)}× the bare node process, ${(full!.toRequest! / bareBuilt!.toRequest!).toFixed(2)}× the no-plugin config)`,
);
