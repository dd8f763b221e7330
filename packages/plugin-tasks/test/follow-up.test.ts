/**
 * Following up with a subagent: `task({ session })` runs another turn of an earlier child
 * session, which sees its own history; only the parent's own children of that profile can be
 * continued. And a crash mid-task: the parent's cut-off call says which child session kept the
 * work, and continuing that session picks up where it stopped.
 */
import { describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { KeelEvent, Message, ModelProvider, SessionStore } from "@keel/kernel";
import { tasks } from "../src/index.ts";

const events = async (store: SessionStore, id: string) => (await store.events(id)) as KeelEvent[];
const toolTexts = (messages: readonly Message[]) =>
  messages.filter((m) => m.role === "tool").map((m) => JSON.stringify(m.content));
const agentWith = (store: SessionStore, parent: ModelProvider, child: ModelProvider) =>
  createAgent({
    name: "desk",
    provider: parent,
    sideModel: false,
    store,
    plugins: [
      tasks({
        profiles: {
          scout: { description: "Looks things up.", model: child },
          other: { description: "Something else.", model: child },
        },
      }),
    ],
  });

describe("task follow-ups (session)", () => {
  it("a follow-up continues the earlier child session: the child sees its history, the parent log links the call", async () => {
    const store = new MemorySessionStore();
    const child1 = scriptedProvider([{ text: "The capital is Lisbon." }]);
    const a1 = await agentWith(
      store,
      scriptedProvider([
        { toolCalls: [{ id: "t1", name: "task", args: { profile: "scout", prompt: "Capital of Portugal?" } }] },
        { text: "Lisbon." },
      ]),
      child1,
    );
    const s1 = await a1.session();
    await s1.run("Ask the scout.");
    const childId = (
      (await events(store, s1.id)).find((e) => e.type === "child.started") as Extract<
        KeelEvent,
        { type: "child.started" }
      >
    ).childSessionId;
    await a1.close();

    const child2 = scriptedProvider([{ text: "About 545,000 people." }]);
    const a2 = await agentWith(
      store,
      scriptedProvider([
        {
          toolCalls: [
            { id: "t2", name: "task", args: { profile: "scout", prompt: "And its population?", session: childId } },
          ],
        },
        { text: "About 545,000." },
      ]),
      child2,
    );
    const s2 = await a2.session(s1.id);
    const r = await s2.run("Follow up.");
    expect(r.text).toBe("About 545,000.");
    // The child's request carried its first exchange, then the follow-up.
    const sent = child2.requests[0]!.messages.map((m) => `${m.role}: ${JSON.stringify(m.content)}`).join("\n");
    expect(sent).toMatch(/Capital of Portugal\?[\s\S]*The capital is Lisbon\.[\s\S]*And its population\?/);
    expect(toolTexts(s2.messages).at(-1)).toContain(`session ${childId}`);
    const links = (await events(store, s1.id)).filter((e) => e.type === "child.started");
    expect(links.map((e) => (e as { childSessionId: string }).childSessionId)).toEqual([childId, childId]);
    const childLog = await events(store, childId);
    expect(childLog.filter((e) => e.type === "turn.started").map((e) => (e as { trigger: string }).trigger)).toEqual([
      "subagent",
      "subagent",
    ]);
    await a2.close();
  });

  it("only the parent's own child of the same profile can be continued; anything else is an error result the model reads", async () => {
    const store = new MemorySessionStore();
    const a1 = await agentWith(
      store,
      scriptedProvider([
        { toolCalls: [{ id: "t1", name: "task", args: { profile: "scout", prompt: "hello" } }] },
        { text: "ok" },
      ]),
      scriptedProvider([{ text: "hi" }]),
    );
    const s1 = await a1.session();
    await s1.run("go");
    const childId = (
      (await events(store, s1.id)).find((e) => e.type === "child.started") as Extract<
        KeelEvent,
        { type: "child.started" }
      >
    ).childSessionId;
    const stranger = (await a1.session()).id;
    await a1.close();

    const a2 = await agentWith(
      store,
      scriptedProvider([
        {
          toolCalls: [
            { id: "x1", name: "task", args: { profile: "other", prompt: "continue", session: childId } },
            { id: "x2", name: "task", args: { profile: "scout", prompt: "continue", session: stranger } },
            { id: "x3", name: "task", args: { profile: "scout", prompt: "continue", session: "no-such-session" } },
          ],
        },
        { text: "none of that worked" },
      ]),
      scriptedProvider([]),
    );
    const s2 = await a2.session(s1.id);
    await s2.run("try");
    const [other, strange, missing] = toolTexts(s2.messages).slice(-3);
    expect(other).toContain(`KEEL_CHILD_INVALID`);
    expect(other).toContain(`belongs to \\"scout\\", not \\"other\\"`);
    expect(strange).toContain("is not a child session of this session");
    expect(missing).toContain("is not a session");
    // Nothing ran in the refused sessions.
    expect((await events(store, stranger)).some((e) => e.type === "turn.started")).toBe(false);
    await a2.close();
  });
});
