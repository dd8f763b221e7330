/**
 * A fresh `npm init` project is CommonJS (no "type": "module"): importing its ES-module
 * agent.config.ts natively made Node warn (MODULE_TYPELESS_PACKAGE_JSON) on every command.
 * Loading is quiet now, and other warnings still pass. A child process, so warnings are real.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { REPO } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-cjs-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function project(config: string): string {
  const dir = mkdtempSync(join(root, "p-"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "cjs-demo", version: "1.0.0" }));
  mkdirSync(join(dir, "node_modules", "@keel"), { recursive: true });
  // As `npm i @keel/kernel` would: the kernel the CLI runs, so the config is imported natively.
  symlinkSync(join(REPO, "packages", "kernel"), join(dir, "node_modules", "@keel", "kernel"));
  writeFileSync(join(dir, "agent.config.ts"), config);
  return dir;
}

/** Load the config the way every keel command does, in a child process; its stderr. */
function loadStderr(dir: string): string {
  const loader = pathToFileURL(join(REPO, "packages/cli/src/load-config.ts")).href;
  const script = `const { loadConfig } = await import(${JSON.stringify(loader)});
const r = await loadConfig({ cwd: ${JSON.stringify(dir)} });
if (!r.filepath.endsWith("agent.config.ts")) process.exit(3);`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: dir, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`exit ${r.status}: ${r.stderr}`);
  return r.stderr;
}

describe("a CommonJS project", () => {
  it("loads agent.config.ts without Node's module-type warning", () => {
    const dir = project(`import { defineConfig } from "@keel/agent";\nexport default defineConfig({ name: "cjs" });\n`);
    expect(loadStderr(dir)).not.toMatch(/MODULE_TYPELESS_PACKAGE_JSON|Warning/);
  });

  it("other warnings from the config still reach stderr", () => {
    const dir = project(
      `import { defineConfig } from "@keel/agent";\nprocess.emitWarning("config says hello", { code: "ACME_NOTE" });\nexport default defineConfig({ name: "cjs" });\n`,
    );
    expect(loadStderr(dir)).toContain("config says hello");
  });
});
