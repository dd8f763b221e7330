import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { offlineEnv, runKeel } from "../../packages/cli/test/support/run-keel.ts";

const here = dirname(fileURLToPath(import.meta.url));
const root = mkdtempSync(join(tmpdir(), "keel-delegation-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
type Ev = { type: string; [k: string]: any };
const parse = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Ev)
    .filter((e) => "seq" in e);
const ask = "Plan the release note, then write it";

describe("examples/delegation", () => {
  it("plans with information tools only, delegates the reading to the researcher, and edits once the plan is approved", async () => {
    const home = join(root, "approved");
    const env = offlineEnv({ KEEL_HOME: home });
    const run = await runKeel(["run", "--json", "--ask", "allow", ask], { cwd: here, env });
    expect(run.code, run.stderr).toBe(0);
    const events = parse(run.stdout);
    expect(events.filter((e) => e.type === "tool.completed").map((e) => `${e.name}:${e.status}`)).toEqual([
      "task:ok",
      "exit_plan_mode:ok",
      "write_file:ok",
    ]);
    // While planning, the edit tool was not sent; after the approval it was.
    const manifests = events
      .filter((e) => e.type === "prompt.compiled")
      .map((e) => e.manifest.tools.map((t: { name: string }) => t.name).sort());
    expect(manifests[0]).toEqual(["exit_plan_mode", "task"]);
    expect(manifests[2]).toContain("write_file");
    expect(readFileSync(join(home, "out", "RELEASE.md"), "utf8")).toContain("flaky login test");
    // The researcher's session: its own log, linked to the task call, where read_file ran.
    const link = events.find((e) => e.type === "child.started")!;
    const child = await runKeel(["sessions", "show", link.childSessionId, "--json"], { cwd: here, env });
    const childEvents = child.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Ev);
    expect(childEvents[0]).toMatchObject({ type: "session.created", parent: { callId: "t1", name: "researcher" } });
    expect(childEvents.find((e) => e.type === "turn.started")).toMatchObject({ trigger: "subagent" });
    expect(childEvents.filter((e) => e.type === "tool.completed").map((e) => `${e.name}:${e.status}`)).toEqual([
      "read_file:ok",
    ]);
  });

  it("a denied plan edits nothing: plan mode stays and the edit tool is refused by name", async () => {
    const home = join(root, "denied");
    const run = await runKeel(["run", "--json", "--ask", "deny", ask], {
      cwd: here,
      env: offlineEnv({ KEEL_HOME: home }),
    });
    expect(run.code, run.stderr).toBe(0);
    const done = parse(run.stdout)
      .filter((e) => e.type === "tool.completed")
      .map((e) => `${e.name}:${e.status}`);
    expect(done).toEqual(["task:ok", "exit_plan_mode:denied", "write_file:denied"]);
    expect(existsSync(join(home, "out", "RELEASE.md"))).toBe(false);
  });
});
