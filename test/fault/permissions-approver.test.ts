/**
 * Class 18, permission rules: the approver sees why. A rule's `ask` (its reason, and the plugin
 * that asked) reaches the A2A task's input-required status message — also from `tasks/get` after
 * the server and the agent restarted on the same SQLite files — and the `keel` prompt, in the
 * process that paused and in the next one, which reads the pause from the SQLite log. A
 * credential in the reason is masked everywhere. (The useChat and AG-UI approval parts:
 * packages/ui-stream/test/approval-reason.test.ts.)
 */
import { randomUUID } from "node:crypto";
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { GetTaskRequest, SendMessageRequest, TaskState } from "@a2a-js/sdk";
import type { Message, Part, Task } from "@a2a-js/sdk";
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import type { Client } from "@a2a-js/sdk/client";
import { createAgent } from "@keel/agent";
import type { RecordedRequest, WireReply, WireServer } from "../../packages/wire-server/src/index.ts";
import { startWireServer } from "../../packages/wire-server/src/index.ts";
import { ScriptedProvider } from "../../packages/testkit/src/index.ts";
import permissions from "../../packages/plugin-permissions/src/index.ts";
import { resolveBind, SessionOwners, startA2a } from "../../packages/serve/src/index.ts";
import { killAll, project, REPO, runKeel, startKeel, tempRoot, wireEnv } from "./support/storage.ts";

const PLUGIN = pathToFileURL(join(REPO, "packages", "plugin-permissions", "src", "index.ts")).href;
const RULE = {
  id: "prod-deploys",
  decision: "ask",
  tool: "deploy",
  reason: "deploys reach production; page https://ops:hunter2@pager.example.com first",
} as const;
/** How the plugin words the rule's ask (the rule's text between the id and the verb is the plugin's). */
const WHY = /rules\[0\] \(prod-deploys\) .* asks about it: deploys reach production; page https:\/\/ops:/;

const root = tempRoot("keel-fault-approver-");
let wire: WireServer;
beforeAll(async () => {
  wire = await startWireServer({
    onEmpty: (request: RecordedRequest): WireReply => {
      const msgs = (request.body?.messages ?? []) as Array<{ content: unknown }>;
      const answered = msgs.some(
        (m) => Array.isArray(m.content) && (m.content as Array<{ type: string }>).some((b) => b.type === "tool_result"),
      );
      return answered
        ? { text: "Understood.", api: "anthropic" }
        : { toolCalls: [{ id: "toolu_deploy_1", name: "deploy", args: { version: "v2" } }], api: "anthropic" };
    },
  });
});
afterEach(killAll);
afterAll(async () => {
  await killAll();
  await wire?.close();
});

const deployTool = (log: string) => ({
  name: "deploy",
  description: "Deploy a version.",
  category: "exec" as const,
  parameters: { type: "object", properties: { version: { type: "string" } }, required: ["version"] },
  execute: (args: unknown) => {
    appendFileSync(log, `${(args as { version: string }).version}\n`);
    return "live";
  },
});

const text = (m: Message | undefined) =>
  (m?.parts ?? []).flatMap((p: Part) => (p.content?.$case === "text" ? [p.content.value] : [])).join("");
const data = (m: Message | undefined) =>
  (m?.parts ?? []).flatMap((p: Part) => (p.content?.$case === "data" ? [p.content.value] : []))[0] as
    | { waiting: Array<Record<string, unknown>> }
    | undefined;

async function a2aClient(url: string): Promise<Client> {
  return new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl: fetch })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetch }),
  }).createFromUrl(url);
}

describe("fault class 18: a permission rule's ask reaches every approver with its reason", () => {
  it("A2A: the input-required message says the rule's reason and the plugin, also from tasks/get after a restart", async () => {
    const dir = join(root, "a2a");
    mkdirSync(dir, { recursive: true });
    const log = join(dir, "deploys.log");
    const open = async () => {
      const agent = await createAgent({
        name: "releaser",
        provider: new ScriptedProvider([
          { toolCalls: [{ id: "d1", name: "deploy", args: { version: "v2" } }] },
          { text: "Deployed." },
        ]),
        home: dir,
        tools: [deployTool(log)],
        plugins: [permissions({ rules: [RULE] })],
      });
      const server = await startA2a({
        agent,
        owners: new SessionOwners(join(dir, "serve.sqlite")),
        tasksPath: join(dir, "serve.sqlite"),
        bind: resolveBind({}, {}),
      });
      return { agent, server };
    };
    let rig = await open();
    let c = await a2aClient(rig.server.url);
    const r = await c.sendMessage(
      SendMessageRequest.fromJSON({
        message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "deploy v2" }] },
      }),
    );
    const paused = r as Task;
    expect(paused.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const says = (m: Message | undefined) => {
      expect(text(m)).toMatch(WHY);
      expect(text(m)).toContain("asked by @keel/plugin-permissions");
      expect(data(m)?.waiting[0]).toMatchObject({ callId: "d1", plugin: "@keel/plugin-permissions" });
      expect(String(data(m)?.waiting[0]?.reason)).toMatch(WHY);
      expect(JSON.stringify(m)).not.toContain("hunter2");
    };
    says(paused.status?.message);

    // Restart: a new agent and server on the same SQLite files.
    await rig.server.close();
    await rig.agent.close();
    rig = await open();
    c = await a2aClient(rig.server.url);
    const got = await c.getTask(GetTaskRequest.fromJSON({ id: paused.id }));
    expect(got.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    says(got.status?.message);
    // The pending call as the host lists it after the restart.
    const [stored] = await rig.agent.store.listSessions();
    const session = await rig.agent.session(stored!.id);
    expect(session.pendingApprovals()[0]).toMatchObject({ callId: "d1", plugin: "@keel/plugin-permissions" });
    expect(session.pendingApprovals()[0]!.reason).toMatch(WHY);
    await session.close();
    expect(existsSync(log)).toBe(false);
    await rig.server.close();
    await rig.agent.close();
  }, 60_000);

  it("keel: the prompt says the rule's reason and the plugin, and so does the next process that answers it", async () => {
    const p = project(
      root,
      "cli",
      `import { appendFileSync } from "node:fs";
import permissions from ${JSON.stringify(PLUGIN)};
export default {
  name: "releaser",
  model: "anthropic:claude-sonnet-4-6",
  tools: [{
    name: "deploy",
    description: "Deploy a version.",
    parameters: { type: "object", properties: { version: { type: "string" } }, required: ["version"] },
    category: "exec",
    execute: (args) => { appendFileSync(new URL("./deploys.log", import.meta.url), args.version + "\\n"); return "live"; },
  }],
  plugins: [permissions({ rules: [${JSON.stringify(RULE)}] })],
};
`,
    );
    const env = wireEnv(p.home, wire.url);
    // No one answers (stdin is closed): the question was asked, the turn stays paused in SQLite.
    const first = await runKeel(["run", "--ask", "ask", "deploy v2"], { cwd: p.dir, env, timeoutMs: 30_000 });
    // The question the prompt asks (the live log line before it says "needs approval").
    const question = (stderr: string) => stderr.split("\n").find((l) => l.includes("? deploy {")) ?? "";
    expect(question(first.stderr)).toMatch(/\? deploy \{"version":"v2"\} — @keel\/plugin-permissions: /);
    expect(question(first.stderr)).toMatch(WHY);
    expect(first.stderr).not.toContain("hunter2");
    expect(first.code).not.toBe(0);

    // The next process reads the pause from the log and asks the same question: "n" denies it.
    const second = startKeel(["run", "--ask", "ask", "-c", "thanks"], { cwd: p.dir, env, keepStdin: true });
    second.child.stdin!.end("n not today\n");
    const done = await second.exit;
    expect(done.code, second.stderr()).toBe(0);
    expect(second.stderr()).toContain("has a turn paused for approval; answering it first");
    expect(question(second.stderr())).toMatch(WHY);
    expect(question(second.stderr())).toContain("@keel/plugin-permissions");
    expect(second.stderr()).not.toContain("hunter2");
    expect(existsSync(join(p.dir, "deploys.log"))).toBe(false);
    expect(readFileSync(join(p.dir, "agent.config.mjs"), "utf8")).toContain("hunter2");
  }, 90_000);
});
