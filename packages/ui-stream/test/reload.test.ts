/**
 * A chat through a restart and a reload, driven by the AI SDK's own client: its AbstractChat
 * (what useChat is, minus React) over DefaultChatTransport, whose fetch is the handler.
 * - restart: a new agent and handler on the same store (SQLite home, PostgreSQL schema) answer
 *   the approval the old process left waiting; the tool runs once;
 * - reload: `GET {api}/{id}/messages` gives the chat back, the waiting approval in the state
 *   useChat answers; `GET {api}/{id}/stream` (resume) is 204 when idle, else the running turn
 *   replayed from its start and followed to its end;
 * - a message sent while an approval waits is a 409 telling the person what to do, and with the
 *   onError of docs/applications.md the message goes back and Approve still sends.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  AbstractChat,
  DefaultChatTransport,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";
import type { ChatInit, ChatState, UIMessage } from "ai";
import { z } from "zod";
import { createAgent, defineTool } from "@keel/agent";
import type { Agent, ModelProvider } from "@keel/agent";
import { PostgresSessionStore } from "@keel/store-postgres";
import { ScriptedProvider } from "../../testkit/src/index.ts";
import type { ProviderScriptInput } from "../../testkit/src/index.ts";
import { dropTestSchemas, PG_URL, rawRows, requirePostgres, testSchema } from "../../store-postgres/test/support/pg.ts";
import { createChatHandler } from "../src/index.ts";
import type { ChatHandlerOptions } from "../src/index.ts";
import { DEPLOY_SCRIPT, scriptedAgent } from "./support.ts";

afterAll(() => dropTestSchemas());

/** useChat without React: the SDK's AbstractChat over a plain state. */
class TestChat extends AbstractChat<UIMessage> {
  /** Every state a tool part was shown in, as the page would render it. */
  readonly toolStates = new Set<string>();

  constructor(init: ChatInit<UIMessage>) {
    const shown = new Set<string>();
    const show = (m: UIMessage) => {
      for (const p of m.parts) if (isToolUIPart(p)) shown.add(p.state);
    };
    const state: ChatState<UIMessage> = {
      status: "ready",
      error: undefined,
      messages: init.messages ?? [],
      pushMessage(m) {
        show(m);
        this.messages = [...this.messages, m];
      },
      popMessage() {
        this.messages = this.messages.slice(0, -1);
      },
      replaceMessage(i, m) {
        show(m);
        this.messages = this.messages.map((x, j) => (j === i ? m : x));
      },
      snapshot: (t) => structuredClone(t),
    };
    super({ ...init, state });
    this.toolStates = shown;
  }

  /** What the page's setMessages does. */
  set(messages: UIMessage[]): void {
    this.messages = messages;
  }
}

/** A DefaultChatTransport whose requests go to `handler` (the page's `fetch`). */
function transportTo(handler: (r: Request) => Promise<Response>): DefaultChatTransport<UIMessage> {
  return new DefaultChatTransport({
    api: "http://chat.test/api/chat",
    fetch: ((input: string | URL | Request, init?: RequestInit) => handler(new Request(input, init))) as typeof fetch,
  });
}

/** Wait for `ok` (a hang detector, not a speed check). */
async function until(ok: () => boolean, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

type ToolPart = { type: string; state: string; toolCallId: string; output?: unknown; approval?: { id: string } };
/** The deploy script's first response (the call that pauses), and its second (the answer after approval). */
const [ASK, ANSWER] = DEPLOY_SCRIPT as Array<Record<string, unknown>>;
const firstRound = [ASK] as ProviderScriptInput;
const secondRound = [ANSWER] as ProviderScriptInput;

const toolParts = (m: UIMessage | undefined): ToolPart[] =>
  (m?.parts ?? []).filter((p) => isToolUIPart(p)) as unknown as ToolPart[];
const textOf = (m: UIMessage | undefined) => (m?.parts ?? []).map((p) => (p.type === "text" ? p.text : "")).join("");

/** A chat page: useChat's options docs/applications.md gives (sendAutomaticallyWhen; onError puts a refused message back). */
function page(
  handler: (r: Request) => Promise<Response>,
  id: string,
  messages: UIMessage[] = [],
  readmeOnError = true,
) {
  const errors: Error[] = [];
  const chat: TestChat = new TestChat({
    id,
    messages,
    transport: transportTo(handler),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onError: (e) => {
      errors.push(e);
      if (!readmeOnError) return;
      const last = chat.messages.at(-1);
      if (last?.role === "user") chat.set(chat.messages.slice(0, -1));
    },
  });
  return { chat, errors };
}

/** The deploys a session ran, from its log. */
async function deploysRun(agent: Agent, chatSession: string): Promise<number> {
  const events = await agent.store.events(chatSession);
  return events.filter((e) => e.type === "tool.completed" && e.name === "deploy" && e.status === "ok").length;
}

/** Send "deploy v2" and wait for the approval request; returns the session id. */
async function askToDeploy(chat: TestChat): Promise<void> {
  await chat.sendMessage({ text: "deploy v2" });
  await until(() => chat.status === "ready", "the paused turn");
  expect(toolParts(chat.lastMessage)[0]).toMatchObject({ state: "approval-requested", approval: { id: "call_1" } });
}

describe("@keel/ui-stream: a chat through a restart", () => {
  for (const db of ["sqlite", "postgres"] as const)
    it(`on ${db}: a new agent and handler on the same store answer the waiting approval; the tool runs once`, async () => {
      if (db === "postgres") await requirePostgres();
      const schema = db === "postgres" ? testSchema() : undefined;
      const home = mkdtempSync(join(tmpdir(), "keel-ui-restart-"));
      const storeOf = () => (schema ? { store: new PostgresSessionStore({ url: PG_URL, schema }) } : {});
      const first = await scriptedAgent(firstRound, { home, ...storeOf() });
      const { chat } = page(createChatHandler({ agent: first.agent }), "chat-1");
      await askToDeploy(chat);
      await first.agent.close();

      // The restarted process: a new agent on the same store, a new handler with its defaults.
      const second = await scriptedAgent(secondRound, { home, ...storeOf() });
      const handler = createChatHandler({ agent: second.agent });
      const answered: Response[] = [];
      const recorded = async (r: Request) => {
        const res = await handler(r);
        answered.push(res.clone());
        return res;
      };
      const after = page(recorded, "chat-1", chat.messages);
      await after.chat.addToolApprovalResponse({ id: "call_1", approved: true });
      await until(() => answered.length > 0, "the answer's request");
      const res = answered[0]!;
      expect(res.status, await res.clone().text()).toBe(200);
      await until(
        () => after.chat.status === "ready" && textOf(after.chat.lastMessage).includes("Done"),
        "the resumed turn",
      );
      expect(after.errors).toEqual([]);
      expect(toolParts(after.chat.lastMessage)[0]).toMatchObject({ state: "output-available", output: "v2 is live" });
      const sessionId = res.headers.get("x-keel-session")!;
      expect(await deploysRun(second.agent, sessionId)).toBe(1);
      if (schema) expect((await rawRows(schema, "keel_chats")).join("\n")).toContain(sessionId);
      await second.agent.close();
    }, 60_000);

  it('in memory only when asked: chats: "memory" forgets the chat with the process (404 after a restart)', async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-ui-restart-"));
    const first = await scriptedAgent(firstRound, { home });
    const { chat } = page(createChatHandler({ agent: first.agent, chats: "memory" }), "chat-1");
    await askToDeploy(chat);
    await first.agent.close();
    const second = await scriptedAgent(secondRound, { home });
    const after = page(createChatHandler({ agent: second.agent, chats: "memory" }), "chat-1", chat.messages);
    await after.chat.addToolApprovalResponse({ id: "call_1", approved: true });
    await until(() => after.errors.length > 0, "the refusal");
    expect(after.errors[0]!.message).toContain("No chat");
    await second.agent.close();
  });
});

describe("@keel/ui-stream: a chat through a reload", () => {
  it("GET {api}/{id}/messages gives the chat back with its waiting approval; a new page answers it", async () => {
    const { agent } = await scriptedAgent(DEPLOY_SCRIPT);
    const handler = createChatHandler({ agent });
    const { chat } = page(handler, "chat-1");
    await askToDeploy(chat);

    // The reload: the page reads the chat back and gives it to useChat({ messages }).
    const res = await handler(new Request("http://chat.test/api/chat/chat-1/messages"));
    expect(res.status).toBe(200);
    const { messages } = (await res.json()) as { messages: UIMessage[] };
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(textOf(messages[0])).toBe("deploy v2");
    expect(messages[1]!.id).toBe(chat.lastMessage!.id);
    expect(messages[1]!.parts.map((p) => p.type)).toEqual(["step-start", "reasoning", "text", "tool-deploy"]);
    expect(toolParts(messages[1])[0]).toMatchObject({ state: "approval-requested", approval: { id: "call_1" } });
    // Another caller's view of the same id: nothing.
    const other = createChatHandler({ agent, principal: () => "mallory" });
    expect(await (await other(new Request("http://chat.test/api/chat/chat-1/messages"))).json()).toEqual({
      messages: [],
    });

    const reloaded = page(handler, "chat-1", messages);
    await reloaded.chat.addToolApprovalResponse({ id: "call_1", approved: true });
    await until(
      () => reloaded.chat.status === "ready" && textOf(reloaded.chat.lastMessage).includes("Done: v2 is live."),
      "the resumed turn",
    );
    expect(reloaded.errors).toEqual([]);
    expect(reloaded.chat.messages).toHaveLength(2);
    expect(toolParts(reloaded.chat.lastMessage)[0]).toMatchObject({ state: "output-available", output: "v2 is live" });
    // Read back once more: the whole answered turn, as the page shows it.
    const again = (await (await handler(new Request("http://chat.test/api/chat/chat-1/messages"))).json()) as {
      messages: UIMessage[];
    };
    expect(toolParts(again.messages[1])[0]).toMatchObject({ state: "output-available", output: "v2 is live" });
    expect(textOf(again.messages[1])).toContain("Done: v2 is live.");
    await agent.close();
  });

  it("resume: GET {api}/{id}/stream is 204 when idle; mid-turn a reload replays the message and follows it to its end", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const inner = new ScriptedProvider([
      { text: "Checking the status first.", toolCalls: [{ id: "s1", name: "status", args: {} }], chunkSize: 8 },
      { text: "All green: nothing to deploy.", chunkSize: 4 },
    ]);
    let calls = 0;
    const provider: ModelProvider = {
      id: inner.id,
      async *stream(request, options) {
        // The second round waits: the turn is running when the page reloads.
        if (++calls === 2) await gate;
        yield* inner.stream(request, options);
      },
    };
    const status = defineTool({
      name: "status",
      description: "The release status.",
      input: z.object({}),
      category: "info",
      execute: () => "all green",
    });
    const running = await createAgent({
      provider,
      tools: [status],
      home: mkdtempSync(join(tmpdir(), "keel-ui-rejoin-")),
    });
    const options: ChatHandlerOptions = { agent: running, onDisconnect: "continue" };
    const handler = createChatHandler(options);
    const idle = await transportTo(handler).reconnectToStream({ chatId: "never-started" });
    expect(idle).toBeNull();

    const first = page(handler, "chat-2");
    void first.chat.sendMessage({ text: "status?" });
    await until(() => toolParts(first.chat.lastMessage)[0]?.state === "output-available", "the first round");
    // The reload: the page goes away mid-turn (its request is cancelled), a new one loads the chat and resumes.
    await first.chat.stop();
    const { messages } = (await (await handler(new Request("http://chat.test/api/chat/chat-2/messages"))).json()) as {
      messages: UIMessage[];
    };
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    const reloaded = page(handler, "chat-2", messages);
    const resumed = reloaded.chat.resumeStream();
    await until(() => reloaded.chat.status === "streaming" || reloaded.chat.status === "submitted", "the rejoin");
    release();
    await resumed;
    await until(() => reloaded.chat.status === "ready", "the end of the rejoined turn");
    expect(reloaded.errors).toEqual([]);
    expect(reloaded.chat.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    const last = reloaded.chat.lastMessage!;
    expect(last.id).toBe(messages[1]!.id);
    expect(textOf(last)).toBe("Checking the status first.All green: nothing to deploy.");
    expect(toolParts(last)).toEqual([expect.objectContaining({ state: "output-available", output: "all green" })]);
    // The turn has ended: nothing to rejoin.
    const res = await handler(new Request("http://chat.test/api/chat/chat-2/stream"));
    expect(res.status).toBe(204);
    await running.close();
  }, 60_000);

  it("a reload after Approve, while the resumed turn runs: the rejoined message shows the call answered, never asking again", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const inner = new ScriptedProvider(DEPLOY_SCRIPT);
    let calls = 0;
    const provider: ModelProvider = {
      id: inner.id,
      async *stream(request, options) {
        // The round after the approved deploy waits: the resumed turn is running when the page reloads.
        if (++calls === 2) await gate;
        yield* inner.stream(request, options);
      },
    };
    const { agent } = await scriptedAgent(provider);
    const handler = createChatHandler({ agent, onDisconnect: "continue" });
    const first = page(handler, "chat-4");
    await askToDeploy(first.chat);
    void first.chat.addToolApprovalResponse({ id: "call_1", approved: true });
    await until(() => toolParts(first.chat.lastMessage)[0]?.state === "output-available", "the deploy");
    await first.chat.stop();

    const { messages } = (await (await handler(new Request("http://chat.test/api/chat/chat-4/messages"))).json()) as {
      messages: UIMessage[];
    };
    expect(toolParts(messages[1])[0]).toMatchObject({ state: "output-available", output: "v2 is live" });
    const reloaded = page(handler, "chat-4", messages);
    const resumed = reloaded.chat.resumeStream();
    await until(() => reloaded.chat.status === "streaming", "the rejoin");
    await until(() => toolParts(reloaded.chat.lastMessage)[0]?.state === "output-available", "the replayed deploy");
    release();
    await resumed;
    await until(() => reloaded.chat.status === "ready", "the end of the rejoined turn");
    expect(reloaded.errors).toEqual([]);
    expect([...reloaded.chat.toolStates]).not.toContain("approval-requested");
    const last = reloaded.chat.lastMessage!;
    expect(reloaded.chat.messages).toHaveLength(2);
    expect(textOf(last)).toBe("Deploying v2.Done: v2 is live.");
    expect(toolParts(last)).toEqual([expect.objectContaining({ state: "output-available", output: "v2 is live" })]);
    const [session] = await agent.store.listSessions();
    const events = await agent.store.events(session!.id);
    expect(events.filter((e) => e.type === "tool.completed" && e.status === "ok")).toHaveLength(1);
    await agent.close();
  }, 60_000);

  it("a message sent while an approval waits is a 409 saying to answer it first; with the onError of docs/applications.md, Approve still sends", async () => {
    const { agent } = await scriptedAgent(DEPLOY_SCRIPT);
    const handler = createChatHandler({ agent });
    const { chat, errors } = page(handler, "chat-3");
    await askToDeploy(chat);
    await chat.sendMessage({ text: "are you there?" });
    await until(() => errors.length === 1, "the refusal");
    const body = JSON.parse(errors[0]!.message) as { error: { code: string; message: string } };
    expect(body.error).toEqual({
      code: "KEEL_APPROVAL_PENDING",
      message: '"deploy" is waiting for your approval: approve or deny it first, then send your message again.',
    });
    // onError took the refused message back: the waiting approval is the last message again.
    expect(chat.lastMessage?.role).toBe("assistant");
    chat.clearError();
    await chat.addToolApprovalResponse({ id: "call_1", approved: true });
    await until(
      () => chat.status === "ready" && textOf(chat.lastMessage).includes("Done: v2 is live."),
      "the resumed turn",
    );
    expect(toolParts(chat.lastMessage)[0]).toMatchObject({ state: "output-available", output: "v2 is live" });
    await agent.close();
  });
});
