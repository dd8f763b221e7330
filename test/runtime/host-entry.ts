/**
 * The host's promises off Node, one scenario per request (test/runtime/workerd-host.test.ts):
 * createAgent with no store (the log in memory), a child session (ToolContext.child), an
 * approval paused and answered, a durable job, steering, what plugins are told of storage, and
 * `store: "sqlite"` refused. Each returns plain JSON. Nothing here may import a `node:` module.
 */
import { createAgent, definePlugin, defineTool } from "@keel/agent";
import type { ModelEvent, ModelProvider, ModelRequest, Session } from "@keel/agent";
import * as z from "zod";

type Step = { text: string } | { calls: Array<{ id: string; name: string; args?: Record<string, unknown> }> };

/** A model that answers its steps in order, whoever asks (a parent and its child share it). */
function scripted(steps: Step[]): ModelProvider {
  let next = 0;
  return {
    id: "inline:scripted",
    contextWindow: 8_000,
    async *stream(_request: ModelRequest): AsyncIterable<ModelEvent> {
      const step = steps[next++] ?? { text: "(the script ran out)" };
      const usage = { inputTokens: 10, outputTokens: 5 };
      if ("calls" in step) {
        const content = step.calls.map((c) => ({
          type: "tool_call" as const,
          id: c.id,
          name: c.name,
          args: c.args ?? {},
        }));
        yield { type: "response", message: { role: "assistant", content }, stopReason: "tool_use", usage };
        return;
      }
      yield { type: "text_delta", text: step.text };
      const message = { role: "assistant" as const, content: [{ type: "text" as const, text: step.text }] };
      yield { type: "response", message, stopReason: "end_turn", usage };
    },
  };
}

/** The text of every tool result in the session, in order. */
function toolResults(session: Session): string[] {
  return session.messages
    .filter((m) => m.role === "tool")
    .map((m) => m.content.map((b) => (b.type === "text" ? b.text : "")).join(""));
}

function thrown(err: unknown): { name: string; code?: string; message: string } {
  const e = err as { code?: string; message?: string; constructor?: { name?: string } };
  return {
    name: e?.constructor?.name ?? typeof err,
    ...(e?.code ? { code: e.code } : {}),
    message: String(e?.message),
  };
}

const scenarios: Record<string, () => Promise<unknown>> = {
  /** A tool starts a child session: it runs a turn of its own on the parent's model and store. */
  async child() {
    const delegate = defineTool({
      name: "delegate",
      description: "Ask a helper.",
      input: z.object({}),
      execute: async (_args, ctx) =>
        `the helper said: ${(await ctx.child({ name: "helper", input: "look it up" })).result.text}`,
    });
    const agent = await createAgent({
      provider: scripted([{ calls: [{ id: "d1", name: "delegate" }] }, { text: "found it" }, { text: "all done" }]),
      tools: [delegate],
    });
    try {
      const session = await agent.session();
      const result = await session.run("delegate it");
      const events = (await session.events()).map((e) => e.type);
      return { verdict: result.verdict.status, text: result.text, results: toolResults(session), events };
    } finally {
      await agent.close();
    }
  },

  /** A tool call asked about pauses the turn; the host approves and resumes. */
  async approval() {
    const guard = definePlugin({
      name: "guard",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.pre_call", (e) =>
          e.call.name === "write_note"
            ? { kind: "tool_decision", decision: "ask", reason: "writes are reviewed" }
            : undefined,
        );
      },
    });
    const write = defineTool({
      name: "write_note",
      description: "Write a note.",
      category: "edit",
      input: z.object({ text: z.string() }),
      execute: ({ text }) => `wrote ${text}`,
    });
    const agent = await createAgent({
      provider: scripted([{ calls: [{ id: "w1", name: "write_note", args: { text: "a" } }] }, { text: "noted" }]),
      tools: [write],
      plugins: [guard],
    });
    try {
      const session = await agent.session();
      const paused = await session.run("write it");
      await session.approve("w1");
      const resumed = await session.resume();
      return {
        paused: paused.verdict,
        resumed: resumed.verdict.status,
        text: resumed.text,
        results: toolResults(session),
      };
    } finally {
      await agent.close();
    }
  },

  /** A durable job queued after the turn runs once, reading its turn from the log. */
  async job() {
    const seen: unknown[] = [];
    const jobber = definePlugin({
      name: "jobber",
      version: "1.0.0",
      setup(ctx) {
        ctx.registerJob("work", async (payload, job) => void seen.push(payload, (await job.turn())?.input));
        ctx.on("turn.post_turn", (e) => ({
          kind: "background_job",
          name: "work",
          idempotencyKey: `work:${e.turnId}`,
          durable: true,
          payload: { ok: 1 },
          retryDelayMs: 1,
        }));
      },
    });
    const agent = await createAgent({ provider: scripted([{ text: "ok" }]), plugins: [jobber] });
    try {
      const session = await agent.session();
      await session.run("remember the blue door");
      await agent.drain();
      return { seen, jobs: (await session.events()).map((e) => e.type).filter((t) => t.startsWith("job.")) };
    } finally {
      await agent.close();
    }
  },

  /** Steering sent while a tool runs skips the call not yet started; a follow-up gets its own round. */
  async steering() {
    let session: Session | undefined;
    const step = defineTool({
      name: "step",
      description: "One step.",
      // An edit runs alone: the second call waits for the first, so the steering skips it.
      category: "edit",
      input: z.object({}),
      execute: async () => {
        await session!.steer("stop, do the other thing");
        return "stepped";
      },
    });
    const agent = await createAgent({
      provider: scripted([
        {
          calls: [
            { id: "s1", name: "step" },
            { id: "s2", name: "step" },
          ],
        },
        { text: "did the other thing" },
      ]),
      tools: [step],
    });
    try {
      session = await agent.session();
      const result = await session.run("take two steps");
      const queued = (await session.events()).filter((e) => e.type === "message.queued").length;
      return { verdict: result.verdict.status, text: result.text, results: toolResults(session), queued };
    } finally {
      await agent.close();
    }
  },

  /** What the plugins and the agent are told of where data lives. */
  async storage() {
    let told: unknown;
    const reader = definePlugin({
      name: "reader",
      version: "1.0.0",
      setup(ctx) {
        told = JSON.parse(JSON.stringify(ctx.storage));
      },
    });
    const agent = await createAgent({ provider: scripted([{ text: "ok" }]), plugins: [reader] });
    try {
      const session = await agent.session();
      const result = await session.run("hello");
      return { told, store: agent.store.constructor.name, text: result.text };
    } finally {
      await agent.close();
    }
  },

  /** The SQLite store asked for where there is none. */
  async sqlite() {
    return await createAgent({ provider: scripted([]), store: "sqlite" }).then(
      async (agent) => {
        await agent.close();
        return { built: true };
      },
      (err: unknown) => ({ refused: thrown(err) }),
    );
  },
};

/** Run scenario `name`: `{ ok }` with what it returned, or `{ threw }` with the error. */
export async function runScenario(name: string): Promise<unknown> {
  const scenario = scenarios[name];
  if (!scenario) return { threw: { name: "Error", message: `no scenario ${name}` } };
  try {
    return { ok: await scenario() };
  } catch (err) {
    return { threw: thrown(err) };
  }
}
