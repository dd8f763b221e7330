/**
 * The CLI asks: a plugin's `ask` is asked of the person on a terminal (a real pty, through
 * util-linux `script`), answered by --ask / KEEL_ASK without one, and never lost: a keel killed
 * while it asks leaves the turn paused, and the next keel on that session answers it first.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteSessionStore } from "@keel/store-sqlite";
import type { KeelEvent } from "@keel/kernel";
import { KEEL_BIN, offlineEnv, runKeel } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-cli-ask-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function project(steps: unknown[]): {
  dir: string;
  home: string;
  notes: () => string;
  script: (steps: unknown[]) => void;
} {
  const dir = mkdtempSync(join(root, "p-"));
  const home = join(dir, ".keel");
  const notes = join(dir, "notes.txt");
  const script = (s: unknown[]) =>
    writeFileSync(
      join(dir, "agent.config.mjs"),
      `import { appendFileSync } from "node:fs";
export default {
  name: "ask-test",
  tools: [{ name: "write_note", description: "Appends a note.", category: "edit", parameters: { type: "object", properties: { text: { type: "string" } } }, execute: ({ text }) => { appendFileSync(${JSON.stringify(notes)}, text + "\\n"); return "wrote " + text; } }],
  plugins: [{ name: "guard", version: "1.0.0", setup(ctx) { ctx.on("tool.pre_call", (e) => e.call.name === "write_note" ? { kind: "tool_decision", decision: "ask", reason: "writes are reviewed" } : undefined); } }],
  offline: { script: { steps: ${JSON.stringify(s)} } },
};\n`,
    );
  script(steps);
  return { dir, home, notes: () => (existsSync(notes) ? readFileSync(notes, "utf8") : ""), script };
}

function events(home: string, id?: string): KeelEvent[] {
  const store = new SqliteSessionStore({ path: join(home, "sessions.sqlite") });
  try {
    return store.events(id ?? store.listSessions()[0]!.id) as KeelEvent[];
  } finally {
    store.close();
  }
}

const writeCall = { toolCalls: [{ id: "w1", name: "write_note", args: { text: "release is Thursday" } }] };

describe("keel run asks", () => {
  it("without a terminal, ask means deny by default, and the progress shows an ask, not a plain deny", async () => {
    const p = project([writeCall, { text: "I could not write it." }]);
    const run = await runKeel(["run", "note the release day"], { cwd: p.dir, env: offlineEnv({ KEEL_HOME: p.home }) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain("? write_note needs approval (guard: writes are reviewed)");
    expect(run.stderr).toContain(
      "✗ write_note denied: nobody was asked: no terminal, and the default (--ask deny) says deny",
    );
    expect(p.notes()).toBe("");
    expect(run.stdout).toContain("I could not write it.");
  });

  it("--ask allow and KEEL_ASK=allow run the tool", async () => {
    const ways: { args: string[]; env: Record<string, string> }[] = [
      { args: ["--ask", "allow"], env: {} },
      { args: [], env: { KEEL_ASK: "allow" } },
    ];
    for (const how of ways) {
      const p = project([writeCall, { text: "Written." }]);
      const run = await runKeel(["run", ...how.args, "note it"], {
        cwd: p.dir,
        env: offlineEnv({ KEEL_HOME: p.home, ...how.env }),
      });
      expect(run.code, run.stderr).toBe(0);
      expect(p.notes()).toBe("release is Thursday\n");
      expect(run.stderr).toContain("✓ write_note allowed once");
      // The log says who answered: this user, through the policy (the studio shows it).
      const resolved = events(p.home).find((e) => e.type === "approval.resolved");
      expect(resolved).toMatchObject({
        approved: true,
        answerer: `cli:${userInfo().username} (${how.args.length ? "--ask" : "KEEL_ASK"} allow)`,
      });
    }
  });

  it("--ask with another value is a usage error naming the choices", async () => {
    const p = project([{ text: "x" }]);
    const run = await runKeel(["run", "--ask", "maybe", "x"], { cwd: p.dir, env: offlineEnv({ KEEL_HOME: p.home }) });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--ask is "maybe"; use ask, deny or allow');
  });

  it("--ask ask reads the answers from stdin: a denial with a reason reaches the model", async () => {
    const p = project([writeCall, { text: "Fine, I will not." }]);
    const run = await runKeel(["run", "--ask", "ask", "note it"], {
      cwd: p.dir,
      env: offlineEnv({ KEEL_HOME: p.home }),
      stdin: ["n not before the review"],
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('? write_note {"text":"release is Thursday"} — guard: writes are reviewed');
    expect(run.stderr).toContain("✗ write_note denied: not before the review");
    expect(p.notes()).toBe("");
    const result = events(p.home).flatMap((e) =>
      e.type === "message.appended" && e.message.role === "tool" ? [e.message] : [],
    )[0]!;
    expect(JSON.stringify(result.content)).toContain("denied by the user: not before the review");
    // Answered at the terminal: recorded as this user's answer.
    expect(events(p.home).find((e) => e.type === "approval.resolved")).toMatchObject({
      approved: false,
      answerer: `cli:${userInfo().username}`,
    });
  });

  it("killed while it asks: nothing is lost, and the next keel on the session answers first, then runs the new input", async () => {
    const p = project([writeCall, { text: "never reached" }]);
    const child = spawn(process.execPath, [KEEL_BIN, "run", "--ask", "ask", "note it"], {
      cwd: p.dir,
      env: offlineEnv({ KEEL_HOME: p.home }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stderr = "";
    await new Promise<void>((resolve) =>
      child.stderr.on("data", (d: Buffer) => ((stderr += d.toString()), stderr.includes("  > ") && resolve())),
    );
    child.kill("SIGKILL");
    await new Promise((r) => child.once("close", r));
    const id = events(p.home).find((e) => e.type === "session.created")!.sessionId;
    expect(events(p.home, id).map((e) => e.type)).toContain("turn.paused");
    // The next process has its own offline script: the resumed round, then the new input.
    p.script([{ text: "Written, as you approved." }, { text: "Thursday." }]);
    const next = await runKeel(["run", "--session", id, "--ask", "allow", "when is the release?"], {
      cwd: p.dir,
      env: offlineEnv({ KEEL_HOME: p.home }),
    });
    expect(next.code, next.stderr).toBe(0);
    expect(next.stderr).toContain(`session ${id} has a turn paused for approval; answering it first`);
    expect(p.notes()).toBe("release is Thursday\n");
    expect(next.stdout).toContain("Written, as you approved.");
    expect(next.stdout).toContain("Thursday.");
    const types = events(p.home, id)
      .map((e) => e.type)
      .filter((t) => t.startsWith("turn."));
    expect(types).toEqual([
      "turn.started",
      "turn.paused",
      "turn.resumed",
      "turn.completed",
      "turn.started",
      "turn.completed",
    ]);
  }, 60_000);

  it("on a terminal (a real pty) the person is asked by default; 'a' allows always for the session", async () => {
    const p = project([
      writeCall,
      { toolCalls: [{ id: "w2", name: "write_note", args: { text: "second" } }] },
      { text: "Both written." },
    ]);
    const cmd = [process.execPath, KEEL_BIN, "run", "note it"].map((a) => `'${a}'`).join(" ");
    const child = spawn("script", ["-qfec", cmd, "/dev/null"], {
      cwd: p.dir,
      env: offlineEnv({ KEEL_HOME: p.home, TERM: "dumb" }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let answered = false;
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (!answered && out.includes("  > ")) {
        answered = true;
        child.stdin.write("a\r");
      }
    });
    const code = await new Promise<number | null>((r) => child.once("close", r));
    expect(code, out).toBe(0);
    expect(out).toContain("[y] allow once  [a] allow always in this session");
    expect(out).toContain("✓ write_note allowed always in this session");
    expect(out).toContain("✓ write_note allowed (always, in this session)");
    expect(p.notes()).toBe("release is Thursday\nsecond\n");
    expect(out).toContain("Both written.");
  }, 60_000);
});
