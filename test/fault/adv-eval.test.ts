/**
 * Adversarial `keel eval` at the command line (the real binary, offline): inputs that must be
 * refused before any agent exists, in bounded time.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { KEEL_BIN, offlineEnv } from "../../packages/cli/test/support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-adv-eval-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function project(name: string) {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "agent.config.json"), JSON.stringify({ name, offline: { script: "./script.json" } }));
  writeFileSync(join(dir, "script.json"), JSON.stringify({ steps: [{ text: "ok" }] }));
  return { dir, env: offlineEnv({ KEEL_HOME: join(dir, "home"), KEEL_EXIT_GRACE_MS: "500" }) };
}

describe("keel eval, adversarial", () => {
  it("an eval file that is a FIFO is refused, not read forever", { timeout: 60_000 }, () => {
    const p = project("fifo");
    const made = spawnSync("mkfifo", [join(p.dir, "agent.eval.ts")]);
    if (made.status !== 0) return; // no mkfifo here
    const r = spawnSync(process.execPath, [KEEL_BIN, "eval", "agent.eval.ts"], {
      cwd: p.dir,
      env: p.env,
      encoding: "utf8",
      timeout: 20_000,
      killSignal: "SIGKILL",
    });
    expect(r.signal, "keel eval blocked reading the FIFO").toBeNull();
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("KEEL_EVAL_CONFIG_INVALID");
    expect(r.stderr).toContain("not a regular file");
  });

  // OPEN: runScorer races a scorer against a timer, which cannot interrupt synchronous code; a
  // custom scorer that spins blocks the event loop, so its timeoutMs never fires and the run (and
  // SIGINT handling) hangs. A fix runs custom scorers off the main thread (a worker per run) or
  // documents the limit. The built-in regex/jsonSchema/judge scorers are bounded (see
  // packages/eval/test/eval-adversarial.test.ts).
  it.fails("a custom scorer stuck in a synchronous loop fails its case by its timeoutMs", {
    timeout: 60_000,
  }, async () => {
    const p = project("spin");
    const spinning = join(p.dir, "spinning");
    writeFileSync(join(p.dir, "cases.jsonl"), '{"id":"a","input":"hi"}\n');
    writeFileSync(
      join(p.dir, "agent.eval.ts"),
      `import { writeFileSync } from "node:fs";\nexport default { dataset: "./cases.jsonl", scorers: [{ name: "spin", timeoutMs: 200, score() { writeFileSync(${JSON.stringify(spinning)}, "1"); for (;;) {} } }] };\n`,
    );
    // The bound starts when the scorer does (it says so in a file before it spins), not at the
    // spawn: its 200 ms, then closing, with headroom for a loaded machine; then it is killed.
    const child = spawn(process.execPath, [KEEL_BIN, "eval", "agent.eval.ts"], {
      cwd: p.dir,
      env: p.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const exited = new Promise<{ status: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on("close", (status, signal) => resolve({ status, signal })),
    );
    let done = false;
    void exited.then(() => (done = true));
    while (!done && !existsSync(spinning)) await new Promise((r) => setTimeout(r, 20));
    const cut = setTimeout(() => child.kill("SIGKILL"), 4_000);
    const r = await exited;
    clearTimeout(cut);
    expect(existsSync(spinning), out).toBe(true);
    expect(r.signal, "keel eval hung in the scorer").toBeNull();
    expect(r.status).toBe(3);
    expect(out).toContain("spin");
  });
});
