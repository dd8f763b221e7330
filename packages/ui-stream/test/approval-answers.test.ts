/**
 * Approval answers as useChat and AG-UI clients send them, with a person's reason: an answer the
 * handler cannot read (a reason over 2000 characters) is a 400 that names the part and why,
 * never skipped as if it were no answer; the limit is in characters, so 1500 emoji pass.
 */
import { describe, expect, it } from "vitest";
import { createAGUIHandler, createChatHandler } from "../src/index.ts";
import { scriptedAgent } from "./support.ts";

const SCRIPT = [{ toolCalls: [{ id: "call_1", name: "deploy", args: { version: "v2" } }] }, { text: "Not deployed." }];
const EMOJI = "🛑".repeat(1500);

const post = (path: string, body: unknown) =>
  new Request(`http://localhost${path}`, { method: "POST", body: JSON.stringify(body) });

const ask = {
  id: "c1",
  trigger: "submit-message",
  messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "deploy v2" }] }],
};
const answer = (approval: Record<string, unknown>) => ({
  id: "c1",
  trigger: "submit-message",
  messages: [
    {
      id: "a1",
      role: "assistant",
      parts: [
        { type: "step-start" },
        { type: "tool-deploy", toolCallId: "call_1", state: "approval-responded", input: {}, approval },
      ],
    },
  ],
});

describe("@keel/ui-stream: approval answers with reasons", () => {
  it("useChat: 1500 emoji are a reason; 2001 characters are a 400 naming the part, and the turn stays paused", async () => {
    const { agent } = await scriptedAgent(SCRIPT);
    const chat = createChatHandler({ agent });
    const paused = await chat(post("/api/chat", ask));
    await paused.text();
    const session = await agent.session(paused.headers.get("x-keel-session")!);

    const long = await chat(post("/api/chat", answer({ id: "call_1", approved: false, reason: "x".repeat(2001) })));
    expect(long.status).toBe(400);
    const error = ((await long.json()) as { error: { message: string } }).error.message;
    expect(error).toContain("parts[1]");
    expect(error).toContain("2000");
    expect(session.pendingApprovals()[0]?.answer).toBeUndefined();

    const denied = await chat(post("/api/chat", answer({ id: "call_1", approved: false, reason: EMOJI })));
    expect(denied.status).toBe(200);
    expect(await denied.text()).toContain('"type":"tool-output-denied"');
    const result = session.messages.find((m) => m.role === "tool" && m.toolCallId === "call_1");
    expect(JSON.stringify(result)).toContain("🛑🛑🛑");
    // The log says who answered: the caller (the handler's principal), for the studio's audit trail.
    const resolved = (await session.events()).find((e) => e.type === "approval.resolved");
    expect(resolved).toMatchObject({ approved: false, answerer: "chat:anonymous" });
    await agent.close();
  });

  it("AG-UI: 1500 emoji are a reason on a resume; the answer is recorded as the caller's", async () => {
    const { agent } = await scriptedAgent(SCRIPT);
    const agui = createAGUIHandler({ agent, principal: () => "alice@example.com" });
    const run = (runId: string, extra: object = {}) => ({
      threadId: "t1",
      runId,
      messages: [{ id: "u1", role: "user", content: "deploy v2" }],
      tools: [],
      context: [],
      ...extra,
    });
    const paused = await agui(post("/api/agui", run("r1")));
    await paused.text();
    const resume = [{ interruptId: "call_1", status: "resolved", payload: { approved: false, reason: EMOJI } }];
    const res = await agui(post("/api/agui", run("r2", { resume })));
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('"type":"RUN_FINISHED"');
    const session = await agent.session(paused.headers.get("x-keel-session")!);
    const result = session.messages.find((m) => m.role === "tool" && m.toolCallId === "call_1");
    expect(JSON.stringify(result)).toContain("🛑🛑🛑");
    const resolved = (await session.events()).find((e) => e.type === "approval.resolved");
    expect(resolved).toMatchObject({ approved: false, answerer: "ag-ui:alice@example.com" });
    await agent.close();
  });
});
