/**
 * The chat handler's rules, called with Requests: malformed bodies are 400 JSON; a chat belongs
 * to its caller (another caller's approvals for it are 404, its messages start its own chat);
 * an approval for an unknown call is 404 and leaves the turn paused.
 */
import { describe, expect, it } from "vitest";
import { createChatHandler } from "../src/index.ts";
import { DEPLOY_SCRIPT, scriptedAgent } from "./support.ts";

const post = (body: unknown, user = "alice") =>
  new Request("http://localhost/api/chat", {
    method: "POST",
    headers: { "content-type": "application/json", "x-user": user },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

const userMessage = (text: string) => ({ id: "u1", role: "user", parts: [{ type: "text", text }] });
const approval = (id: string, approved = true) => ({
  id: "a1",
  role: "assistant",
  parts: [
    { type: "step-start" },
    { type: "tool-deploy", toolCallId: id, state: "approval-responded", input: {}, approval: { id, approved } },
  ],
});

describe("@keel/ui-stream: chat handler", () => {
  it("refuses malformed bodies with 400 JSON, and regenerate", async () => {
    const { agent } = await scriptedAgent([]);
    const chat = createChatHandler({ agent });
    for (const body of ["{", { id: "c1" }, { id: "c1", messages: [], trigger: "submit-message" }]) {
      const res = await chat(post(body));
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { code: string; message: string } }).error.code).toBe("BAD_REQUEST");
    }
    const regen = await chat(post({ id: "c1", messages: [userMessage("hi")], trigger: "regenerate-message" }));
    expect(regen.status).toBe(400);
    const noText = await chat(
      post({ id: "c1", messages: [{ id: "u", role: "user", parts: [] }], trigger: "submit-message" }),
    );
    expect(noText.status).toBe(400);
    await agent.close();
  });

  it("a chat is its caller's own; an unknown approval is 404 and the turn stays paused", async () => {
    const { agent } = await scriptedAgent(DEPLOY_SCRIPT);
    const chat = createChatHandler({ agent, principal: (r) => r.headers.get("x-user") ?? undefined });
    const started = await chat(post({ id: "c1", messages: [userMessage("deploy v2")], trigger: "submit-message" }));
    expect(started.status).toBe(200);
    expect(started.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
    expect(await started.text()).toContain('"type":"tool-approval-request"');
    const sessionId = started.headers.get("x-keel-session")!;

    // Mallory names alice's chat: it is not hers.
    const foreign = await chat(
      post({ id: "c1", messages: [approval("call_1")], trigger: "submit-message" }, "mallory"),
    );
    expect(foreign.status).toBe(404);
    const unknown = await chat(post({ id: "c1", messages: [approval("call_9")], trigger: "submit-message" }));
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string; message: string } }).error.code).toBe(
      "KEEL_APPROVAL_UNKNOWN",
    );
    expect((await agent.session(sessionId)).pendingApprovals().map((p) => p.callId)).toEqual(["call_1"]);
    // A new message while the turn waits is 409, before anything is streamed.
    const busy = await chat(post({ id: "c1", messages: [userMessage("hello")], trigger: "submit-message" }));
    expect(busy.status).toBe(409);

    const answered = await chat(post({ id: "c1", messages: [approval("call_1")], trigger: "submit-message" }));
    expect(answered.headers.get("x-keel-session")).toBe(sessionId);
    const text = await answered.text();
    expect(text).toContain('"output":"v2 is live"');
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const refused = await chat(post({ id: "c1", messages: [userMessage("hi")], trigger: "submit-message" }, ""));
    expect(refused.status).toBe(401);
    await agent.close();
  });
});
