import { execFile } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "@keel/store-sqlite";

const here = dirname(fileURLToPath(import.meta.url));
const run = promisify(execFile);

describe("examples/minimal", () => {
  it("runs offline, streams the answer, and leaves a durable session", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-minimal-"));
    const { stdout, stderr } = await run(process.execPath, [join(here, "main.ts")], {
      env: { ...process.env, KEEL_HOME: home },
    });
    expect(stderr).toContain("offline mode");
    expect(stderr).toContain("→ list_files({})");
    expect(stderr).toContain('→ read_file({"path":"TODO.md"})');
    expect(stderr).toMatch(/✓ read_file ok/);
    expect(stderr).toContain("verdict: completed (end_turn), 2 rounds, 2 tool calls");
    expect(stdout).toContain("Three items are still open in TODO.md");

    const db = join(home, "sessions.sqlite");
    expect(existsSync(db)).toBe(true);
    const store = new SqliteSessionStore({ path: db });
    try {
      const [session] = store.listSessions();
      const events = store.events(session!.id);
      const types = events.map((e) => e.type);
      expect(types.filter((t) => t === "prompt.compiled")).toHaveLength(2);
      const user = events.find((e) => e.type === "message.appended" && e.message.role === "user");
      expect(user && user.type === "message.appended" && user.message.content).toEqual([
        { type: "text", text: "Which items of the TODO list are still open?" },
      ]);
      const readResult = events.find(
        (e) => e.type === "message.appended" && e.message.role === "tool" && e.message.toolName === "read_file",
      );
      expect(JSON.stringify(readResult)).toContain("Provider adapters");
      const compiled = events.find((e) => e.type === "prompt.compiled");
      expect(compiled?.type === "prompt.compiled" && compiled.manifest.context).toEqual([
        {
          id: "workspace",
          domain: "workspace",
          chars: expect.any(Number),
          plugin: "workspace-context",
          hash: expect.any(String),
        },
      ]);
      expect(types.at(-1)).toBe("turn.completed");
    } finally {
      store.close();
    }
  });
});
