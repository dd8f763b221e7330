/** `keel chat` in a child process: lines typed during a turn steer it; Ctrl-C cancels the turn, not the session. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { offlineEnv, runKeel } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-chat-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function chatProject(steps: unknown[]): string {
  const dir = mkdtempSync(join(root, "p-"));
  writeFileSync(
    join(dir, "agent.config.mjs"),
    `export default {
  name: "chat-test",
  tools: [{ name: "slow_check", description: "Takes a moment.", execute: () => new Promise((r) => setTimeout(() => r("checked"), 700)) }],
  offline: { script: { steps: ${JSON.stringify(steps)} } },
};\n`,
  );
  return dir;
}

function storedEvents(home: string) {
  const store = new SqliteSessionStore({ path: join(home, "sessions.sqlite") });
  try {
    const [s] = store.listSessions();
    return store.events(s!.id);
  } finally {
    store.close();
  }
}

describe("keel chat", () => {
  it("queues a line typed while the agent works as steering, delivered before the next request", async () => {
    const dir = chatProject([
      { toolCalls: [{ name: "slow_check", args: {} }] },
      { text: "Done, and I saw your note." },
    ]);
    const home = join(dir, ".keel");
    const run = await runKeel(["chat"], {
      cwd: dir,
      env: offlineEnv({ KEEL_HOME: home }),
      // The note is typed while the tool runs (it prints "→ slow_check" on stderr as it starts).
      stdin: ["check things", { line: "also look at the logs", after: "slow_check" }, "/exit"],
      gapMs: 100,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain("(queued as steering: also look at the logs)");
    expect(run.stdout).toContain("Done, and I saw your note.");
    const events = storedEvents(home);
    const users = events.flatMap((e) =>
      e.type === "message.appended" && e.message.role === "user"
        ? [e.message.content.map((b) => (b.type === "text" ? b.text : "")).join("")]
        : [],
    );
    expect(users).toEqual(["check things", "also look at the logs"]);
    expect(events.filter((e) => e.type === "turn.started")).toHaveLength(1);
    expect(events.some((e) => e.type === "message.queued" && e.queue === "steering")).toBe(true);
  });

  it("/mode chat stops sending tools from the next turn, /mode agent brings them back; a bad /mode says what it takes", async () => {
    const dir = chatProject([
      { when: { lastUserIncludes: "first" }, expect: { noTools: true }, text: "no tools here" },
      { when: { lastUserIncludes: "second" }, expect: { toolsInclude: ["slow_check"] }, text: "tools are back" },
    ]);
    const home = join(dir, ".keel");
    const run = await runKeel(["chat"], {
      cwd: dir,
      env: offlineEnv({ KEEL_HOME: home }),
      // Each question waits for the answer before it: a line typed during a turn is steering, not a turn.
      stdin: [
        "/mode chat",
        "first question",
        { line: "/mode", after: "no tools here" },
        "/mode agent",
        "second question",
        { line: "/exit", after: "tools are back" },
      ],
      gapMs: 100,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("no tools here");
    expect(run.stdout).toContain("tools are back");
    expect(run.stderr).toContain(
      "(chat mode: no tools are sent from the next turn on, in any later run of this session too)",
    );
    expect(run.stderr).toContain("(this session is in chat mode; /mode chat sends no tools, /mode agent sends them)");
    expect(
      storedEvents(home)
        .filter((e) => e.type === "session.mode")
        .map((e) => (e as { mode: string }).mode),
    ).toEqual(["chat", "agent"]);
  });

  it("Ctrl-C cancels the running turn and the session takes the next line", async () => {
    const dir = chatProject([{ hang: true }, { text: "Still here after the cancel." }]);
    const home = join(dir, ".keel");
    let stage = 0;
    // --json: stored events on stdout tell the test when the turn has really started (no timing guesses).
    const run = await runKeel(["chat", "--json"], {
      cwd: dir,
      env: offlineEnv({ KEEL_HOME: home }),
      onStderr: (chunk, child) => {
        if (stage === 0 && chunk.includes("keel chat")) {
          stage = 1;
          child.stdin!.write("this will hang\n");
        } else if (stage === 2 && chunk.includes("turn cancelled")) {
          stage = 3;
          child.stdin!.write("are you there?\n");
        }
      },
      onStdout: (chunk, child) => {
        if (stage === 1 && chunk.includes('"type":"prompt.compiled"')) {
          stage = 2;
          child.kill("SIGINT");
        } else if (stage === 3 && chunk.includes("Still here after the cancel.")) {
          stage = 4;
          child.stdin!.end("/exit\n");
        }
      },
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain("keel: turn cancelled (the session goes on)");
    expect(run.stderr).toMatch(/keel: interrupted/);
    expect(run.stdout).toContain("Still here after the cancel.");
    const terminal = storedEvents(home)
      .filter((e) => e.type.startsWith("turn.") && e.type !== "turn.started")
      .map((e) => e.type);
    expect(terminal).toEqual(["turn.interrupted", "turn.completed"]);
  });
});
