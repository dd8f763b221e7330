/**
 * `keel init` is tested by running what it creates: the agent project answers offline through
 * the real binary with its home inside the project, and the plugin package's own test passes
 * with vitest — and fails once the generated plugin is broken, so it asserts something.
 * Dependencies are linked from this workspace, as `npm install` would provide them.
 */
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { offlineEnv, REPO, runKeel } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-init-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const fromCli = createRequire(join(REPO, "packages/cli/package.json"));
const pkgDir = (name: string, from = fromCli) => dirname(from.resolve(`${name}/package.json`));

/** node_modules/<name> → this workspace's copy, for every dependency of the scaffold's package.json. */
function linkDependencies(dir: string): void {
  const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  const kernelReq = createRequire(join(REPO, "packages/kernel/package.json"));
  const rootReq = createRequire(join(REPO, "package.json"));
  for (const name of Object.keys({ ...manifest.dependencies, ...manifest.devDependencies })) {
    const local: Record<string, string> = {
      "@keel/cli": "cli",
      "@keel/agent": "agent",
      "@keel/kernel": "kernel",
      "@keel/testkit": "testkit",
      "@keel/plugin-memory": "plugin-memory",
      "@keel/plugin-skills": "plugin-skills",
    };
    let target: string | undefined = local[name] ? join(REPO, "packages", local[name]!) : undefined;
    for (const req of [kernelReq, rootReq, fromCli]) {
      if (target) break;
      try {
        target = pkgDir(name, req);
      } catch {
        // not installed here (typescript, @types/node are not needed to run)
      }
    }
    if (!target) continue;
    mkdirSync(dirname(join(dir, "node_modules", name)), { recursive: true });
    symlinkSync(realpathSync(target), join(dir, "node_modules", name));
  }
}

describe("keel init", () => {
  it("an agent project that answers offline at once, its home inside the project", async () => {
    const dir = join(root, "my-agent");
    mkdirSync(dir);
    const init = await runKeel(["init"], { cwd: dir });
    expect(init.code, init.stderr).toBe(0);
    for (const f of ["package.json", "agent.config.ts", "skills/write-a-summary/SKILL.md", ".gitignore", "README.md"])
      expect(existsSync(join(dir, f)), f).toBe(true);
    expect(init.stdout).toContain("npx keel run");
    // The next steps work today: the @keel packages are not on npm (a bare `npm install` is a
    // 404), so the install names this checkout's tarballs, as docs/outside.md does.
    const packs = join(REPO, "packs");
    expect(init.stdout).toContain(`npm install ${packs}/*.tgz`);
    expect(init.stdout).not.toMatch(/^\s*npm install\s*(#|$)/m);
    // Before any install no `keel` is on PATH: the first run names this checkout's bin; the
    // tarballs are made first when packs/ is not there yet.
    expect(init.stdout).toContain(`node ${join(REPO, "packages/cli/bin/keel.js")} run "hello"`);
    if (!existsSync(packs)) expect(init.stdout).toMatch(/\(cd \S+ && npx -y pnpm@[\d.]+ pack:all\)/);
    // No provider SDK comes with the scaffold: a real model's is a step of its own.
    expect(init.stdout).toMatch(/^\s*npm install @anthropic-ai\/sdk\s+# for a real model/m);
    const readme = readFileSync(join(dir, "README.md"), "utf8");
    expect(readme).toContain(`npm install ${packs}/*.tgz`);
    expect(readme).not.toMatch(/^npm install$/m);
    expect(readme).toContain("npm install @anthropic-ai/sdk");
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    expect(manifest).toMatchObject({ name: "my-agent", type: "module" });
    expect(Object.keys(manifest.dependencies)).not.toContain("@anthropic-ai/sdk");
    expect(Object.keys(manifest.dependencies)).not.toContain("openai");
    linkDependencies(dir);

    const home = join(root, "user-home");
    mkdirSync(home);
    const env = offlineEnv({ HOME: home, KEEL_EXIT_GRACE_MS: "1000" });
    delete env.KEEL_HOME;
    const run = await runKeel(["run", "hello there"], { cwd: dir, env });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("hello there");
    expect(run.stderr).toContain("offline");
    expect(existsSync(join(dir, ".keel", "sessions.sqlite"))).toBe(true);
    expect(existsSync(join(dir, ".keel", "memory.sqlite"))).toBe(true);
    // Nothing in the user's home but Keel's cache folder (compile cache, tokenizer table): the project's data stays in the project.
    expect(readdirSync(home).filter((f) => f !== ".cache")).toEqual([]);
    if (existsSync(join(home, ".cache"))) expect(readdirSync(join(home, ".cache"))).toEqual(["keel"]);
    // The skill it ships is found by the skills plugin.
    const inspect = await runKeel(["inspect"], { cwd: dir, env });
    expect(inspect.code, inspect.stderr).toBe(0);
    expect(inspect.stdout).toContain("@keel/plugin-skills");
  });

  it("a plugin package whose generated test passes, and fails once the plugin is broken", () => {
    const r = spawnSync(
      process.execPath,
      [join(REPO, "packages/cli/bin/keel.js"), "init", "--plugin", "@acme/keel-house-rules"],
      { cwd: root, encoding: "utf8", env: offlineEnv() },
    );
    expect(r.status, r.stderr).toBe(0);
    const dir = join(root, "keel-house-rules");
    expect(JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))).toMatchObject({
      name: "@acme/keel-house-rules",
      peerDependencies: { "@keel/kernel": expect.stringMatching(/^\^\d/) },
    });
    linkDependencies(dir);
    const vitest = join(realpathSync(join(REPO, "node_modules", "vitest")), "vitest.mjs");
    const test = () =>
      spawnSync(process.execPath, [vitest, "run", "--root", dir], {
        cwd: dir,
        encoding: "utf8",
        env: { ...offlineEnv(), CI: "1" },
      });

    const pass = test();
    expect(pass.status, pass.stdout + pass.stderr).toBe(0);
    expect(pass.stdout).toMatch(/2 passed/);

    // A section id the kernel rejects: the contribution is dropped with a warning, and the test says so.
    const src = join(dir, "src/index.ts");
    writeFileSync(src, readFileSync(src, "utf8").replace('sectionId: "house-rules"', 'sectionId: "House Rules!"'));
    const fail = test();
    expect(fail.status).not.toBe(0);
    expect(fail.stdout + fail.stderr).toMatch(/1 failed/);
  }, 60_000);

  it("refuses to overwrite (listing the files) unless --force, and refuses bad plugin names", async () => {
    const dir = join(root, "taken");
    mkdirSync(dir);
    writeFileSync(join(dir, "agent.config.ts"), "export default {};\n");
    const refused = await runKeel(["init"], { cwd: dir });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("KEEL_INIT_REFUSED");
    expect(refused.stderr).toContain("agent.config.ts");
    expect(readFileSync(join(dir, "agent.config.ts"), "utf8")).toBe("export default {};\n");
    expect(existsSync(join(dir, "package.json"))).toBe(false);
    const forced = await runKeel(["init", "--force"], { cwd: dir });
    expect(forced.code, forced.stderr).toBe(0);
    expect(readFileSync(join(dir, "agent.config.ts"), "utf8")).toContain("defineConfig");

    for (const bad of ["My Plugin", "@acme/", "UPPER"]) {
      const r = await runKeel(["init", "--plugin", bad], { cwd: root });
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toContain("KEEL_INIT_REFUSED");
    }
    const help = await runKeel(["init", "--help"], { cwd: root });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("keel init --plugin NAME");
  });
});
