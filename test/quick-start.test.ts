import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const readme = readFileSync(join(root, "README.md"), "utf8");
const ci = readFileSync(join(root, ".ci/run"), "utf8");

describe("README quick start", () => {
  const section = readme.split(/^## Quick start$/m)[1]?.split(/^## /m)[0] ?? "";
  const commands = [...section.matchAll(/^(npx .+)$/gm)].map((m) => m[1]!);

  it("has exactly two commands: run the example, run the tests", () => {
    expect(commands).toHaveLength(2);
    expect(commands[0]).toMatch(/pnpm start"$/);
    expect(commands[1]).toMatch(/pnpm test"$/);
  });

  it("is what CI runs", () => {
    expect(ci.split("\n")).toContain(commands[1]);
  });

  it("pins the same pnpm as package.json", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { packageManager: string };
    for (const c of commands) expect(c).toContain(`-p ${pkg.packageManager}`);
  });
});

describe("pnpm start", () => {
  it("runs an example agent through the real keel binary, offline, in the example's own home (never ~/.keel), and says what to try next", async () => {
    const { spawnSync } = await import("node:child_process");
    const { existsSync, mkdtempSync, readdirSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts: { start: string } };
    const example = /^keel run --config (examples\/[\w-]+)\/agent\.config\.ts --home (\S+) /.exec(pkg.scripts.start);
    expect(example, pkg.scripts.start).not.toBeNull();
    const demoHome = join(root, example![2]!);
    expect(demoHome.startsWith(join(root, example![1]!))).toBe(true);
    // A user's HOME (where ~/.keel would be), with no KEEL_HOME: the demo must not write there.
    const userHome = mkdtempSync(join(tmpdir(), "keel-start-user-"));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      HOME: userHome,
      PATH: `${join(root, "node_modules", ".bin")}:${process.env.PATH}`,
    };
    for (const k of ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "KEEL_HOME"]) delete env[k];
    // The demo's home is gitignored and throwaway: start from none, as a fresh clone does.
    rmSync(demoHome, { recursive: true, force: true });
    try {
      const r = spawnSync("sh", ["-c", pkg.scripts.start], { cwd: root, env, encoding: "utf8", timeout: 60_000 });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toContain("keel: offline");
      expect(r.stdout.trim().length).toBeGreaterThan(20);
      expect(r.stderr).toMatch(/keel: completed \(end_turn\)/);
      // Nothing of the demo's in the user's home: at most Keel's cache folder (Node's compile cache, the tokenizer's table), never a .keel.
      expect(readdirSync(userHome).filter((f) => f !== ".cache")).toEqual([]);
      if (existsSync(join(userHome, ".cache"))) expect(readdirSync(join(userHome, ".cache"))).toEqual(["keel"]);
      expect(readdirSync(demoHome)).toEqual(expect.arrayContaining(["sessions.sqlite", "memory.sqlite"]));
      expect(r.stderr).toContain(`first session in ${demoHome}`);
      expect(r.stderr).toMatch(
        /chat -c --config examples\/full-stack\/agent\.config\.ts --home examples\/full-stack\/\.keel/,
      );
      expect(r.stderr).toContain("docs/plugins.md");
      expect(existsSync(join(userHome, ".keel"))).toBe(false);
    } finally {
      rmSync(userHome, { recursive: true, force: true });
    }
  }, 60_000);
});
