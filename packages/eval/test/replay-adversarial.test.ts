/**
 * Adversarial scenarios for replaySession: sessions recorded in a real SQLite file with
 * approvals, steering, structured output, interrupts, guards, secrets and odd text, replayed
 * with the same plugins (must be identical) or a changed one (must name the first change).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, definePlugin, defineTool } from "@keel/agent";
import type { AgentOptions, KeelEvent, KeelPlugin, Session } from "@keel/agent";
import { PostgresSessionStore } from "@keel/store-postgres";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { scriptedProvider } from "@keel/testkit";
import type { ScriptStep } from "@keel/testkit";
import { compaction } from "../../plugin-compaction/src/index.ts";
import { tasks } from "../../plugin-tasks/src/index.ts";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../store-postgres/test/support/pg.ts";
import { replaySession } from "../src/index.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

type Extra = Partial<Omit<AgentOptions, "provider" | "store" | "home">>;

function echo(runs: { n: number } = { n: 0 }) {
  return defineTool({
    name: "echo",
    description: "Echoes its text.",
    execute: (args: unknown) => {
      runs.n++;
      return `echo: ${(args as { text?: string }).text ?? ""}`;
    },
  });
}

/** Asks for approval of every echo call. */
const asker: KeelPlugin = definePlugin({
  name: "asker",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("tool.pre_call", (e) =>
      e.call.name === "echo" ? { kind: "tool_decision", decision: "ask", reason: "echo needs a yes" } : undefined,
    );
  },
});

async function record(
  script: ScriptStep[],
  drive: (s: Session) => Promise<void>,
  extra: Extra = {},
  contextWindow?: number,
): Promise<KeelEvent[]> {
  const dir = mkdtempSync(join(tmpdir(), "keel-adv-replay-"));
  dirs.push(dir);
  const path = join(dir, "sessions.sqlite");
  const agent = await createAgent({
    provider: scriptedProvider(script, contextWindow ? { contextWindow } : undefined),
    store: new SqliteSessionStore({ path }),
    home: dir,
    sideModel: false,
    tools: [echo()],
    ...extra,
  });
  const session = await agent.session();
  await drive(session);
  const id = session.id;
  await agent.close();
  const reopened = new SqliteSessionStore({ path });
  const events = await reopened.events(id);
  lastChildren = {};
  for (const e of events)
    if (e.type === "child.started") lastChildren[e.childSessionId] = await reopened.events(e.childSessionId);
  reopened.close();
  return events;
}

/** The logs of the child sessions the last recording's calls started. */
let lastChildren: Record<string, KeelEvent[]> = {};

/** Replay with `extra` as today's config, in a scratch home; `contextWindow` as the recorded provider's. */
function replay(
  events: KeelEvent[],
  extra: Extra = {},
  tools: "log" | "live" = "log",
  contextWindow?: number,
  children?: Record<string, KeelEvent[]>,
) {
  const home = mkdtempSync(join(tmpdir(), "keel-adv-replay-home-"));
  dirs.push(home);
  return replaySession({
    events,
    tools,
    ...(children ? { children } : {}),
    build: (rig) =>
      createAgent({
        tools: [echo()],
        ...extra,
        home,
        provider: contextWindow
          ? { id: rig.provider.id, contextWindow, stream: (r, o) => rig.provider.stream(r, o) }
          : rig.provider,
        sideModel: rig.sideModel,
        store: rig.store,
        plugins: [...(extra.plugins ?? []), ...rig.plugins],
        ...(rig.approve ? { approve: rig.approve } : {}),
        ...(rig.childSessionId ? { childSessionId: rig.childSessionId } : {}),
      }),
  });
}

/** What must hold of a replay with unchanged plugins. */
function expectIdentical(r: Awaited<ReturnType<typeof replay>>) {
  expect(r.notes).toEqual([]);
  expect(r.toolChanges).toEqual([]);
  expect(r.requests.filter((q) => !q.same).map((q) => q.index)).toEqual([]);
  expect(r.turns.filter((t) => !t.same)).toEqual([]);
  expect(r.identical).toBe(true);
}

const call = (id: string, text: string): ScriptStep => ({ toolCalls: [{ id, name: "echo", args: { text } }] });

const T = 60_000;

describe("replay adversarial: the same plugins replay identically", () => {
  it(
    "a call the approve() callback denied with a reason: the model is told the same reason",
    async () => {
      // Broke: the rig answered `false`, dropping the recorded reason, so the tool message differed.
      const ev = await record(
        [call("c1", "x"), { text: "ok" }],
        async (s) => {
          await s.run("go");
        },
        { plugins: [asker], approve: () => ({ approved: false, reason: "too risky" }) },
      );
      expectIdentical(await replay(ev, { plugins: [asker] }));
    },
    T,
  );

  it(
    "a turn paused for approval, denied by the host with a reason and resumed: replayed through the same pause",
    async () => {
      // Broke: the replay answered through an approve() callback, whose denial reads differently
      // ("deny by asker" instead of "deny by the user"), so the next request differed.
      const ev = await record(
        [call("c1", "x"), { text: "ok" }],
        async (s) => {
          expect((await s.run("go")).verdict.status).toBe("paused");
          await s.deny("c1", { reason: "not now" });
          await s.resume();
        },
        { plugins: [asker] },
      );
      expectIdentical(await replay(ev, { plugins: [asker] }));
    },
    T,
  );

  it(
    "approved 'always' on a paused turn: a later turn's call of that tool is not asked again",
    async () => {
      const ev = await record(
        [call("c1", "x"), { text: "ok" }, call("c2", "y"), { text: "ok2" }],
        async (s) => {
          await s.run("go");
          await s.approve("c1", { always: true });
          await s.resume();
          await s.run("again");
        },
        { plugins: [asker] },
      );
      expect(ev.some((e) => e.type === "approval.resolved" && e.by === "always")).toBe(true);
      expectIdentical(await replay(ev, { plugins: [asker] }));
    },
    T,
  );

  it(
    "a session left paused on an approval never answered: the replay pauses there too",
    async () => {
      // Broke: the replay denied the call (no recorded result) and asked the model for an answer
      // the recording never had: failed with KEEL_REPLAY_NO_ANSWER.
      const ev = await record(
        [call("c1", "x"), { text: "ok" }],
        async (s) => {
          await s.run("go");
        },
        { plugins: [asker] },
      );
      const r = await replay(ev, { plugins: [asker] });
      expect(r.turns[0]!.replayed.status).toBe("paused");
      expectIdentical(r);
    },
    T,
  );

  it(
    "the same call id in two turns (a provider that numbers calls per response): each turn gets its own result",
    async () => {
      // Broke: results were keyed by call id alone, so turn 2's `c1` got turn 1's result.
      const ev = await record([call("c1", "x"), { text: "ok" }, call("c1", "y"), { text: "ok2" }], async (s) => {
        await s.run("go");
        await s.run("again");
      });
      expectIdentical(await replay(ev));
    },
    T,
  );

  it(
    "a turn interrupted while a tool ran: the replay cuts it there, and the next turn gets its own answers",
    async () => {
      // Broke: the replay ran the interrupted turn on, took the next turn's recorded answer, and
      // every later turn was off by one (the last failed with KEEL_REPLAY_NO_ANSWER).
      const slow = defineTool({
        name: "echo",
        description: "Slow.",
        execute: async () => {
          await new Promise((r) => setTimeout(r, 300));
          return "late";
        },
      });
      const ev = await record(
        [call("c1", "x"), { text: "ok" }, { text: "next" }],
        async (s) => {
          const p = s.run("go");
          await new Promise((r) => setTimeout(r, 80));
          s.cancel();
          expect((await p).verdict.status).toBe("interrupted");
          await s.run("again");
        },
        { tools: [slow] },
      );
      const r = await replay(ev, { tools: [slow] });
      expect(r.turns.map((t) => t.replayed.status)).toEqual(["interrupted", "completed"]);
      expectIdentical(r);
    },
    T,
  );

  it(
    "a turn a killed process left unfinished (the log ends before the call's result): replayed up to there",
    async () => {
      const ev = await record([call("c1", "x"), { text: "ok" }], async (s) => {
        await s.run("go");
      });
      const cut = ev.slice(
        0,
        ev.findIndex((e) => e.type === "tool.completed"),
      );
      const r = await replay(cut);
      expect(r.turns[0]!.replayed.status).toBe("unfinished");
      expectIdentical(r);
    },
    T,
  );

  it(
    "a turn cut by maxRounds (the final round without tools), and a model failure: identical",
    async () => {
      const ev = await record(
        [call("c1", "x"), call("c2", "y"), call("c3", "z"), { text: "final" }],
        async (s) => {
          expect((await s.run("go")).verdict.status).toBe("failed");
        },
        { limits: { maxRounds: 2 } },
      );
      expectIdentical(await replay(ev, { limits: { maxRounds: 2 } }));
      const failed = await record([{ error: { class: "rate_limited" } } as ScriptStep, { text: "ok" }], async (s) => {
        expect((await s.run("go")).verdict.status).toBe("failed");
        await s.run("again");
      });
      expectIdentical(await replay(failed));
    },
    T,
  );

  it(
    "a turn cut by the context ceiling (a small window: its last round without tools), the agent built on rig.provider as is",
    async () => {
      // Broke: the replay's provider had no contextWindow (the recorded provider's is in no
      // event), so the ceiling never tripped in the replay: its request went with the tools and
      // the turn ran on where the recording had its final round. The window is recorded in each
      // manifest now, and the replay's provider takes it.
      const big = defineTool({ name: "echo", description: "Big.", execute: () => "lorem ipsum ".repeat(1000) });
      const ev = await record(
        [call("c1", "x"), call("c2", "y"), { text: "enough" }],
        async (s) => {
          const rr = await s.run("go");
          expect(rr.verdict).toMatchObject({ status: "stopped", reason: "context_ceiling" });
        },
        { tools: [big], limits: { contextCeiling: 0.5 } },
        6000,
      );
      expect(ev.some((e) => e.type === "prompt.compiled" && e.manifest.finalRound)).toBe(true);
      expectIdentical(await replay(ev, { tools: [big], limits: { contextCeiling: 0.5 } }));
    },
    T,
  );

  it(
    "a call that timed out, answered from the log: the same call, identical",
    async () => {
      // Broke: served its recorded error result, the call's status was "error", and the report
      // counted "timeout → error" as a changed decision: diverged with the same config.
      const slow = defineTool({
        name: "echo",
        description: "Too slow.",
        execute: () => new Promise<string>((r) => setTimeout(() => r("late"), 2_000)),
      });
      const ev = await record(
        [call("c1", "x"), { text: "it timed out" }],
        async (s) => {
          await s.run("go");
        },
        { tools: [slow], toolTimeouts: { info: 50 } },
      );
      expect(ev.some((e) => e.type === "tool.completed" && e.status === "timeout")).toBe(true);
      expectIdentical(await replay(ev, { tools: [slow], toolTimeouts: { info: 50 } }));
    },
    T,
  );

  it(
    "lone surrogates, emoji and NUL in input, tool output and answer; an image input; a 400 KB tool output; a secret in tool args",
    async () => {
      const weird = defineTool({ name: "echo", description: "Weird.", execute: () => "a\ud800b \u{1F600} \u0000 end" });
      const a = await record(
        [call("c1", "x"), { text: "ok \udc00" }],
        async (s) => {
          await s.run("go \ud83d here");
        },
        { tools: [weird] },
      );
      expectIdentical(await replay(a, { tools: [weird] }));
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
      const b = await record([{ text: "a pixel" }], async (s) => {
        await s.run([
          { type: "text", text: "what?" },
          { type: "image", mediaType: "image/png", data: png },
        ]);
      });
      expectIdentical(await replay(b));
      const big = defineTool({ name: "echo", description: "Big.", execute: () => "x".repeat(400_000) });
      const c = await record(
        [call("c1", "x"), { text: "ok" }],
        async (s) => {
          await s.run("go");
        },
        { tools: [big] },
      );
      expectIdentical(await replay(c, { tools: [big] }));
      const KEY = `sk-ant-api03-${"Z9y".repeat(30)}AA`;
      const d = await record([call("c1", KEY), { text: "ok" }], async (s) => {
        await s.run("go");
      });
      expect(JSON.stringify(d)).not.toContain(KEY);
      expectIdentical(await replay(d));
    },
    T,
  );
});

describe("replay adversarial: more of a session's course", () => {
  const search = defineTool({
    name: "tool_search",
    description: "Finds tools.",
    execute: () => ({ content: "found secret_op", reveal: ["secret_op"] }),
  });
  const hidden = defineTool({ name: "secret_op", description: "A hidden op.", hidden: true, execute: () => "done" });

  it(
    "a hidden tool revealed by a tool's output mid-turn: shown again in the replay (tools from the log)",
    async () => {
      // Broke: a call answered from the log gave back its content only, not what its output
      // revealed, so the later requests lacked the tool ("tools removed: secret_op").
      // tool_decision.result now takes `reveal`, and the replay gives back the recorded tools.revealed.
      const ev = await record(
        [
          call("c1", "x"),
          { toolCalls: [{ id: "c2", name: "tool_search", args: {} }] },
          { toolCalls: [{ id: "c3", name: "secret_op", args: {} }] },
          { text: "ok" },
        ],
        async (s) => {
          await s.run("go");
        },
        { tools: [echo(), search, hidden] },
      );
      expect(ev.filter((e) => e.type === "tools.revealed")).toHaveLength(1);
      expectIdentical(await replay(ev, { tools: [echo(), search, hidden] }));
      expectIdentical(await replay(ev, { tools: [echo(), search, hidden] }, "live"));
    },
    T,
  );

  it(
    "a session recorded before digests (no digest, no section hashes): same plugins identical by manifest, a longer section named",
    async () => {
      // Broke: a section without a recorded hash compared "" with today's hash: every section of
      // every pre-digest session was reported changed, with unchanged plugins.
      const rules = (text: string): KeelPlugin =>
        definePlugin({
          name: "rules",
          version: "1.0.0",
          setup(ctx) {
            ctx.on("turn.pre_prompt_compile", () => ({
              kind: "prompt_section",
              id: "r",
              domain: "policy",
              sectionId: "rules",
              content: text,
            }));
          },
        });
      const ev = await record(
        [call("c1", "x"), { text: "ok" }],
        async (s) => {
          await s.run("go");
        },
        { plugins: [rules("Be brief.")] },
      );
      const old = ev.map((e) => {
        if (e.type !== "prompt.compiled") return e;
        const { digest: _d, sections, context, ...m } = e.manifest;
        return {
          ...e,
          manifest: {
            ...m,
            sections: sections.map(({ hash: _h, ...x }) => x),
            context: context.map(({ hash: _h, ...x }) => x),
          },
        };
      }) as KeelEvent[];
      const same = await replay(old, { plugins: [rules("Be brief.")] });
      expect(same.requests.map((q) => q.compared)).toEqual(["manifest", "manifest"]);
      expectIdentical(same);
      const changed = await replay(old, { plugins: [rules("Be brief, and cite files.")] });
      expect(changed.firstDivergence).toBe(0);
      expect(changed.requests[0]!.sections).toMatchObject([
        { sectionId: "rules", change: "changed", plugins: ["rules"] },
      ]);
    },
    T,
  );

  it(
    "compaction edits at round.pre_request (a small window): identical; without the plugin the edits show as missing",
    async () => {
      const steps: ScriptStep[] = [];
      for (let i = 0; i < 7; i++) steps.push(call(`c${i}`, `${i} ${"lorem ipsum dolor ".repeat(150)}`));
      steps.push({ text: "done" });
      const plugins = (messages: number) => [
        compaction({ model: false, window: 6000, protectedTail: { messages, tokens: 200 } }),
      ];
      const ev = await record(
        steps,
        async (s) => {
          await s.run("go");
        },
        { plugins: plugins(2) },
        6000,
      );
      expect(ev.filter((e) => e.type === "context.edited").length).toBeGreaterThan(0);
      expectIdentical(await replay(ev, { plugins: plugins(2) }, "log", 6000));
      const other = await replay(ev, {}, "log", 6000);
      expect(other.identical).toBe(false);
      const edited = other.requests.find((q) => q.edits.recorded.length > 0)!;
      expect(edited).toMatchObject({ same: false, edits: { replayed: [] } });
      expect(edited.edits.recorded[0]!.plugin).toBe("@keel/plugin-compaction");
    },
    T,
  );

  it(
    "chat mode switches between turns, and a delegated task (tools from the log): identical",
    async () => {
      const modes = await record([{ text: "a" }, { text: "b" }, call("c1", "x"), { text: "c" }], async (s) => {
        await s.run("one");
        await s.setMode("chat");
        await s.run("two");
        await s.setMode("agent");
        await s.run("three");
      });
      expectIdentical(await replay(modes));
      const profiles = () => [tasks({ profiles: { helper: { description: "Helps.", instructions: "Help." } } })];
      const delegated = await record(
        [
          call("t1", "x"),
          { toolCalls: [{ id: "t2", name: "task", args: { profile: "helper", prompt: "do x" } }] },
          { text: "child answer" },
          { text: "parent done" },
        ],
        async (s) => {
          await s.run("go");
        },
        { plugins: profiles() },
      );
      expect(delegated.some((e) => e.type === "child.started")).toBe(true);
      expectIdentical(await replay(delegated, { plugins: profiles() }));
    },
    T,
  );
});

describe("replay adversarial: a change shows, and shows no secret", () => {
  it(
    "a plugin error holding a secret: not shown, and a failure the recording had is not reported as new",
    async () => {
      // Broke: the scratch store kept the replay's events unredacted (real stores redact), so a
      // plugin's error showed the secret in pluginProblems, and the same failure (redacted in the
      // recording) compared as a new one.
      const KEY = `sk-ant-api03-${"W8v".repeat(30)}AA`;
      const auth = (fail: boolean): KeelPlugin =>
        definePlugin({
          name: "auth",
          version: "1.0.0",
          setup(ctx) {
            ctx.on("turn.pre_prompt_compile", () => {
              if (fail) throw new Error(`auth failed for ${KEY}`);
              return undefined;
            });
          },
        });
      const ev = await record(
        [{ text: "ok" }],
        async (s) => {
          await s.run("go");
        },
        { plugins: [auth(true)] },
      );
      expect(JSON.stringify(ev)).not.toContain(KEY);
      const same = await replay(ev, { plugins: [auth(true)] });
      expect(same.pluginProblems).toEqual([]);
      expectIdentical(same);
      const fresh = await record(
        [{ text: "ok" }],
        async (s) => {
          await s.run("go");
        },
        { plugins: [auth(false)] },
      );
      const broken = await replay(fresh, { plugins: [auth(true)] });
      expect(broken.pluginProblems).toMatchObject([{ plugin: "auth", status: "threw" }]);
      expect(JSON.stringify(broken)).not.toContain(KEY);
    },
    T,
  );

  it(
    "a secret in today's instructions is not shown in the report of the request that changed",
    async () => {
      // Broke: `asked.system` was the replayed request's system prompt as sent, secret and all,
      // though the log (and the recorded manifest) only ever held it redacted.
      const KEY = `sk-ant-api03-${"Q7x".repeat(30)}AA`;
      const ev = await record(
        [{ text: "ok" }],
        async (s) => {
          await s.run("go");
        },
        { instructions: `Use key ${KEY}.` },
      );
      expect(JSON.stringify(ev)).not.toContain(KEY);
      const r = await replay(ev, { instructions: `Use key ${KEY}. Be brief.` });
      expect(r.firstDivergence).toBe(0);
      expect(r.asked!.system).toContain("Be brief.");
      expect(JSON.stringify(r)).not.toContain(KEY);
    },
    T,
  );
});

describe("replay adversarial: structured output, queued messages; delegation live (open)", () => {
  // Broke: turn.started does not hold the `output` schema and the replay ran each turn without
  // one, so the first request's options (the structured-output format) differed. The replay
  // takes the format from the turn's manifests and passes it back as recorded
  // (RunOptions.outputFormat, @internal): z.fromJSONSchema does not round-trip it byte for byte.
  it(
    "a structured-output turn replays identically",
    async () => {
      const ev = await record([{ text: '{"n":1}' }], async (s) => {
        await s.run("go", { output: z.object({ n: z.number() }) });
      });
      expectIdentical(await replay(ev));
      // An invalid answer, its corrective round, then a valid one; a strict nested schema.
      const schema = z
        .object({ a: z.string().min(2), b: z.array(z.enum(["p", "q"])).optional(), c: z.object({ d: z.boolean() }) })
        .strict();
      const fixed = await record(
        [{ text: '{"a":"x","c":{"d":true}}' }, { text: '{"a":"xy","c":{"d":true}}' }, { text: "plain" }],
        async (s) => {
          expect((await s.run("go", { output: schema, outputName: "answer" })).output).toEqual({
            a: "xy",
            c: { d: true },
          });
          await s.run("and without a schema");
        },
      );
      const r = await replay(fixed);
      expect(r.requests).toHaveLength(3);
      expectIdentical(r);
    },
    T,
  );

  // Broke: steering and follow-up messages (message.queued) were not queued again in the
  // replay, so the request after the point the recording injected them differed (and a call
  // the steering skipped ran). The replay queues each where its message.dequeued shows: after
  // as many of the turn's answers, before the answer whose calls it skipped, or once the last
  // call it let run finished.
  it(
    "a steering message queued mid-turn replays identically",
    async () => {
      const ev = await record([{ ...call("c1", "x"), delayMs: 50 }, { text: "ok" }], async (s) => {
        const p = s.run("go");
        await new Promise((r) => setTimeout(r, 10));
        await s.steer("also do y");
        await p;
      });
      expectIdentical(await replay(ev));
    },
    T,
  );

  // Broke: with --tools live, a delegated task's child session asked the replay's provider,
  // which served it the parent turn's next recorded answer; the parent then ran out of answers
  // and failed. Given the child sessions' logs (keel replay loads them), a child is served its
  // own answers, matched by its input.
  const delegate = async () => {
    const profiles = () => [tasks({ profiles: { helper: { description: "Helps.", instructions: "Help." } } })];
    const ev = await record(
      [
        { toolCalls: [{ id: "t1", name: "task", args: { profile: "helper", prompt: "do x" } }] },
        { text: "child answer" },
        { text: "parent done" },
      ],
      async (s) => {
        await s.run("go");
      },
      { plugins: profiles() },
    );
    expect(Object.keys(lastChildren)).toHaveLength(1);
    return replay(ev, { plugins: profiles() }, "live", undefined, lastChildren);
  };

  it(
    "a delegated task with --tools live: the child gets its own recorded answers, the parent's turn ends as recorded",
    async () => {
      const r = await delegate();
      expect(r.notes).toEqual([]);
      expect(r.requests).toHaveLength(2);
      expect(r.requests[0]!.same).toBe(true);
      expect(r.turns.map((t) => [t.recorded.text, t.replayed.text, t.same])).toEqual([
        ["parent done", "parent done", true],
      ]);
    },
    T,
  );

  // Broke: the task tool's result names the child session ("[task helper: session <id>, …]"),
  // and a child run live got a new random id, so the request after the call differed. The rig
  // gives each child the id it had when recorded (AgentOptions.childSessionId, @internal).
  it(
    "a delegated task with --tools live replays identically",
    async () => {
      expectIdentical(await delegate());
    },
    T,
  );

  it(
    "a follow-up queued mid-turn replays identically",
    async () => {
      const ev = await record([{ ...call("c1", "x"), delayMs: 50 }, { text: "ok" }, { text: "fu" }], async (s) => {
        const p = s.run("go");
        await new Promise((r) => setTimeout(r, 10));
        await s.followUp("and then z");
        await p;
      });
      expectIdentical(await replay(ev));
    },
    T,
  );

  it(
    "steering queued while a tool runs (it finishes; a later call may be skipped), and one queued between turns",
    async () => {
      const slow = defineTool({
        name: "echo",
        description: "Slow.",
        parallel: false,
        execute: async (a: unknown) => {
          await new Promise((r) => setTimeout(r, 150));
          return `echo: ${(a as { text?: string }).text ?? ""}`;
        },
      });
      const ev = await record(
        [
          {
            toolCalls: [
              { id: "c1", name: "echo", args: { text: "x" } },
              { id: "c2", name: "echo", args: { text: "y" } },
            ],
          },
          { text: "ok" },
          { text: "second" },
        ],
        async (s) => {
          const p = s.run("go");
          // c1 is running: the steering lets it finish and is read before the second request.
          await new Promise((r) => setTimeout(r, 60));
          await s.steer("use y instead");
          await p;
          await s.steer("before the next turn");
          await s.run("again");
        },
        { tools: [slow] },
      );
      expect(ev.filter((e) => e.type === "message.dequeued")).toHaveLength(2);
      // c1 ran; c2, in the next group, was skipped by the steering.
      expect(ev.flatMap((e) => (e.type === "tool.completed" ? [e.status] : []))).toEqual(["ok", "skipped"]);
      expectIdentical(await replay(ev, { tools: [slow] }));
    },
    T,
  );
});

describe("replay adversarial: PostgreSQL", () => {
  afterAll(() => dropTestSchemas());

  it(
    "NUL, lone surrogates and emoji in input, tool args, tool output and answer, stored in PostgreSQL: identical",
    async () => {
      await requirePostgres();
      const schema = testSchema();
      const weird = defineTool({ name: "echo", description: "Weird.", execute: () => "a\ud800b \u{1F600} \u0000 end" });
      const home = mkdtempSync(join(tmpdir(), "keel-adv-replay-pg-"));
      dirs.push(home);
      const agent = await createAgent({
        provider: scriptedProvider([
          { toolCalls: [{ id: "c1", name: "echo", args: { t: "x\u0000y\udfff" } }] },
          { text: "ok \udc00 \u0000" },
        ]),
        store: new PostgresSessionStore({ url: PG_URL, schema }),
        tools: [weird],
        home,
      });
      const s = await agent.session();
      await s.run("go \ud83d here \u0000");
      const id = s.id;
      await agent.close();
      const store = new PostgresSessionStore({ url: PG_URL, schema });
      const events = await store.events(id);
      const before = events.length;
      expectIdentical(await replay(events, { tools: [weird] }));
      expect((await store.events(id)).length).toBe(before);
      await store.close();
    },
    T,
  );
});
