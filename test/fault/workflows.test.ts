/**
 * Class 20, the workflow gate, with the real `keel` binary (offline scripted model, real SQLite
 * files): three runs that made the same calls teach a workflow; a fourth like them is offered
 * it and, approved, runs it without the model; declined, the model answers; a revoked workflow
 * is not offered; a corrupt workflows.sqlite costs the turn nothing but a named diagnostic.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KeelEvent } from "../../packages/kernel/src/index.ts";
import { offlineEnv, REPO, runKeel } from "../../packages/cli/test/support/run-keel.ts";
import { storedEvents } from "./support/storage.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-fault-workflows-"));
const home = join(dir, "home");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const USERS = {
  mia_li_3668: "Z7GOZK",
  omar_davis_3817: "JG7FMM",
  ivan_muller_7015: "G72NSF",
  noah_muller_9847: "4OG6T3",
};

const learned = Object.entries(USERS)
  .slice(0, 3)
  .flatMap(([user, res]) => [
    { when: { lastUserIncludes: user }, toolCalls: [{ name: "get_user_details", args: { user_id: user } }] },
    {
      when: { lastUserIncludes: user },
      toolCalls: [{ name: "get_reservation_details", args: { reservation_id: res } }],
    },
    { when: { lastUserIncludes: user }, text: "Your reservation is confirmed." },
  ]);

const config = join(dir, "agent.config.mjs");
writeFileSync(
  config,
  `import { workflows } from ${JSON.stringify(join(REPO, "packages/plugin-workflows/src/index.ts"))};
const users = ${JSON.stringify(USERS)};
export default {
  name: "airline",
  instructions: "You help airline customers.",
  offline: { script: ${JSON.stringify([...learned, { when: { lastUserIncludes: "noah" }, text: "The model looked into it." }])} },
  tools: [
    { name: "get_user_details", description: "A user's profile.", parameters: { type: "object", properties: { user_id: { type: "string" } } },
      execute: (a) => { if (!(a.user_id in users)) throw new Error("no user " + a.user_id); return JSON.stringify({ user_id: a.user_id, reservations: [users[a.user_id]] }); } },
    { name: "get_reservation_details", description: "A reservation.", parameters: { type: "object", properties: { reservation_id: { type: "string" } } },
      execute: (a) => JSON.stringify({ reservation_id: a.reservation_id, status: "confirmed" }) },
  ],
  plugins: [workflows()],
};
`,
);

const keel = (args: string[]) => runKeel([...args, "--config", config, "--home", home], { env: offlineEnv() });
const NOAH = "Hello, my user ID is noah_muller_9847. Is my reservation still on?";

function lastTurn(events: readonly KeelEvent[]): KeelEvent[] {
  const start = events.findLastIndex((e) => e.type === "turn.started");
  return events.slice(start);
}

function sessionOf(stderr: string): string {
  const m = /session ([A-Za-z0-9_-]{6,})/.exec(stderr);
  if (!m) throw new Error(`no session id in: ${stderr}`);
  return m[1]!;
}

let workflowId = "";
beforeAll(async () => {
  for (const user of Object.keys(USERS).slice(0, 3)) {
    const r = await keel(["run", `Hi, my user ID is ${user}. Is my reservation still on?`]);
    expect(r.code, r.stderr).toBe(0);
  }
  const list = await keel(["workflows", "--json"]);
  expect(list.code, list.stderr).toBe(0);
  const stored = JSON.parse(list.stdout) as Array<{ workflow: { id: string; name: string }; reviewed: boolean }>;
  expect(stored).toHaveLength(1);
  expect(stored[0]).toMatchObject({
    reviewed: false,
    workflow: { name: "get_user_details → get_reservation_details" },
  });
  workflowId = stored[0]!.workflow.id;
}, 120_000);

describe("class 20: the workflow gate through the keel binary", () => {
  it("approved (--ask allow): both steps run with the filled parameter, the model is not asked, the workflow's answer is printed", async () => {
    const r = await keel(["run", "--ask", "allow", NOAH]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("Your reservation is confirmed.");
    const turn = lastTurn(storedEvents(home, sessionOf(r.stderr)));
    expect(turn.some((e) => e.type === "model.responded")).toBe(false);
    const calls = turn.flatMap((e) => (e.type === "tool.completed" ? [`${e.name}:${e.status}`] : []));
    expect(calls).toEqual(["workflow_run:ok", "get_user_details:ok", "get_reservation_details:ok"]);
    const args = turn.flatMap((e) =>
      e.type === "message.appended" && e.message.role === "assistant"
        ? e.message.content.map((b) => JSON.stringify(b))
        : [],
    );
    expect(args.join("\n")).toContain('"reservation_id":"4OG6T3"');
  });

  it("declined (--ask deny): no step runs and the model answers", async () => {
    const r = await keel(["run", "--ask", "deny", NOAH]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("The model looked into it.");
    const turn = lastTurn(storedEvents(home, sessionOf(r.stderr)));
    const calls = turn.flatMap((e) => (e.type === "tool.completed" ? [`${e.name}:${e.status}`] : []));
    expect(calls).toEqual(["workflow_run:denied"]);
    expect(turn.filter((e) => e.type === "model.responded")).toHaveLength(1);
  });

  it("a corrupt workflows.sqlite: the turn still completes, the diagnostic names the plugin and the file", async () => {
    const file = join(home, "workflows.sqlite");
    const saved = readFileSync(file);
    writeFileSync(file, "this is not a database".repeat(100));
    try {
      const r = await keel(["run", NOAH]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain("The model looked into it.");
      expect(r.stderr).toContain("workflows");
      expect(r.stderr).toContain("workflows.sqlite");
      expect(r.stderr).not.toMatch(/\n\s+at .+:\d+:\d+/);
    } finally {
      writeFileSync(file, saved);
    }
  });

  it("revoked: keel workflows revoke deletes it and it is not offered again", async () => {
    const rv = await keel(["workflows", "revoke", workflowId]);
    expect(rv.code, rv.stderr).toBe(0);
    expect(rv.stdout).toContain(`Revoked ${workflowId}`);
    const r = await keel(["run", "--ask", "allow", NOAH]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("The model looked into it.");
    const turn = lastTurn(storedEvents(home, sessionOf(r.stderr)));
    expect(turn.some((e) => e.type === "round.answered")).toBe(false);
    const bad = await keel(["workflows", "show", "wf-nope"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('No workflow "wf-nope"');
  });
});
