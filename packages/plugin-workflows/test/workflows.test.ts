/**
 * The workflow gate in real turns (createAgent, the scripted model, a SQLite workflows file):
 * three successful turns with the same calls teach a workflow; a fourth input like them is
 * offered it; approved, its steps run without a model round; declined or failed, the model
 * takes over; paused on the offer, it finishes in another agent.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createAgent, defineTool } from "@keel/agent";
import type { KeelEvent } from "@keel/kernel";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { ScriptStep } from "@keel/testkit";
import { OFFER_TOOL, WorkflowStore, workflows } from "../src/index.ts";

let home: string;
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "keel-wf-"));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

const USERS: Record<string, { name: string; reservations: string[] }> = {
  mia_li_3668: { name: "Mia Li", reservations: ["Z7GOZK"] },
  omar_davis_3817: { name: "Omar Davis", reservations: ["JG7FMM"] },
  ivan_muller_7015: { name: "Ivan Muller", reservations: ["G72NSF"] },
  noah_muller_9847: { name: "Noah Muller", reservations: ["4OG6T3"] },
};

function tools(ran: string[], failReservation = false) {
  return [
    defineTool({
      name: "get_user_details",
      description: "A user's profile.",
      parameters: { type: "object", properties: { user_id: { type: "string" } }, required: ["user_id"] },
      execute: (a: { user_id: string }) => {
        ran.push(`user:${a.user_id}`);
        const u = USERS[a.user_id];
        if (!u) throw new Error(`no user ${a.user_id}`);
        return JSON.stringify(u);
      },
    }),
    defineTool({
      name: "get_reservation_details",
      description: "A reservation.",
      parameters: { type: "object", properties: { reservation_id: { type: "string" } }, required: ["reservation_id"] },
      execute: (a: { reservation_id: string }) => {
        ran.push(`res:${a.reservation_id}`);
        if (failReservation) throw new Error("reservation service down");
        return JSON.stringify({ reservation_id: a.reservation_id, status: "confirmed" });
      },
    }),
  ];
}

/** What the model did in each learning turn: look the user up, then their first reservation. */
function learnedTurn(user: string): ScriptStep[] {
  return [
    { toolCalls: [{ id: `u-${user}`, name: "get_user_details", args: { user_id: user } }] },
    {
      toolCalls: [
        { id: `r-${user}`, name: "get_reservation_details", args: { reservation_id: USERS[user]!.reservations[0] } },
      ],
    },
    { text: "Your reservation is confirmed." },
  ];
}

/** The scripted provider: `requests` holds every request it was sent. */
const counted = (steps: ScriptStep[]) => scriptedProvider(steps);

const inputs = [
  "Hi, my user ID is mia_li_3668. Is my reservation still on?",
  "My user ID is omar_davis_3817 - is my reservation ok?",
  "Hello! user ID ivan_muller_7015, can you check my reservation?",
];

async function learn(store = new MemorySessionStore()) {
  const ran: string[] = [];
  const users = ["mia_li_3668", "omar_davis_3817", "ivan_muller_7015"];
  const agent = await createAgent({
    provider: scriptedProvider(users.flatMap(learnedTurn)),
    store,
    tools: tools(ran),
    plugins: [workflows({ db: join(home, "wf.sqlite") })],
  });
  const session = await agent.session();
  for (const input of inputs) expect((await session.run(input)).verdict.status).toBe("completed");
  const events = await store.events(session.id);
  await agent.close();
  return { events, ran };
}

describe("workflows: learned from repeated successful turns", () => {
  it("the third turn with the same calls teaches a workflow: the user id from the input, the reservation from the first result", async () => {
    const { events } = await learn();
    const learned = events.filter((e) => e.type === "phase.completed" || e.type === "diagnostic");
    expect(JSON.stringify(learned)).toContain("workflow.learned");
    const store = new WorkflowStore(join(home, "wf.sqlite"));
    const [w] = store.visible("default");
    store.close();
    expect(w?.reviewed).toBe(false);
    expect(w?.workflow.steps).toEqual([
      { tool: "get_user_details", args: { user_id: { from: "input", slot: "p1" } } },
      {
        tool: "get_reservation_details",
        args: { reservation_id: { from: "step", step: 0, path: ["reservations", 0] } },
      },
    ]);
    expect(w?.workflow.slots).toEqual([{ name: "p1", shape: "[a-z]{1,8}_[a-z]{1,10}_[0-9]{4}", order: 0 }]);
    expect(w?.workflow.cue).toEqual(expect.arrayContaining(["user", "reservation"]));
    expect(w?.workflow.answer).toBe("Your reservation is confirmed.");
  });
});

describe("workflows: the gate", () => {
  async function offered(
    answer: boolean | "pause",
    input = "Could you check the reservation of user ID noah_muller_9847?",
    fail = false,
    learnFirst = true,
  ) {
    if (learnFirst) await learn();
    const ran: string[] = [];
    const provider = counted([{ text: "the model answered" }]);
    const asked: string[] = [];
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider,
      store,
      tools: tools(ran, fail),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      ...(answer === "pause"
        ? {}
        : {
            approve: (r: { call: { name: string }; reason?: string }) => {
              asked.push(`${r.call.name}: ${r.reason ?? ""}`);
              return answer;
            },
          }),
    });
    const session = await agent.session();
    const r = await session.run(input);
    const events = await store.events(session.id);
    return { r, ran, provider, asked, events, agent, session, store };
  }

  it("approved: the steps run as tool calls with the filled parameter, no model round, the workflow's answer ends the turn", async () => {
    const { r, ran, provider, asked, events, agent } = await offered(true);
    await agent.close();
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain(`${OFFER_TOOL}: Run the learned workflow "get_user_details → get_reservation_details"`);
    expect(asked[0]).toContain("noah_muller_9847");
    expect(ran).toEqual(["user:noah_muller_9847", "res:4OG6T3"]);
    expect(provider.requests.length).toBe(0);
    expect(r.verdict.status).toBe("completed");
    expect(r.text).toBe("Your reservation is confirmed.");
    const answered = events.filter((e) => e.type === "round.answered") as Array<
      Extract<KeelEvent, { type: "round.answered" }>
    >;
    expect(answered.map((e) => e.reason)).toEqual([
      expect.stringMatching(/^offer workflow wf-/),
      "workflow step 1",
      "workflow step 2",
      "workflow done",
    ]);
  });

  it("declined: nothing of the workflow runs and the model answers, seeing the declined offer", async () => {
    const { r, ran, provider, agent, session } = await offered(false);
    await agent.close();
    expect(ran).toEqual([]);
    expect(provider.requests.length).toBe(1);
    expect(r.text).toBe("the model answered");
    const offer = session.messages.find((m) => m.role === "tool");
    expect(offer).toMatchObject({ toolName: OFFER_TOOL, isError: true });
  });

  it("a failed step stops the workflow: the model takes over with the error in context", async () => {
    const { r, ran, provider, agent, session } = await offered(true, undefined, true);
    await agent.close();
    expect(ran).toEqual(["user:noah_muller_9847", "res:4OG6T3"]);
    expect(provider.requests.length).toBe(1);
    expect(r.text).toBe("the model answered");
    expect(JSON.stringify(session.messages)).toContain("reservation service down");
  });

  it("an input unlike the examples is not offered anything (no cue words, or the value's shape missing)", async () => {
    await learn();
    for (const input of ["What is the baggage allowance?", "Check my reservation please, my user ID is unknown"]) {
      const { ran, provider, asked, agent } = await offered(true, input, false, false);
      await agent.close();
      expect(asked).toEqual([]);
      expect(ran).toEqual([]);
      expect(provider.requests.length).toBe(1);
    }
  });

  it("paused on the offer (no approve callback): approved from another agent on the same store, the steps run there", async () => {
    const { r, store, agent, session } = await offered("pause");
    expect(r.verdict).toMatchObject({ status: "paused", reason: "approval" });
    await agent.close();
    const ran: string[] = [];
    const provider = counted([]);
    const again = await createAgent({
      provider,
      store,
      tools: tools(ran),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
    });
    const s = await again.session(session.id);
    const [p] = s.pendingApprovals();
    expect(p?.name).toBe(OFFER_TOOL);
    await s.approve(p!.callId);
    const done = await s.resume();
    await again.close();
    expect(done.verdict.status).toBe("completed");
    expect(done.text).toBe("Your reservation is confirmed.");
    expect(ran).toEqual(["user:noah_muller_9847", "res:4OG6T3"]);
    expect(provider.requests.length).toBe(0);
  });

  it("a revoked workflow is not offered and not learned again", async () => {
    await learn();
    const ws = new WorkflowStore(join(home, "wf.sqlite"));
    const [w] = ws.visible("default");
    expect(ws.revoke(w!.workflow.id)).toBe(true);
    ws.close();
    const { asked, agent } = await offeredAfterRevoke();
    await agent.close();
    expect(asked).toEqual([]);
    await learn();
    const ws2 = new WorkflowStore(join(home, "wf.sqlite"));
    expect(ws2.visible("default")).toEqual([]);
    ws2.close();
  });

  async function offeredAfterRevoke() {
    const asked: string[] = [];
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "ok" }]),
      store: new MemorySessionStore(),
      tools: tools([]),
      plugins: [workflows({ db: join(home, "wf.sqlite") })],
      approve: (r: { call: { name: string } }) => (asked.push(r.call.name), true),
    });
    await (await agent.session()).run("Could you check the reservation of user ID noah_muller_9847?");
    return { asked, agent };
  }
});

describe("workflows: a parameter only a model can fill", () => {
  /** Tools whose profile is prose: the reservation cannot be read from it by path. */
  function proseTools(ran: string[]) {
    return [
      defineTool({
        name: "get_user_details",
        description: "A user's profile.",
        parameters: { type: "object", properties: { user_id: { type: "string" } } },
        execute: (a: { user_id: string }) => (
          ran.push(`user:${a.user_id}`), `${a.user_id} holds ${USERS[a.user_id]?.reservations[0]}`
        ),
      }),
      defineTool({
        name: "get_reservation_details",
        description: "A reservation.",
        parameters: { type: "object", properties: { reservation_id: { type: "string" } } },
        execute: (a: { reservation_id: string }) => (ran.push(`res:${a.reservation_id}`), "confirmed"),
      }),
    ];
  }

  /** Three turns over prose results teach a workflow whose reservation only a model can fill; returns its file. */
  async function teachProse(): Promise<string> {
    const db = join(home, "wf.sqlite");
    const users = ["mia_li_3668", "omar_davis_3817", "ivan_muller_7015"];
    const teach = await createAgent({
      provider: scriptedProvider(users.flatMap(learnedTurn)),
      store: new MemorySessionStore(),
      tools: proseTools([]),
      plugins: [workflows({ db })],
    });
    const s = await teach.session();
    for (const input of inputs) await s.run(input);
    await teach.close();
    return db;
  }

  it("one side-model call fills it before the offer; the rounds still need no model", async () => {
    const db = await teachProse();
    const ws = new WorkflowStore(db);
    const [w] = ws.visible("default");
    ws.close();
    expect(w?.workflow.modelParams).toEqual(["step2.reservation_id"]);

    const side = counted([{ text: '{"step2.reservation_id": "4OG6T3"}' }]);
    const main = counted([]);
    const ran: string[] = [];
    const agent = await createAgent({
      provider: main,
      sideModel: side,
      store: new MemorySessionStore(),
      tools: proseTools(ran),
      plugins: [workflows({ db })],
      approve: () => true,
    });
    const r = await (await agent.session()).run("Could you check the reservation of user ID noah_muller_9847?");
    await agent.close();
    expect(side.requests.length).toBe(1);
    expect(main.requests.length).toBe(0);
    expect(ran).toEqual(["user:noah_muller_9847", "res:4OG6T3"]);
    expect(r.verdict.status).toBe("completed");
  });

  it("without a usable answer from the model the workflow is not offered and the turn goes on as usual", async () => {
    const db = await teachProse();
    const side = counted([{ text: "I would rather not say." }]);
    const main = counted([{ text: "the model answered" }]);
    const asked: string[] = [];
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider: main,
      sideModel: side,
      store,
      tools: proseTools([]),
      plugins: [workflows({ db })],
      approve: (r: { call: { name: string } }) => (asked.push(r.call.name), true),
    });
    const session = await agent.session();
    const r = await session.run("Could you check the reservation of user ID noah_muller_9847?");
    await agent.close();
    expect(asked).toEqual([]);
    expect(r.text).toBe("the model answered");
    const events = await store.events(session.id);
    expect(JSON.stringify(events)).toContain("workflow.unfilled");
  });
});
