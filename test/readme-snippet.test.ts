import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

describe("README", () => {
  it("the plugin-and-agent snippet runs as written", async () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const snippet = /## A plugin and an agent\s+```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(snippet).toBeTruthy();
    // Inside the example package so that @keel/kernel and zod resolve as they would for a user.
    const file = join(root, "examples/minimal", `.readme-snippet-${process.pid}.ts`);
    const home = mkdtempSync(join(tmpdir(), "keel-readme-"));
    writeFileSync(file, snippet!);
    try {
      const { stdout } = await promisify(execFile)(process.execPath, [file], {
        env: { ...process.env, KEEL_HOME: home, DEBUG: "" },
      });
      expect(stdout.trim()).toBe("Hello!");
    } finally {
      rmSync(file, { force: true });
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("README application snippet", () => {
  it("streams a turn that pauses for approval, resumes it, and returns typed structured output", async () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const snippet = /## In an application: streaming, approvals, structured output\s+```ts\n([\s\S]*?)```/.exec(
      readme,
    )?.[1];
    expect(snippet).toContain("pendingApprovals");
    const file = join(root, "examples/minimal", `.readme-app-${process.pid}.ts`);
    const home = mkdtempSync(join(tmpdir(), "keel-readme-app-"));
    writeFileSync(file, snippet!);
    try {
      const { stdout } = await promisify(execFile)(process.execPath, [file], {
        env: { ...process.env, KEEL_HOME: home },
      });
      expect(stdout).toBe(
        "Deploying. [deploy waits: deploys reach production]\npaused\nv1.4.2 is live.\n[ 'none found' ]\n",
      );
    } finally {
      rmSync(file, { force: true });
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("README config snippet", () => {
  it("loads, validates and builds an agent with its four plugins", async () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const snippet = /## An agent in a config file\s+```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(snippet).toContain("defineConfig");
    const { buildAgent, loadConfig } = await import("@keel/cli");
    const file = join(root, "examples/full-stack", `.readme-config-${process.pid}.ts`);
    const home = mkdtempSync(join(tmpdir(), "keel-readme-config-"));
    writeFileSync(file, snippet!);
    try {
      const built = await buildAgent(await loadConfig({ cwd: root, configPath: file }), { env: {}, home });
      try {
        expect(built.offline).toBe(true);
        expect(built.agent.registry.plugins.map((p) => p.name).sort()).toEqual([
          "@keel/plugin-compaction",
          "@keel/plugin-mcp",
          "@keel/plugin-memory",
          "@keel/plugin-skills",
        ]);
      } finally {
        await built.agent.close();
      }
    } finally {
      rmSync(file, { force: true });
      rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);
});
