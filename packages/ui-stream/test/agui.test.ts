/**
 * AG-UI from real turns: every event passes @ag-ui/core's EventSchema; a paused turn ends its run
 * with an `interrupt` outcome that the next run's `resume` answers (through the AG-UI handler);
 * protobuf is chosen by Accept; malformed input is a 400.
 */
import { describe, expect, it } from "vitest";
import { EventSchema } from "@ag-ui/core/schemas";
import { AGUI_MEDIA_TYPE } from "@ag-ui/encoder";
import { createAGUIHandler } from "../src/index.ts";
import { DEPLOY_SCRIPT, scriptedAgent } from "./support.ts";

/** The SSE events of a response, each validated by @ag-ui/core. */
async function events(res: Response): Promise<Array<Record<string, any>>> {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/event-stream");
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((f) => f.startsWith("data: "))
    .map((f) => EventSchema.parse(JSON.parse(f.slice(6))) as Record<string, any>);
}

const post = (body: unknown, headers: Record<string, string> = {}) =>
  new Request("http://localhost/api/agui", {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

const run = (runId: string, extra: object = {}) => ({
  threadId: "t1",
  runId,
  messages: [{ id: "u1", role: "user", content: "deploy v2" }],
  tools: [],
  context: [],
  ...extra,
});

describe("@keel/ui-stream: AG-UI", () => {
  it("a run that pauses ends with an interrupt; the next run resumes it and finishes with the result", async () => {
    const { agent } = await scriptedAgent(DEPLOY_SCRIPT);
    const handler = createAGUIHandler({ agent });
    const first = await events(await handler(post(run("r1"))));
    expect(first.map((e) => e.type)).toEqual([
      "RUN_STARTED",
      "REASONING_START",
      "REASONING_MESSAGE_START",
      "REASONING_MESSAGE_CONTENT",
      "REASONING_MESSAGE_END",
      "REASONING_END",
      "TEXT_MESSAGE_START",
      "TEXT_MESSAGE_CONTENT",
      "TEXT_MESSAGE_END",
      "TOOL_CALL_START",
      "TOOL_CALL_ARGS",
      "TOOL_CALL_END",
      "RUN_FINISHED",
    ]);
    expect(first[0]).toMatchObject({ threadId: "t1", runId: "r1" });
    expect(first[9]).toMatchObject({ toolCallId: "call_1", toolCallName: "deploy" });
    expect(JSON.parse(first[10]!.delta)).toEqual({ version: "v2" });
    expect(first.at(-1)!.outcome).toMatchObject({
      type: "interrupt",
      interrupts: [{ id: "call_1", toolCallId: "call_1", reason: "tool_approval" }],
    });

    const resume = { resume: [{ interruptId: "call_1", status: "resolved", payload: { approved: true } }] };
    const second = await events(await handler(post(run("r2", resume))));
    expect(second.map((e) => e.type)).toEqual([
      "RUN_STARTED",
      "CUSTOM",
      "TOOL_CALL_RESULT",
      "TEXT_MESSAGE_START",
      "TEXT_MESSAGE_CONTENT",
      "TEXT_MESSAGE_END",
      "RUN_FINISHED",
    ]);
    expect(second[2]).toMatchObject({ toolCallId: "call_1", content: "v2 is live" });
    expect(second.at(-1)).toMatchObject({ runId: "r2", outcome: { type: "success" }, result: "Done: v2 is live." });
    await agent.close();
  });

  it("a resume whose payload is not an approval is a 400, the turn stays paused; a failed turn is RUN_ERROR", async () => {
    const { agent } = await scriptedAgent([
      { toolCalls: [{ id: "call_1", name: "deploy", args: { version: "v2" } }] },
      { error: { class: "invalid_request", message: "The model refused the request.", status: 400 } },
    ]);
    const handler = createAGUIHandler({ agent });
    await events(await handler(post(run("r1"))));
    const bad = await handler(
      post(run("r2", { resume: [{ interruptId: "call_1", status: "resolved", payload: "yes" }] })),
    );
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string; message: string } }).error.message).toContain(
      "resume[0].payload",
    );
    const denied = { resume: [{ interruptId: "call_1", status: "cancelled" }] };
    const last = await events(await handler(post(run("r3", denied))));
    expect(last.at(-1)).toMatchObject({ type: "RUN_ERROR", message: expect.stringContaining("The model refused") });
    expect(last.at(-1)!.message).not.toMatch(/\n\s+at /);
    await agent.close();
  });

  it("encodes protobuf when Accept asks for it; malformed input is 400 JSON", async () => {
    const { agent } = await scriptedAgent([{ text: "Hello." }]);
    const handler = createAGUIHandler({ agent });
    const res = await handler(post(run("r1"), { accept: AGUI_MEDIA_TYPE }));
    expect(res.headers.get("content-type")).toBe(AGUI_MEDIA_TYPE);
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(bytes.length).toBeGreaterThan(10);
    expect(new TextDecoder().decode(bytes)).not.toContain("data: ");
    const bad = await handler(post({ threadId: "t1" }));
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string; message: string } }).error.code).toBe("BAD_REQUEST");
    await agent.close();
  });
});
