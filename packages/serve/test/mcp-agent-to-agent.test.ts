/**
 * One Keel agent calling another: a second project whose config uses `@keel/plugin-mcp` with
 * `keel serve --mcp` of the first as its stdio server, in a real `keel run`. The caller asks,
 * continues the conversation by the session id it was given, and answers a paused turn with
 * the approve tool.
 */
import { spawn } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { cleanEnv, helperProject, KEEL_BIN, REPO, tempDir } from "./support/helper-agent.ts";

type Step = { text?: string; toolCalls?: Array<{ id: string; name: string; args: unknown }> };

/** The caller's project: plugin-mcp (resolved from its folder, as a user installs it) pointed at the helper. */
function callerProject(helper: { dir: string; home: string }) {
  const dir = tempDir("keel-caller-");
  mkdirSync(join(dir, "node_modules", "@keel"), { recursive: true });
  symlinkSync(join(REPO, "packages", "plugin-mcp"), join(dir, "node_modules", "@keel", "plugin-mcp"), "dir");
  const home = join(dir, "home");
  const script = (steps: Step[]) =>
    writeFileSync(
      join(dir, "agent.config.json"),
      JSON.stringify({
        name: "caller",
        plugins: [
          [
            "@keel/plugin-mcp",
            {
              servers: {
                helper: {
                  command: process.execPath,
                  args: [KEEL_BIN, "serve", "--mcp"],
                  cwd: helper.dir,
                  env: { KEEL_HOME: helper.home },
                  required: true,
                },
              },
            },
          ],
        ],
        offline: { script: { steps } },
      }),
    );
  const run = (input: string) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [KEEL_BIN, "run", input], {
        cwd: dir,
        env: cleanEnv({ KEEL_HOME: home }),
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
  /** The tool results the caller's model got, in order (every session). */
  const results = (): Array<{ name: string; text: string; isError: boolean }> => {
    const db = new DatabaseSync(join(home, "sessions.sqlite"), { readOnly: true });
    try {
      const rows = db.prepare("SELECT data FROM events WHERE type = 'message.appended' ORDER BY rowid").all() as Array<{
        data: string;
      }>;
      return rows
        .map(
          (r) =>
            (
              JSON.parse(r.data) as {
                message: {
                  role: string;
                  toolName?: string;
                  isError?: boolean;
                  content: Array<{ type: string; text?: string }>;
                };
              }
            ).message,
        )
        .filter((m) => m.role === "tool")
        .map((m) => ({
          name: m.toolName ?? "",
          isError: !!m.isError,
          text: m.content.map((b) => b.text ?? "").join("\n"),
        }));
    } finally {
      db.close();
    }
  };
  return { dir, home, script, run, results };
}

const sessionIdIn = (text: string) => /session_id: ([0-9a-f-]{36})/.exec(text)?.[1];

describe("a Keel agent calling another through @keel/plugin-mcp and keel serve --mcp", () => {
  it("asks, continues by session id, and answers a paused turn with approve", async () => {
    const helper = helperProject();
    const caller = callerProject(helper);

    caller.script([
      { toolCalls: [{ id: "c1", name: "mcp__helper__ask", args: { input: "the release is Thursday" } }] },
      { text: "The helper heard it." },
    ]);
    const first = await caller.run("tell the helper about the release");
    expect(first.code, first.stderr).toBe(0);
    const [r1] = caller.results();
    expect(r1).toMatchObject({ name: "mcp__helper__ask", isError: false });
    expect(r1!.text).toContain("heard 1: the release is Thursday");
    const id = sessionIdIn(r1!.text);
    expect(id, r1!.text).toBeDefined();

    caller.script([
      { toolCalls: [{ id: "c2", name: "mcp__helper__ask", args: { input: "when is it?", session_id: id } }] },
      { text: "It remembered." },
    ]);
    const second = await caller.run("ask the helper again");
    expect(second.code, second.stderr).toBe(0);
    expect(caller.results()[1]!.text).toContain("heard 2: the release is Thursday | when is it?");

    caller.script([
      { toolCalls: [{ id: "c3", name: "mcp__helper__ask", args: { input: "note ship it", session_id: id } }] },
      { text: "It waits for approval." },
    ]);
    expect((await caller.run("have the helper take a note")).code).toBe(0);
    const paused = caller.results()[2]!;
    expect(paused.isError).toBe(false);
    expect(paused.text).toContain("The turn is paused");
    expect(paused.text).toContain("write_note");
    expect(helper.notes()).toBe("");

    caller.script([
      { toolCalls: [{ id: "c4", name: "mcp__helper__approve", args: { session_id: id, decision: "allow" } }] },
      { text: "Approved." },
    ]);
    expect((await caller.run("approve the helper's note")).code).toBe(0);
    expect(caller.results()[3]!.text).toContain("Done: wrote ship it");
    expect(helper.notes()).toBe("ship it\n");
  });
});
