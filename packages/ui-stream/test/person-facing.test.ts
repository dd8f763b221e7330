/**
 * What a person sees when the page and the chat disagree (issue 43, adversarial pass):
 * - refusals a person causes (a second tab's Approve while the first one's turn runs, a stale
 *   tab answering an approval already answered) are JSON whose `message` is for the person, as
 *   the 409 for a message sent while an approval waits is, not the developer's API text
 *   (`steer()`, `pendingApprovals()`, session ids); the developer's text stays in `detail`;
 * - a database outage is a 503 the person can act on ("try again in a moment", `retry-after`),
 *   never the operator's text (the database's address, environment names), which goes to
 *   `onError`; once the database is back the same chat goes on;
 * - a chat read back after its process died mid-tool shows the cut call as failed with a
 *   reason, never still running (`input-available`) or still waiting to resume
 *   (`approval-responded`) in a turn that has ended.
 */
import { mkdtempSync } from "node:fs";
import { connect, createServer } from "node:net";
import type { AddressInfo, Server, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, definePlugin, defineTool } from "@keel/agent";
import { PostgresSessionStore } from "@keel/store-postgres";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../store-postgres/test/support/pg.ts";
import { ScriptedProvider } from "../../testkit/src/index.ts";
import { chatMessages, createChatHandler } from "../src/index.ts";
import { DEPLOY_SCRIPT, scriptedAgent } from "./support.ts";

const post = (body: unknown) =>
  new Request("http://localhost/api/chat", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
const userMessage = (text: string) => ({ id: "u1", role: "user", parts: [{ type: "text", text }] });
const approval = (id: string) => ({
  id: "a1",
  role: "assistant",
  parts: [
    { type: "tool-deploy", toolCallId: id, state: "approval-responded", input: {}, approval: { id, approved: true } },
  ],
});
/** API words a person cannot act on. */
const DEVELOPER_TEXT = /steer\(|followUp\(|pendingApprovals|session\.|Session "|KEEL_[A-Z_]+:/;

type Refusal = { error: { code: string; message: string; detail?: string } };

afterAll(() => dropTestSchemas());

/** A TCP proxy to PostgreSQL the test can cut (the shared server is never stopped). */
async function pgProxy(): Promise<{ url: string; down(): Promise<void>; up(): Promise<void> }> {
  const target = new URL(PG_URL);
  const socks = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const up = () =>
    new Promise<void>((done) => {
      server = createServer((c) => {
        const s = connect(Number(target.port || 5432), target.hostname);
        const end = () => {
          c.destroy();
          s.destroy();
        };
        for (const x of [c, s]) {
          socks.add(x);
          x.on("error", end).on("close", end);
        }
        c.pipe(s).pipe(c);
      });
      server.listen(port, "127.0.0.1", () => {
        port = (server!.address() as AddressInfo).port;
        done();
      });
    });
  const down = () =>
    new Promise<void>((done) => {
      for (const x of socks) x.destroy();
      socks.clear();
      server!.close(() => done());
    });
  await up();
  const url = new URL(PG_URL);
  url.host = `127.0.0.1:${port}`;
  url.password = "s3cret-pw";
  return { url: url.toString(), down, up };
}

describe("@keel/ui-stream: what the person sees", () => {
  it("a database outage is a 503 worded for the person (the operator's text to onError); once it is back the chat goes on", async () => {
    await requirePostgres();
    const proxy = await pgProxy();
    const store = new PostgresSessionStore({ url: proxy.url, schema: testSchema() });
    const { agent } = await scriptedAgent(DEPLOY_SCRIPT, { store });
    const logged: unknown[] = [];
    const chat = createChatHandler({ agent, onError: (e) => logged.push(e) });
    await (await chat(post({ id: "c1", messages: [userMessage("deploy v2")], trigger: "submit-message" }))).text();
    await proxy.down();
    for (const req of [
      post({ id: "c1", messages: [approval("call_1")], trigger: "submit-message" }),
      post({ id: "c2", messages: [userMessage("hello")], trigger: "submit-message" }),
      new Request("http://localhost/api/chat/c1/messages"),
    ]) {
      const res = await chat(req);
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBeTruthy();
      const body = (await res.json()) as Refusal;
      expect(body.error.code).toBe("KEEL_STORE_FAILED");
      expect(body.error.message).toMatch(/try again in a moment/);
      expect(JSON.stringify(body)).not.toMatch(/postgres|127\.0\.0\.1|KEEL_DATABASE_URL|KEEL_HOME|ECONNREFUSED/);
    }
    // The operator is told, with the details.
    expect(logged.length).toBeGreaterThan(0);
    expect(String((logged[0] as Error).message)).toMatch(/not reachable|ECONNREFUSED|Connection terminated/);
    await proxy.up();
    const answered = await chat(post({ id: "c1", messages: [approval("call_1")], trigger: "submit-message" }));
    expect(answered.status).toBe(200);
    expect(await answered.text()).toContain("Done: v2 is live.");
    await agent.close();
    await proxy.down();
  }, 30_000);

  it("a second tab's Approve while the turn runs, and a stale tab's Approve after it, are refusals worded for the person", async () => {
    const script = [
      {
        text: "Deploying v2.",
        toolCalls: [{ id: "call_1", name: "deploy", args: { version: "v2" } }],
      },
      { text: "Done: v2 is live.", delayMs: 400 },
    ];
    const { agent } = await scriptedAgent(script);
    const chat = createChatHandler({ agent });
    await (await chat(post({ id: "c1", messages: [userMessage("deploy v2")], trigger: "submit-message" }))).text();
    const first = await chat(post({ id: "c1", messages: [approval("call_1")], trigger: "submit-message" }));
    expect(first.status).toBe(200);
    // The second tab answers while the first tab's resumed turn is still running.
    const second = await chat(post({ id: "c1", messages: [approval("call_1")], trigger: "submit-message" }));
    expect(second.status).toBe(409);
    const busy = (await second.json()) as Refusal;
    expect(busy.error.code).toBe("KEEL_TURN_BUSY");
    expect(busy.error.message).not.toMatch(DEVELOPER_TEXT);
    expect(busy.error.message).toMatch(/still answering/);
    expect(busy.error.detail).toMatch(/KEEL_TURN_BUSY/);
    await first.text();
    // A tab left open answers again once the turn is over.
    const stale = await chat(post({ id: "c1", messages: [approval("call_1")], trigger: "submit-message" }));
    expect(stale.status).toBe(404);
    const gone = (await stale.json()) as Refusal;
    expect(gone.error.code).toBe("KEEL_APPROVAL_UNKNOWN");
    expect(gone.error.message).not.toMatch(DEVELOPER_TEXT);
    expect(gone.error.message).toMatch(/reload/);
    await agent.close();
  });

  it.each([
    ["run at once", false],
    ["approved, then resumed", true],
  ])(
    "a call cut by a dead process (%s) is read back as failed with a reason, in a turn that ended",
    async (_, asked) => {
      const db = join(mkdtempSync(join(tmpdir(), "keel-ui-cut-")), "sessions.sqlite");
      let started!: () => void;
      const running = new Promise<void>((r) => (started = r));
      const slow = (category: "exec" | "info") =>
        defineTool({
          name: "deploy",
          description: "Deploy a version.",
          input: z.object({ version: z.string() }),
          category,
          execute: async ({ version }) => {
            started();
            await new Promise((r) => setTimeout(r, 60_000).unref());
            return `${version} is live`;
          },
        });
      // The first process: the deploy starts, then the process is gone (its store closed under it).
      const storeA = new SqliteSessionStore({ path: db });
      const a = await createAgent({
        provider: new ScriptedProvider([
          { text: "Deploying.", toolCalls: [{ id: "call_1", name: "deploy", args: { version: "v2" } }] },
        ]),
        store: storeA,
        tools: [slow("exec")],
        lease: { ttlMs: 200 },
        ...(asked ? { plugins: [ask] } : {}),
      });
      const s = await a.session();
      if (asked) {
        expect((await s.run("deploy v2")).verdict.status).toBe("paused");
        await s.approve("call_1");
        void s.resume().catch(() => undefined);
      } else void s.run("deploy v2").catch(() => undefined);
      await running;
      storeA.close();
      // The restarted process opens the chat (the cut turn is closed interrupted) and reads it back.
      const storeB = new SqliteSessionStore({ path: db });
      const b = await createAgent({ provider: new ScriptedProvider([]), store: storeB, tools: [slow("exec")] });
      const messages = await chatMessages(await b.session(s.id, { waitMs: 5_000 }));
      const parts = messages.at(-1)!.parts as Array<{
        type: string;
        state?: string;
        errorText?: string;
        text?: string;
      }>;
      const call = parts.find((p) => p.type === "tool-deploy")!;
      expect(call.state).toBe("output-error");
      expect(call.errorText).toMatch(/stopped before this call finished: it may have run/);
      if (asked) expect((call as { approval?: { approved: boolean } }).approval?.approved).toBe(true);
      expect(parts.some((p) => p.type === "text" && /KEEL_TURN_INTERRUPTED/.test(p.text ?? ""))).toBe(true);
      await b.close();
      storeB.close();
    },
  );
});

/** Asks a person before every deploy. */
const ask = definePlugin({
  name: "review",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "deploys reach production" }));
  },
});
