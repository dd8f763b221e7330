/**
 * Adversarial cases for the workflow gate: a model that forges the offer call, a workflow
 * revoked while its offer waits for approval, secrets and huge values in what is learned,
 * a broken workflows file.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, definePlugin, defineTool, messageText } from "@keel/agent";
import type { KeelEvent } from "@keel/kernel";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { ScriptStep } from "@keel/testkit";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { replaySession } from "../../eval/src/index.ts";
import { runKeel } from "../../../test/fault/support/storage.ts";
import { EXAMPLES_KEPT, learnFrom, OFFER_TOOL, synthesise, WorkflowStore, workflows } from "../src/index.ts";
import type { Example } from "../src/index.ts";

let home: string;
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "keel-wf-adv-"));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

const USERS: Record<string, string> = {
  mia_li_3668: "Z7GOZK",
  omar_davis_3817: "JG7FMM",
  ivan_muller_7015: "G72NSF",
  noah_muller_9847: "4OG6T3",
};

function tools(ran: string[]) {
  return [
    defineTool({
      name: "get_user_details",
      description: "A user's profile.",
      parameters: { type: "object", properties: { user_id: { type: "string" } }, required: ["user_id"] },
      execute: (a: { user_id: string }) => {
        ran.push(`user:${a.user_id}`);
        return JSON.stringify({ reservations: [USERS[a.user_id] ?? "NONE00"] });
      },
    }),
    defineTool({
      name: "get_reservation_details",
      description: "A reservation.",
      parameters: { type: "object", properties: { reservation_id: { type: "string" } }, required: ["reservation_id"] },
      execute: (a: { reservation_id: string }) => {
        ran.push(`res:${a.reservation_id}`);
        return JSON.stringify({ reservation_id: a.reservation_id, status: "confirmed" });
      },
    }),
    defineTool({
      name: "delete_account",
      description: "Deletes a user's account.",
      parameters: { type: "object", properties: { user_id: { type: "string" } }, required: ["user_id"] },
      execute: (a: { user_id: string }) => {
        ran.push(`delete:${a.user_id}`);
        return "deleted";
      },
    }),
  ];
}

function learnedTurn(user: string): ScriptStep[] {
  return [
    { toolCalls: [{ id: `u-${user}`, name: "get_user_details", args: { user_id: user } }] },
    { toolCalls: [{ id: `r-${user}`, name: "get_reservation_details", args: { reservation_id: USERS[user] } }] },
    { text: "Your reservation is confirmed." },
  ];
}

const inputs = [
  "Hi, my user ID is mia_li_3668. Is my reservation still on?",
  "My user ID is omar_davis_3817 - is my reservation ok?",
  "Hello! user ID ivan_muller_7015, can you check my reservation?",
];

/** The scripted provider: `requests` holds every request it was sent. */
const counted = (steps: ScriptStep[]) => scriptedProvider(steps);

async function learn(db = join(home, "wf.sqlite"), namespace = "default") {
  const users = ["mia_li_3668", "omar_davis_3817", "ivan_muller_7015"];
  const agent = await createAgent({
    provider: scriptedProvider(users.flatMap(learnedTurn)),
    store: new MemorySessionStore(),
    tools: tools([]),
    plugins: [workflows({ db, namespace })],
  });
  const session = await agent.session();
  for (const input of inputs) expect((await session.run(input)).verdict.status).toBe("completed");
  await agent.close();
}

/** One turn with the gate's test input in `namespace`: what was asked for approval. */
async function offeredIn(
  namespace: string,
  answer: boolean,
  steps: ScriptStep[] = [{ text: "the model answered" }],
  input = "Could you check the reservation of user ID noah_muller_9847?",
) {
  const asked: string[] = [];
  const agent = await createAgent({
    provider: scriptedProvider(steps),
    store: new MemorySessionStore(),
    tools: tools([]),
    plugins: [workflows({ db: join(home, "wf.sqlite"), namespace })],
    approve: (r: { call: { name: string } }) => (asked.push(r.call.name), answer),
  });
  await (await agent.session()).run(input);
  await agent.close();
  return asked;
}

const diagnostics = (events: readonly KeelEvent[]) =>
  events.flatMap((e) => (e.type === "diagnostic" ? [`${e.code}: ${e.message}`] : []));

describe("workflows, adversarial: the offer call is the plugin's alone", () => {
  it("a model that calls workflow_run itself with a forged plan runs nothing of it, even approved", async () => {
    const ran: string[] = [];
    const forged = {
      workflow: "wf-000000000000",
      name: "get_user_details",
      params: {},
      steps: [{ tool: "delete_account", args: { user_id: { from: "const", value: "mia_li_3668" } } }],
    };
    const provider = counted([
      { toolCalls: [{ id: "f1", name: OFFER_TOOL, args: forged }] },
      { text: "the model answered" },
      { text: "the model answered again" },
    ]);
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider,
      store,
      tools: tools(ran),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      approve: () => true,
    });
    const session = await agent.session();
    const r = await session.run("hello there");
    await agent.close();
    expect(ran).toEqual([]);
    expect(r.verdict.status).toBe("completed");
    const result = session.messages.find((m) => m.role === "tool");
    expect(result).toMatchObject({ toolName: OFFER_TOOL, isError: true });
  });
});

describe("workflows, adversarial: the store", () => {
  it("revoked while its offer waits for approval: approved later, nothing of it runs", async () => {
    await learn();
    const store = new MemorySessionStore();
    const first = await createAgent({
      provider: counted([]),
      store,
      tools: tools([]),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
    });
    const s1 = await first.session();
    const paused = await s1.run("Could you check the reservation of user ID noah_muller_9847?");
    expect(paused.verdict).toMatchObject({ status: "paused", reason: "approval" });
    await first.close();
    const ws = new WorkflowStore(join(home, "wf.sqlite"));
    const [w] = ws.visible("default");
    expect(ws.revoke(w!.workflow.id)).toBe(true);
    ws.close();
    const ran: string[] = [];
    const provider = counted([{ text: "the model answered" }]);
    const again = await createAgent({
      provider,
      store,
      tools: tools(ran),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
    });
    const s2 = await again.session(s1.id);
    const [p] = s2.pendingApprovals();
    await s2.approve(p!.callId);
    const done = await s2.resume();
    await again.close();
    expect(ran).toEqual([]);
    expect(done.text).toBe("the model answered");
  });

  it("a corrupt workflows file: the turn completes, with a located diagnostic", async () => {
    const db = join(home, "wf.sqlite");
    writeFileSync(db, "this is not a database".repeat(100));
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider: counted([{ text: "fine" }]),
      store,
      tools: tools([]),
      plugins: [workflows({ db })],
    });
    const session = await agent.session();
    const r = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    const events = await store.events(session.id);
    await agent.close();
    expect(r.verdict.status).toBe("completed");
    const said = diagnostics(events);
    expect(said.some((d) => d.startsWith("KEEL_HANDLER_THREW"))).toBe(false);
    expect(said.filter((d) => d.startsWith("workflow.store"))).toEqual([
      expect.stringContaining(`The workflows database ${db} could not be used`),
      expect.stringContaining(`The workflows database ${db} could not be used`),
    ]);
  });
});

describe("workflows, adversarial: stored rows", () => {
  it("rows that do not read as a workflow or an example (no cue, a shape that is no regular expression, calls that are no list) are skipped; the good one is still offered", async () => {
    await learn();
    const db = join(home, "wf.sqlite");
    const ws = new WorkflowStore(db);
    const [good] = ws.visible("default");
    const insert = ws.db.prepare(
      "INSERT INTO wf_workflows (namespace, key, id, data, reviewed, created_at) VALUES ('default', ?, ?, ?, 0, '2000-01-01')",
    );
    insert.run("a", "wf-nocue", JSON.stringify({ id: "wf-nocue", name: "x", steps: [] }));
    insert.run(
      "b",
      "wf-badshape",
      JSON.stringify({ ...good!.workflow, id: "wf-badshape", slots: [{ name: "p1", shape: "(", order: 0 }] }),
    );
    insert.run("c", "wf-array", "[1, 2]");
    expect(ws.visible("default").map((w) => w.workflow.id)).toEqual([good!.workflow.id]);
    ws.db
      .prepare("INSERT INTO wf_examples (namespace, key, ts, data) VALUES ('default', ?, 0, ?)")
      .run(good!.key, JSON.stringify({ input: "x", calls: "not calls" }));
    const example: Example = {
      input: "user ID noah_muller_9847: is my reservation ok?",
      calls: [
        { name: "get_user_details", args: { user_id: "noah_muller_9847" } },
        { name: "get_reservation_details", args: { reservation_id: "4OG6T3" } },
      ],
      results: [JSON.stringify({ reservations: ["4OG6T3"] }), "{}"],
      answer: "Your reservation is confirmed.",
    };
    expect(learnFrom(ws, "default", example, 3)?.id).toBe(good!.workflow.id);
    ws.close();
    const store = new MemorySessionStore();
    const asked: string[] = [];
    const agent = await createAgent({
      provider: counted([{ text: "the model answered" }]),
      store,
      tools: tools([]),
      plugins: [workflows({ db })],
      approve: (r: { call: { name: string } }) => (asked.push(r.call.name), true),
    });
    const session = await agent.session();
    const r = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    const events = await store.events(session.id);
    await agent.close();
    expect(diagnostics(events).filter((d) => d.startsWith("KEEL_HANDLER"))).toEqual([]);
    expect(asked).toEqual([OFFER_TOOL]);
    expect(r.text).toBe("Your reservation is confirmed.");
    expect(diagnostics(events).filter((d) => d.startsWith("workflow.store"))).toEqual([]);
  });
});

describe("workflows, adversarial: secrets", () => {
  const TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
  function lookup(got: unknown[]) {
    return defineTool({
      name: "lookup",
      description: "Look a user up.",
      parameters: { type: "object", properties: { user_id: { type: "string" }, token: { type: "string" } } },
      execute: (a: unknown) => (got.push(a), "{}"),
    });
  }

  it("turns whose calls held a secret teach no workflow (it would send the secret's placeholder), and the file never holds it", async () => {
    const users = ["mia_li_3668", "omar_davis_3817", "ivan_muller_7015"];
    const db = join(home, "wf.sqlite");
    const agent = await createAgent({
      provider: scriptedProvider(
        users.flatMap((u) => [
          { toolCalls: [{ id: `l-${u}`, name: "lookup", args: { user_id: u, token: TOKEN } }] },
          { text: "Found." },
        ]),
      ),
      store: new MemorySessionStore(),
      tools: [lookup([])],
      plugins: [workflows({ db })],
    });
    const s = await agent.session();
    for (const input of inputs) expect((await s.run(input)).verdict.status).toBe("completed");
    await agent.close();
    const ws = new WorkflowStore(db);
    expect(ws.all()).toEqual([]);
    ws.close();
    expect(readFileSync(db).includes(TOKEN)).toBe(false);
  });

  it("a stored plan whose argument holds a placeholder stops before sending it; the model takes over", async () => {
    const db = join(home, "wf.sqlite");
    const ws = new WorkflowStore(db);
    ws.save("default", "lookup", {
      id: "wf-placeholder",
      name: "lookup",
      steps: [
        {
          tool: "lookup",
          args: { user_id: { from: "input", slot: "p1" }, token: { from: "const", value: "[REDACTED:github_token]" } },
        },
      ],
      slots: [{ name: "p1", shape: "[a-z]{1,8}_[a-z]{1,10}_[0-9]{4}", order: 0 }],
      modelParams: [],
      cue: ["reservation", "user"],
      examples: 3,
    });
    ws.close();
    const got: unknown[] = [];
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "the model answered" }]),
      store,
      tools: [lookup(got)],
      plugins: [workflows({ db })],
      approve: () => true,
    });
    const session = await agent.session();
    const r = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    const events = await store.events(session.id);
    await agent.close();
    expect(got).toEqual([]);
    expect(r.text).toBe("the model answered");
    expect(diagnostics(events)).toContain(
      "workflow.redacted: The workflow stopped (redacted); the model takes the turn over.",
    );
  });
});

describe("workflows, adversarial: replay", () => {
  async function replayOf(events: KeelEvent[], replayHome: string) {
    return replaySession({
      events,
      build: (rig) =>
        createAgent({
          tools: tools([]),
          home: replayHome,
          provider: rig.provider,
          sideModel: rig.sideModel,
          store: rig.store,
          plugins: [workflows(), ...rig.plugins],
          ...(rig.approve ? { approve: rig.approve } : {}),
        }),
    });
  }

  it("a session that learned a workflow and was then served by it replays identically (answered rounds take no recorded model answer)", async () => {
    const recHome = mkdtempSync(join(tmpdir(), "keel-wf-rec-"));
    const store = new SqliteSessionStore({ path: join(recHome, "sessions.sqlite") });
    const users = ["mia_li_3668", "omar_davis_3817", "ivan_muller_7015"];
    const agent = await createAgent({
      provider: scriptedProvider(users.flatMap(learnedTurn)),
      store,
      home: recHome,
      tools: tools([]),
      plugins: [workflows()],
      approve: () => true,
    });
    const session = await agent.session();
    for (const input of inputs) await session.run(input);
    const r = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    expect(r.text).toBe("Your reservation is confirmed.");
    const events = await store.events(session.id);
    await agent.close();
    const lastTurn = events.filter((e) => e.turnId === r.turnId);
    expect(lastTurn.filter((e) => e.type === "round.answered")).toHaveLength(4);
    expect(lastTurn.some((e) => e.type === "model.responded")).toBe(false);
    const replayHome = mkdtempSync(join(tmpdir(), "keel-wf-rep-"));
    const rep = await replayOf(events, replayHome);
    rmSync(recHome, { recursive: true, force: true });
    rmSync(replayHome, { recursive: true, force: true });
    expect(rep.notes).toEqual([]);
    expect(rep.toolChanges).toEqual([]);
    expect(rep.turns.map((t) => t.replayed.text)).toEqual(Array(4).fill("Your reservation is confirmed."));
    expect(rep.identical).toBe(true);
  });
});

describe("workflows, adversarial: replay of a paused offer", () => {
  it("an offer paused for the person, approved and resumed, replays identically", async () => {
    const recHome = mkdtempSync(join(tmpdir(), "keel-wf-rec-"));
    const store = new SqliteSessionStore({ path: join(recHome, "sessions.sqlite") });
    const users = ["mia_li_3668", "omar_davis_3817", "ivan_muller_7015"];
    const agent = await createAgent({
      provider: scriptedProvider(users.flatMap(learnedTurn)),
      store,
      home: recHome,
      tools: tools([]),
      plugins: [workflows()],
    });
    const session = await agent.session();
    for (const input of inputs) await session.run(input);
    const paused = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    expect(paused.verdict).toMatchObject({ status: "paused", reason: "approval" });
    await session.approve(session.pendingApprovals()[0]!.callId);
    const done = await session.resume();
    expect(done.text).toBe("Your reservation is confirmed.");
    const events = await store.events(session.id);
    await agent.close();
    const replayHome = mkdtempSync(join(tmpdir(), "keel-wf-rep-"));
    const rep = await replaySession({
      events,
      build: (rig) =>
        createAgent({
          tools: tools([]),
          home: replayHome,
          provider: rig.provider,
          sideModel: rig.sideModel,
          store: rig.store,
          plugins: [workflows(), ...rig.plugins],
          ...(rig.approve ? { approve: rig.approve } : {}),
        }),
    });
    rmSync(recHome, { recursive: true, force: true });
    rmSync(replayHome, { recursive: true, force: true });
    expect(rep.notes).toEqual([]);
    expect(rep.toolChanges).toEqual([]);
    expect(rep.identical).toBe(true);
  });
});

describe("workflows, adversarial: huge inputs", () => {
  it("inputs longer than the gate reads teach no workflow (learning never scans a pasted log)", async () => {
    const pad = " lorem ipsum".repeat(400);
    const users = ["mia_li_3668", "omar_davis_3817", "ivan_muller_7015"];
    const db = join(home, "wf.sqlite");
    const agent = await createAgent({
      provider: scriptedProvider(users.flatMap(learnedTurn)),
      store: new MemorySessionStore(),
      tools: tools([]),
      plugins: [workflows({ db })],
    });
    const s = await agent.session();
    for (const input of inputs) expect((await s.run(`${input}${pad}`)).verdict.status).toBe("completed");
    await agent.close();
    const ws = new WorkflowStore(db);
    const stored = ws.db.prepare("SELECT count(*) AS n FROM wf_examples").get() as { n: number };
    expect(stored.n).toBe(0);
    expect(ws.all()).toEqual([]);
    ws.close();
  });

  it("a value longer than an id is not an input slot (its shape would be a regular expression run over every input)", () => {
    const long = (d: string) => `${"a-".repeat(60)}${d}`;
    const examples = ["1111", "2222", "3333"].map((d) => ({
      input: `please look up ${long(d)} now`,
      calls: [{ name: "get", args: { id: long(d) } }],
      results: ["{}"],
      answer: "ok",
    }));
    const w = synthesise(examples);
    expect(w?.slots).toEqual([]);
    expect(w?.steps[0]?.args.id).toEqual({ from: "model", param: "step1.id" });
    const short = synthesise(
      ["1111", "2222", "3333"].map((d) => ({
        ...examples[0]!,
        input: `please look up a-${d} now`,
        calls: [{ name: "get", args: { id: `a-${d}` } }],
      })),
    );
    expect(short?.slots).toHaveLength(1);
  });
});

describe("workflows, adversarial: the keel binary", () => {
  it('a config names the plugin by package ("@keel/plugin-workflows" with options): it loads, learns, and serves the next like input', async () => {
    const dir = join(home, "project");
    mkdirSync(join(dir, "node_modules", "@keel"), { recursive: true });
    symlinkSync(fileURLToPath(new URL("..", import.meta.url)), join(dir, "node_modules", "@keel", "plugin-workflows"));
    const turn = (u: string) => [
      { toolCalls: [{ name: "get_user_details", args: { user_id: u } }] },
      { text: "Your account is fine." },
    ];
    writeFileSync(
      join(dir, "agent.config.mjs"),
      `export default {
  name: "wf",
  offline: { script: JSON.parse(process.env.WF_SCRIPT) },
  plugins: [["@keel/plugin-workflows", { minExamples: 2 }]],
  tools: [{
    name: "get_user_details",
    description: "A user's profile.",
    parameters: { type: "object", properties: { user_id: { type: "string" } }, required: ["user_id"] },
    execute: (a) => JSON.stringify({ user: a.user_id }),
  }],
};
`,
    );
    const env = (u: string) => ({
      ...process.env,
      KEEL_HOME: join(dir, "home"),
      KEEL_OFFLINE: "1",
      WF_SCRIPT: JSON.stringify({ steps: turn(u) }),
    });
    for (const u of ["mia_li_3668", "omar_davis_3817"]) {
      const r = await runKeel(["run", `Is the account of user ID ${u} ok?`], { cwd: dir, env: env(u) });
      expect(r.stderr).not.toContain("does not export a plugin");
      expect(r.code).toBe(0);
    }
    // Served by the workflow: the script has nothing for this turn, so any model round would fail it.
    const served = await runKeel(["run", "--ask", "allow", "Is the account of user ID noah_muller_9847 ok?"], {
      cwd: dir,
      env: { ...env("x"), WF_SCRIPT: JSON.stringify({ steps: [] }) },
    });
    expect(served.code).toBe(0);
    expect(served.stdout.trim()).toBe("Your account is fine.");
    const ws = new WorkflowStore(join(dir, "home", "workflows.sqlite"));
    expect(ws.all().map((w) => w.workflow.name)).toEqual(["get_user_details"]);
    ws.close();
  });
});

describe("workflows, adversarial: a stopped workflow stays stopped", () => {
  it("a step that cannot be resolved hands over to the model, whose own calls are never taken for the workflow's steps", async () => {
    await learn();
    const ran: string[] = [];
    const base = tools(ran);
    // This user's profile has no reservations list: step 2's argument cannot be resolved.
    const odd = defineTool({
      name: "get_user_details",
      description: "A user's profile.",
      parameters: { type: "object", properties: { user_id: { type: "string" } }, required: ["user_id"] },
      execute: (a: { user_id: string }) => (ran.push(`user:${a.user_id}`), JSON.stringify({ bookings: ["4OG6T3"] })),
    });
    const provider = counted([
      { toolCalls: [{ id: "m1", name: "get_reservation_details", args: { reservation_id: "4OG6T3" } }] },
      { text: "The model found booking 4OG6T3 confirmed." },
    ]);
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider,
      store,
      tools: [odd, base[1]!],
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      approve: () => true,
    });
    const session = await agent.session();
    const r = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    const events = await store.events(session.id);
    await agent.close();
    expect(ran).toEqual(["user:noah_muller_9847", "res:4OG6T3"]);
    expect(provider.requests.length).toBe(2);
    expect(r.text).toBe("The model found booking 4OG6T3 confirmed.");
    expect(diagnostics(events).filter((d) => d.startsWith("workflow.unresolved"))).toHaveLength(1);
  });
});

describe("workflows, adversarial: what silences a workflow", () => {
  it("one namespace declining twice does not silence the same workflow in another", async () => {
    await learn(undefined, "a");
    await learn(undefined, "b");
    expect(await offeredIn("a", false)).toEqual([OFFER_TOOL]);
    expect(await offeredIn("a", false)).toEqual([OFFER_TOOL]);
    expect(await offeredIn("a", false)).toEqual([]);
    expect(await offeredIn("b", true)).toEqual([OFFER_TOOL]);
  });

  it("a model calling workflow_run with a real workflow's id and other steps never counts as a decline of it", async () => {
    await learn();
    const ws = new WorkflowStore(join(home, "wf.sqlite"));
    const [w] = ws.visible("default");
    ws.close();
    const forged = {
      workflow: w!.workflow.id,
      name: w!.workflow.name,
      params: {},
      steps: [{ tool: "delete_account", args: { user_id: { from: "const", value: "mia_li_3668" } } }],
    };
    const model: ScriptStep[] = [
      { toolCalls: [{ id: "f", name: OFFER_TOOL, args: forged }] },
      { text: "the model answered" },
    ];
    for (let i = 0; i < 3; i++) expect(await offeredIn("default", true, model, "hello there")).toEqual([]);
    expect(await offeredIn("default", true)).toEqual([OFFER_TOOL]);
  });
});

describe("workflows, adversarial: steering", () => {
  it("a steering message mid-workflow ends it: no further step runs, the model answers the steer", async () => {
    await learn();
    const ran: string[] = [];
    const base = tools(ran);
    let session: Awaited<ReturnType<Awaited<ReturnType<typeof createAgent>>["session"]>> | undefined;
    const steered = defineTool({
      name: "get_user_details",
      description: "A user's profile.",
      parameters: { type: "object", properties: { user_id: { type: "string" } }, required: ["user_id"] },
      execute: (a: { user_id: string }) => {
        ran.push(`user:${a.user_id}`);
        session!.steer("Actually, stop: I only wanted my name.");
        return JSON.stringify({ reservations: ["4OG6T3"] });
      },
    });
    const provider = counted([{ text: "Your name is Noah." }]);
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider,
      store,
      tools: [steered, base[1]!],
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      approve: () => true,
    });
    session = await agent.session();
    const r = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    const events = await store.events(session.id);
    await agent.close();
    expect(ran).toEqual(["user:noah_muller_9847"]);
    expect(provider.requests.length).toBe(1);
    expect(r.text).toBe("Your name is Noah.");
    expect(session.messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "tool",
      "user",
      "assistant",
    ]);
    expect(diagnostics(events)).toEqual([expect.stringMatching(/^workflow\.matched/)]);
  });
});

describe("workflows, adversarial: one file, several processes", () => {
  it("four processes learning and counting at once: no error, every outcome counted, the newest examples kept", async () => {
    const db = join(home, "wf.sqlite");
    const worker = fileURLToPath(new URL("./support/concurrent-worker.ts", import.meta.url));
    const outs = await Promise.all(
      ["a", "b", "c", "d"].map(
        (who) =>
          new Promise<{ code: number | null; out: string }>((done) => {
            const child = spawn(process.execPath, [worker, db, who]);
            let out = "";
            child.stdout.on("data", (d: Buffer) => (out += d.toString()));
            child.stderr.on("data", (d: Buffer) => (out += d.toString()));
            child.on("close", (code) => done({ code, out }));
          }),
      ),
    );
    expect(outs.map((o) => [o.code, JSON.parse(o.out.trim().split("\n").at(-1)!).errors])).toEqual(
      Array(4).fill([0, 0]),
    );
    const ws = new WorkflowStore(db);
    expect(ws.db.prepare("SELECT count(*) AS n FROM wf_examples").get()).toEqual({ n: EXAMPLES_KEPT });
    expect(ws.db.prepare("SELECT accepted, declined FROM wf_offer_outcomes").all()).toEqual([
      { accepted: 120, declined: 120 },
    ]);
    expect(ws.all()).toHaveLength(1);
    ws.close();
  });
});

describe("workflows, adversarial: a tool removed since", () => {
  it("a step whose tool is gone fails as an unknown tool; the model takes over with the error, and the offer counts as declined", async () => {
    await learn();
    const ran: string[] = [];
    const provider = counted([{ text: "the model answered" }]);
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      tools: [tools(ran)[0]!],
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      approve: () => true,
    });
    const session = await agent.session();
    const r = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    await agent.close();
    expect(ran).toEqual(["user:noah_muller_9847"]);
    expect(provider.requests.length).toBe(1);
    expect(r.text).toBe("the model answered");
    expect(messageText(session.messages.filter((m) => m.role === "tool").at(-1)!)).toContain("KEEL_TOOL_UNKNOWN");
    const ws = new WorkflowStore(join(home, "wf.sqlite"));
    expect(ws.visible("default").map((w) => [w.accepted, w.declined])).toEqual([[0, 1]]);
    ws.close();
  });
});

describe("workflows, adversarial: the learned answer", () => {
  it("a result unlike every example's where they all agreed (a cancelled reservation) never gets the learned 'confirmed' answer", async () => {
    await learn();
    const ran: string[] = [];
    const [users] = tools(ran);
    const cancelled = defineTool({
      name: "get_reservation_details",
      description: "A reservation.",
      parameters: { type: "object", properties: { reservation_id: { type: "string" } }, required: ["reservation_id"] },
      execute: (a: { reservation_id: string }) =>
        JSON.stringify({ reservation_id: a.reservation_id, status: "cancelled" }),
    });
    const agent = await createAgent({
      provider: counted([{ text: "the model answered" }]),
      store: new MemorySessionStore(),
      tools: [users!, cancelled],
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      approve: () => true,
    });
    const r = await (await agent.session()).run("Could you check the reservation of user ID noah_muller_9847?");
    await agent.close();
    expect(r.text).not.toContain("confirmed.");
    expect(r.text).toContain('"status":"cancelled"');
  });

  it("results like the examples' keep the learned answer", async () => {
    await learn();
    const agent = await createAgent({
      provider: counted([{ text: "the model answered" }]),
      store: new MemorySessionStore(),
      tools: tools([]),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      approve: () => true,
    });
    const r = await (await agent.session()).run("Could you check the reservation of user ID noah_muller_9847?");
    await agent.close();
    expect(r.text).toBe("Your reservation is confirmed.");
  });
});

describe("workflows, adversarial: structured output", () => {
  it("a turn asking for structured output: the model corrects the workflow's answer once, and the workflow still counts as accepted", async () => {
    await learn();
    const provider = counted([{ text: '{"status":"confirmed"}' }]);
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      tools: tools([]),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      approve: () => true,
    });
    const session = await agent.session();
    const r = await session.run("Could you check the reservation of user ID noah_muller_9847?", {
      output: z.object({ status: z.string() }),
    });
    await agent.close();
    expect(r.verdict.status).toBe("completed");
    expect((r as { output?: unknown }).output).toEqual({ status: "confirmed" });
    expect(provider.requests.length).toBe(1);
    const ws = new WorkflowStore(join(home, "wf.sqlite"));
    expect(ws.visible("default").map((w) => [w.accepted, w.declined])).toEqual([[1, 0]]);
    ws.close();
  });
});

describe("workflows, adversarial: the agent's own workflow_run", () => {
  it("an agent tool named workflow_run is the agent's: its calls run untouched, and no offer is ever sent to it", async () => {
    await learn();
    const got: unknown[] = [];
    const ci = defineTool({
      name: OFFER_TOOL,
      description: "Runs one of the team's CI workflows.",
      parameters: { type: "object", properties: { workflow: { type: "string" } } },
      execute: (a: unknown) => (got.push(a), "ran CI"),
    });
    const asked: string[] = [];
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider: counted([
        { toolCalls: [{ id: "ci1", name: OFFER_TOOL, args: { workflow: "deploy" } }] },
        { text: "Deployed." },
        { text: "the model answered" },
      ]),
      store,
      tools: [...tools([]), ci],
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      approve: (r: { call: { name: string } }) => (asked.push(r.call.name), true),
    });
    const session = await agent.session();
    const r1 = await session.run("Run the deploy workflow");
    const r2 = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    const events = await store.events(session.id);
    await agent.close();
    expect(r1.text).toBe("Deployed.");
    expect(got).toEqual([{ workflow: "deploy" }]);
    expect(asked).toEqual([]);
    expect(r2.text).toBe("the model answered");
    expect(diagnostics(events).filter((d) => /^workflow\.(?!tool_taken|matched)/.test(d))).toEqual([]);
    expect(diagnostics(events).filter((d) => d.startsWith("workflow.tool_taken"))).toEqual([
      expect.stringContaining("rename that tool"),
      expect.stringContaining("this turn's offer was dropped"),
    ]);
  });
});

describe("workflows, adversarial: another plugin's workflow_run", () => {
  it("when another plugin's tool holds the name, an offer is never run by that tool", async () => {
    await learn();
    const got: unknown[] = [];
    const other = definePlugin({
      name: "ci",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_tool_materialization", () => ({
          kind: "tool_bundle",
          bundleId: "ci",
          tools: [
            defineTool({
              name: OFFER_TOOL,
              description: "Runs a CI workflow.",
              execute: (a: unknown) => (got.push(a), "ran CI"),
            }),
          ],
        }));
      },
    });
    const agent = await createAgent({
      provider: counted([{ text: "the model answered" }]),
      store: new MemorySessionStore(),
      tools: tools([]),
      plugins: [other, workflows({ db: join(home, "wf.sqlite") })],
      approve: () => true,
    });
    const r = await (await agent.session()).run("Could you check the reservation of user ID noah_muller_9847?");
    await agent.close();
    expect(got).toEqual([]);
    expect(r.text).toBe("the model answered");
  });
});

describe("workflows, adversarial: relearned while an offer waits", () => {
  it("a workflow relearned with the same steps (a new example changed its learned answer) still runs the offer the person approved later", async () => {
    await learn();
    const store = new MemorySessionStore();
    const first = await createAgent({
      provider: counted([]),
      store,
      tools: tools([]),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
    });
    const s1 = await first.session();
    const paused = await s1.run("Could you check the reservation of user ID noah_muller_9847?");
    expect(paused.verdict).toMatchObject({ status: "paused", reason: "approval" });
    await first.close();
    // Meanwhile, elsewhere: the model does the same calls itself and answers differently; the workflow is relearned.
    const ws = new WorkflowStore(join(home, "wf.sqlite"));
    const before = ws.visible("default")[0]!.workflow;
    learnFrom(
      ws,
      "default",
      {
        input: "Please check my reservation, user ID omar_davis_3817",
        calls: [
          { name: "get_user_details", args: { user_id: "omar_davis_3817" } },
          { name: "get_reservation_details", args: { reservation_id: "JG7FMM" } },
        ],
        results: [
          JSON.stringify({ reservations: ["JG7FMM"] }),
          JSON.stringify({ reservation_id: "JG7FMM", status: "confirmed" }),
        ],
        answer: "All good, your booking stands.",
      },
      3,
    );
    const after = ws.visible("default")[0]!.workflow;
    ws.close();
    expect(after.id).toBe(before.id);
    expect(after.answer).not.toBe(before.answer);
    const ran: string[] = [];
    const provider = counted([{ text: "the model answered" }]);
    const again = await createAgent({
      provider,
      store,
      tools: tools(ran),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
    });
    const s2 = await again.session(s1.id);
    await s2.approve(s2.pendingApprovals()[0]!.callId);
    const done = await s2.resume();
    await again.close();
    expect(ran).toEqual(["user:noah_muller_9847", "res:4OG6T3"]);
    expect(provider.requests.length).toBe(0);
    expect(done.text).toBe("Your reservation is confirmed.");
  });
});

describe("workflows, adversarial: a guard mid-workflow", () => {
  it("maxRounds running out mid-workflow: the workflow stops without an ignored answer, the model gives the last answer", async () => {
    await learn();
    const ran: string[] = [];
    const provider = counted([{ text: "the model's last word" }]);
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider,
      store,
      tools: tools(ran),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      approve: () => true,
      limits: { maxRounds: 2 },
    });
    const session = await agent.session();
    const r = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    const events = await store.events(session.id);
    await agent.close();
    expect(ran).toEqual(["user:noah_muller_9847"]);
    expect(provider.requests.length).toBe(1);
    expect(r.text).toBe("the model's last word");
    const said = diagnostics(events);
    expect(said.filter((d) => d.startsWith("KEEL_ANSWER_IGNORED"))).toEqual([]);
    expect(said).toContain("workflow.cut_short: The workflow stopped (cut_short); the model takes the turn over.");
  });
});
