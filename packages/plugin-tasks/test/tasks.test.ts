/**
 * Subagents through real kernel turns: a parent fans out two parallel tasks whose children call
 * tools and return schema-valid answers (usage rolled up, sessions linked both ways, trigger
 * `subagent`); a child over its budget; the depth and fan-out limits; cancelling the parent
 * mid-task; and one delegation through the real Anthropic SDK against the local wire server.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, defineTool } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { KeelEvent, SessionStore } from "@keel/kernel";
import { anthropicProvider } from "@keel/providers";
import { startWireServer } from "@keel/wire-server";
import { tasks } from "../src/index.ts";

const counter = defineTool({
  name: "count",
  description: "Counts a kind of fruit.",
  input: z.object({ fruit: z.string() }),
  category: "info",
  execute: ({ fruit }) => (fruit === "apples" ? "12" : "7"),
});
const Count = z.object({ fruit: z.string(), count: z.number().int() });

const events = async (store: SessionStore, id: string) => (await store.events(id)) as KeelEvent[];

describe("tasks", () => {
  it("fans out two parallel tasks; each child calls a tool and returns a schema-valid answer; usage rolls up; sessions are linked", async () => {
    const store = new MemorySessionStore();
    const child = scriptedProvider([
      {
        when: { lastUserIncludes: "apples" },
        toolCalls: [{ id: "a1", name: "count", args: { fruit: "apples" } }],
        usage: { inputTokens: 100, outputTokens: 10 },
      },
      {
        when: { lastUserIncludes: "pears" },
        toolCalls: [{ id: "p1", name: "count", args: { fruit: "pears" } }],
        usage: { inputTokens: 100, outputTokens: 10 },
      },
      {
        when: { lastUserIncludes: "apples" },
        text: '{"fruit":"apples","count":12}',
        usage: { inputTokens: 120, outputTokens: 12 },
      },
      {
        when: { lastUserIncludes: "pears" },
        text: '{"fruit":"pears","count":7}',
        usage: { inputTokens: 120, outputTokens: 12 },
      },
    ]);
    const parent = scriptedProvider([
      {
        toolCalls: [
          { id: "t1", name: "task", args: { profile: "counter", prompt: "Count the apples." } },
          { id: "t2", name: "task", args: { profile: "counter", prompt: "Count the pears." } },
        ],
        usage: { inputTokens: 50, outputTokens: 5 },
      },
      { text: "12 apples and 7 pears.", usage: { inputTokens: 60, outputTokens: 6 } },
    ]);
    const agent = await createAgent({
      name: "shop",
      provider: parent,
      sideModel: false,
      store,
      plugins: [
        tasks({
          profiles: {
            counter: {
              description: "Counts fruit with the count tool.",
              instructions: "Count, then answer as JSON.",
              model: child,
              tools: [counter],
              output: Count,
            },
          },
        }),
      ],
    });
    const session = await agent.session();
    const r = await session.run("How many apples and pears?");
    expect(r.text).toBe("12 apples and 7 pears.");
    // The parent sent the task tool, and both children's answers came back as tool results.
    expect(parent.requests[0]!.tools.map((t) => t.name)).toEqual(["task"]);
    const results = parent.requests[1]!.messages.filter((m) => m.role === "tool").map(
      (m) => (m.content[0] as { text: string }).text,
    );
    expect(results[0]).toMatch(
      /^\[task counter: session [0-9a-f-]{36}, 2 round\(s\), 1 tool call\(s\), 242 tokens\]\n\{"fruit":"apples","count":12\}$/,
    );
    expect(results[1]).toMatch(/\n\{"fruit":"pears","count":7\}$/);
    // They ran in parallel: the second child started before the first finished.
    const parentLog = await events(store, session.id);
    const links = parentLog.filter(
      (e): e is Extract<KeelEvent, { type: "child.started" }> => e.type === "child.started",
    );
    expect(links.map((l) => l.callId)).toEqual(["t1", "t2"]);
    const [a, b] = await Promise.all(links.map((l) => events(store, l.childSessionId)));
    expect(b!.find((e) => e.type === "turn.started")!.ts).toBeLessThanOrEqual(
      a!.find((e) => e.type === "turn.completed")!.ts,
    );
    // Usage: the parent's own 121 tokens plus both children's 242.
    expect(r.usage.inputTokens + r.usage.outputTokens).toBe(121 + 242 * 2);
    // Linked both ways, trigger subagent, listed with the agent's sessions.
    expect(a![0]).toMatchObject({
      type: "session.created",
      agent: "shop",
      parent: { sessionId: session.id, turnId: r.turnId, callId: "t1", name: "counter", depth: 1 },
    });
    expect(a!.find((e) => e.type === "turn.started")).toMatchObject({
      trigger: "subagent",
      metadata: { parent: { sessionId: session.id, callId: "t1" } },
    });
    expect((await agent.sessions(10)).map((s) => s.id).sort()).toEqual(
      [session.id, ...links.map((l) => l.childSessionId)].sort(),
    );
    await agent.close();
  });

  it("a child over its budget ends stopped, and the parent gets a result that says so; the parent's remaining tool calls cap the child", async () => {
    // The child keeps calling tools; after its second call its guard leaves it one round without tools.
    const child = scriptedProvider([
      ...Array.from({ length: 2 }, (_, i) => ({
        toolCalls: [{ id: `c${i}`, name: "count", args: { fruit: "apples" } }],
      })),
      { text: "12 so far, then I ran out." },
    ]);
    const parent = scriptedProvider([
      { toolCalls: [{ id: "t1", name: "task", args: { profile: "counter", prompt: "Count forever." } }] },
      { text: "The counter ran out of budget." },
    ]);
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider: parent,
      sideModel: false,
      store,
      limits: { maxToolCalls: 3 },
      plugins: [tasks({ profiles: { counter: { description: "Counts.", model: child, tools: [counter] } } })],
    });
    const session = await agent.session();
    const r = await session.run("count");
    expect(r.text).toBe("The counter ran out of budget.");
    const result = parent.requests[1]!.messages.find((m) => m.role === "tool")!;
    expect(JSON.stringify(result)).toMatch(
      /the subagent did not finish: stopped by max_tool_calls\.\\nWhat it had so far:\\n12 so far, then I ran out\./,
    );
    const link = (await events(store, session.id)).find((e) => e.type === "child.started") as Extract<
      KeelEvent,
      { type: "child.started" }
    >;
    // The task call itself used one of the parent's three: the child got two.
    expect((await events(store, link.childSessionId)).find((e) => e.type === "guard.tripped")).toMatchObject({
      guard: "max_tool_calls",
      limit: 2,
    });
    await agent.close();
  });

  it("the depth limit and the fan-out limit are clear errors to the model", async () => {
    const leaf = scriptedProvider([{ text: "leaf answer" }]);
    const helperModel = scriptedProvider([
      { toolCalls: [{ id: "d1", name: "task", args: { profile: "leaf", prompt: "go deeper" } }] },
      { text: "could not go deeper" },
    ]);
    const parent = scriptedProvider([
      {
        toolCalls: [
          { id: "t1", name: "task", args: { profile: "helper", prompt: "help" } },
          { id: "t2", name: "task", args: { profile: "helper", prompt: "help again" } },
        ],
      },
      { text: "done" },
    ]);
    const agent = await createAgent({
      provider: parent,
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [
        tasks({
          maxDepth: 1,
          maxFanOut: 1,
          profiles: {
            helper: {
              description: "Helps.",
              model: helperModel,
              plugins: [tasks({ maxDepth: 1, profiles: { leaf: { description: "A leaf.", model: leaf } } })],
            },
          },
        }),
      ],
    });
    const session = await agent.session();
    await session.run("go");
    const [first, second] = parent.requests[1]!.messages.filter((m) => m.role === "tool").map((m) =>
      JSON.stringify(m.content),
    );
    expect(first).toContain("could not go deeper");
    expect(second).toContain("KEEL_TASK_FAN_OUT: this turn already started 1 tasks (maxFanOut)");
    // The helper (depth 1) asked for a task at the limit: refused, so it answered itself.
    const refused = helperModel.requests[1]!.messages.find((m) => m.role === "tool")!;
    expect(JSON.stringify(refused.content)).toContain(
      "KEEL_TASK_DEPTH: this session is at delegation depth 1, the limit (maxDepth 1)",
    );
    expect(leaf.requests).toHaveLength(0);
    await agent.close();
  });

  it("cancelling the parent mid-task cancels the child promptly; both logs end interrupted", async () => {
    const store = new MemorySessionStore();
    const child = scriptedProvider([{ hang: true }]);
    const parent = scriptedProvider([
      { toolCalls: [{ id: "t1", name: "task", args: { profile: "slow", prompt: "think forever" } }] },
    ]);
    const agent = await createAgent({
      provider: parent,
      sideModel: false,
      store,
      plugins: [tasks({ profiles: { slow: { description: "Slow.", model: child } } })],
    });
    const session = await agent.session();
    const ctrl = new AbortController();
    const run = session.run("start", { signal: ctrl.signal });
    await expect.poll(() => child.requests.length).toBe(1);
    const t0 = performance.now();
    ctrl.abort();
    const r = await run;
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(r.verdict.status).toBe("interrupted");
    const link = (await events(store, session.id)).find((e) => e.type === "child.started") as Extract<
      KeelEvent,
      { type: "child.started" }
    >;
    expect((await events(store, link.childSessionId)).at(-1)).toMatchObject({ type: "turn.interrupted" });
    await agent.close();
  });

  it("a child's ask reaches the parent's host: its approve() callback answers it, naming the child session", async () => {
    const asked: Array<{ sessionId: string; tool: string; plugin?: string }> = [];
    const guard = {
      name: "guard",
      version: "1.0.0",
      setup: (ctx: { on: (p: "tool.pre_call", h: (e: { call: { name: string } }) => unknown) => void }) =>
        ctx.on("tool.pre_call", (e) =>
          e.call.name === "count"
            ? { kind: "tool_decision", decision: "ask", reason: "counting costs money" }
            : undefined,
        ),
    };
    const store = new MemorySessionStore();
    const child = scriptedProvider([
      { toolCalls: [{ id: "a1", name: "count", args: { fruit: "apples" } }] },
      { text: "12" },
    ]);
    const parent = scriptedProvider([
      { toolCalls: [{ id: "t1", name: "task", args: { profile: "counter", prompt: "Count the apples." } }] },
      { text: "There are 12." },
    ]);
    const agent = await createAgent({
      provider: parent,
      sideModel: false,
      store,
      approve: (req) => (
        asked.push({ sessionId: req.sessionId, tool: req.call.name, ...(req.plugin ? { plugin: req.plugin } : {}) }),
        true
      ),
      plugins: [
        tasks({
          profiles: { counter: { description: "Counts.", model: child, tools: [counter], plugins: [guard as never] } },
        }),
      ],
    });
    const session = await agent.session();
    const r = await session.run("How many apples?");
    expect(r.text).toBe("There are 12.");
    const link = (await events(store, session.id)).find((e) => e.type === "child.started") as Extract<
      KeelEvent,
      { type: "child.started" }
    >;
    expect(asked).toEqual([{ sessionId: link.childSessionId, tool: "count", plugin: "guard" }]);
    await agent.close();
  });

  it("the model's expected_output schema is enforced on the child's answer", async () => {
    const child = scriptedProvider([{ text: '{"city":"Lisbon"}' }]);
    const parent = scriptedProvider([
      {
        toolCalls: [
          {
            id: "t1",
            name: "task",
            args: {
              profile: "finder",
              prompt: "Where?",
              expected_output: {
                type: "object",
                properties: { city: { type: "string" } },
                required: ["city"],
                additionalProperties: false,
              },
            },
          },
        ],
      },
      { text: "Lisbon." },
    ]);
    const agent = await createAgent({
      provider: parent,
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [tasks({ profiles: { finder: { description: "Finds places.", model: child } } })],
    });
    await (await agent.session()).run("where?");
    expect(child.requests[0]!.options.output?.schema).toMatchObject({ type: "object", required: ["city"] });
    expect(JSON.stringify(parent.requests[1]!.messages.at(-1))).toContain('{\\"city\\":\\"Lisbon\\"}');
    await agent.close();
  });

  it("a profile's model given as a spec whose key is missing: the task fails with what to do, the parent goes on", async () => {
    const saved = process.env.ANTHROPIC_API_KEY;
    delete process.env.ANTHROPIC_API_KEY;
    try {
      const parent = scriptedProvider([
        { toolCalls: [{ id: "t1", name: "task", args: { profile: "cheap", prompt: "hi" } }] },
        { text: "I will do it myself." },
      ]);
      const agent = await createAgent({
        provider: parent,
        sideModel: false,
        store: new MemorySessionStore(),
        plugins: [
          tasks({ profiles: { cheap: { description: "A cheaper model.", model: "anthropic:claude-haiku-4-5" } } }),
        ],
      });
      const r = await (await agent.session()).run("go");
      expect(r.text).toBe("I will do it myself.");
      expect(JSON.stringify(parent.requests[1]!.messages.at(-1))).toMatch(
        /profile cheap's model anthropic:claude-haiku-4-5 cannot be used: .*KEEL_PROVIDER_KEY_MISSING.*ANTHROPIC_API_KEY/,
      );
      await agent.close();
    } finally {
      if (saved !== undefined) process.env.ANTHROPIC_API_KEY = saved;
    }
  });

  it("delegates through the real Anthropic SDK against the wire server (parent and child on one model)", async () => {
    const server = await startWireServer();
    try {
      server.enqueue(
        {
          toolCalls: [
            {
              id: "toolu_1",
              name: "task",
              args: { profile: "summarizer", prompt: "Summarise: the release is on Thursday." },
            },
          ],
        },
        { text: "Release: Thursday." },
        { text: "The summarizer says the release is on Thursday." },
      );
      const model = anthropicProvider({
        model: "claude-sonnet-4-6",
        apiKey: "k",
        baseURL: server.anthropicBaseURL,
        maxRetries: 0,
      });
      const agent = await createAgent({
        provider: model,
        sideModel: false,
        store: new MemorySessionStore(),
        plugins: [
          tasks({
            profiles: { summarizer: { description: "Summarises text.", instructions: "Summarise in three words." } },
          }),
        ],
      });
      const r = await (await agent.session()).run("When is the release?");
      expect(r.text).toBe("The summarizer says the release is on Thursday.");
      const [first, childRequest, last] = server.requests;
      expect(first!.body.tools.map((t: { name: string }) => t.name)).toEqual(["task"]);
      expect(JSON.stringify(childRequest!.body.system)).toContain("Summarise in three words.");
      expect(childRequest!.body.messages).toEqual([
        { role: "user", content: [{ type: "text", text: "Summarise: the release is on Thursday." }] },
      ]);
      expect(JSON.stringify(last!.body.messages.at(-1))).toContain("Release: Thursday.");
      await agent.close();
    } finally {
      await server.close();
    }
  });
});
