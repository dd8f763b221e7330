/**
 * `keel serve`'s command line: what it refuses before any agent starts (exit 2, one line on
 * stderr, stdout empty), and its help.
 */
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { cleanEnv, helperProject, KEEL_BIN } from "./support/helper-agent.ts";

function keel(args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [KEEL_BIN, ...args], {
      cwd,
      env: cleanEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("keel serve (command line)", () => {
  it("refuses what it cannot serve, with exit 2 and what to do", async () => {
    const p = helperProject();
    const cases: Array<[string[], string]> = [
      [["serve"], "keel serve needs --mcp"],
      [["serve", "--mcp", "--a2a"], "not both"],
      [["serve", "--mcp", "--port", "4000"], "--port needs --http"],
      [["serve", "--mcp", "--http", "--port", "70000"], "--port takes a port number"],
      [["serve", "--mcp", "--http", "--token", "short"], "at least 16 characters"],
      [["serve", "--a2a", "--http"], "--http is an option of keel serve --mcp"],
      [["run", "--mcp", "hi"], "--mcp is an option of keel serve"],
      [["serve", "--mcp", "extra"], "keel serve takes no arguments"],
    ];
    for (const [args, says] of cases) {
      const r = await keel(args, p.dir);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(says);
      expect(r.stdout).toBe("");
    }
  });

  it("keel help serve gives its usage, the tools and the token variable", async () => {
    const r = await keel(["help", "serve"], helperProject().dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("keel serve --mcp --http [--port N] [--host H] [--token T]");
    expect(r.stdout).toContain("approve (session_id");
    expect(r.stdout).toContain("KEEL_SERVE_TOKEN");
  });
});
