/**
 * Keel's packages come from the CLI's installation when a project has none, so a project made by
 * `keel init` runs before any install; a project's own copy of a plugin wins once installed, but
 * the kernel stays the CLI's (a project's second kernel is never loaded).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { offlineEnv, runKeel } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-host-packages-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const env = () => offlineEnv({ HOME: root, KEEL_EXIT_GRACE_MS: "1000" });

/** A fresh `keel init` project in its own folder under the temp root (no node_modules). */
async function initProject(name: string): Promise<string> {
  const dir = join(root, name);
  mkdirSync(dir);
  const init = await runKeel(["init"], { cwd: dir, env: env() });
  expect(init.code, init.stderr).toBe(0);
  expect(init.stdout).toContain('keel run "hello"');
  return dir;
}

/** node_modules/<name> with the given files, as an install would leave it. */
function installFake(dir: string, name: string, files: Record<string, string>): void {
  const at = join(dir, "node_modules", name);
  mkdirSync(at, { recursive: true });
  for (const [file, text] of Object.entries(files)) writeFileSync(join(at, file), text);
}

describe("@keel packages from the CLI's installation", () => {
  it("a project made by keel init runs at once, before any install", async () => {
    const dir = await initProject("before-install");
    const run = await runKeel(["run", "hello from nowhere"], { cwd: dir, env: env() });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("hello from nowhere");
    const inspect = await runKeel(["inspect"], { cwd: dir, env: env() });
    expect(inspect.code, inspect.stderr).toBe(0);
    expect(inspect.stdout).toMatch(/@keel\/plugin-memory@\d/);
    expect(inspect.stdout).toMatch(/@keel\/plugin-skills@\d/);
  });

  it("a project's own plugin copy is used, and its own kernel is never loaded", async () => {
    const dir = await initProject("own-copies");
    // A kernel that must not run: importing it exits the process with a tell-tale line.
    installFake(dir, "@keel/kernel", {
      "package.json": JSON.stringify({ name: "@keel/kernel", version: "1.0.0", type: "module", main: "index.js" }),
      "index.js": 'process.stderr.write("SECOND KERNEL LOADED\\n"); process.exit(7);\n',
    });
    // The project's plugin-memory: a plugin under that name with its own version, built on the kernel it imports.
    installFake(dir, "@keel/plugin-memory", {
      "package.json": JSON.stringify({
        name: "@keel/plugin-memory",
        version: "9.9.9",
        type: "module",
        main: "index.js",
      }),
      "index.js": `import { definePlugin } from "@keel/kernel";
export default () => definePlugin({ name: "@keel/plugin-memory", version: "9.9.9-project", setup() {} });
`,
    });
    for (const cmd of [["inspect"], ["run", "hello"]]) {
      const r = await runKeel(cmd, { cwd: dir, env: env() });
      expect(r.stderr).not.toContain("SECOND KERNEL");
      expect(r.code, r.stderr).toBe(0);
      if (cmd[0] === "inspect") {
        expect(r.stdout).toContain("@keel/plugin-memory@9.9.9-project");
        // plugin-skills is not installed in the project: the CLI's copy is used.
        expect(r.stdout).toMatch(/@keel\/plugin-skills@\d/);
      }
    }
  });

  it("a plugin named by string in the config resolves the same way", async () => {
    const dir = await initProject("by-name");
    const config = join(dir, "agent.config.ts");
    writeFileSync(
      config,
      `import { defineConfig } from "@keel/agent";
export default defineConfig({ home: ".keel", plugins: [["@keel/plugin-skills", { dirs: ["./skills"] }]] });
`,
    );
    const r = await runKeel(["inspect"], { cwd: dir, env: env() });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/@keel\/plugin-skills@\d/);
  });
});
