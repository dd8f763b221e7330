/**
 * The UI message stream read by the AI SDK itself: the Response's SSE body is parsed with `ai`'s
 * parseJsonEventStream against its uiMessageChunkSchema, and the chunks are assembled into a
 * UIMessage by readUIMessageStream, as useChat does; the resumed turn continues that message.
 */
import { describe, expect, it } from "vitest";
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";
import type { UIMessage, UIMessageChunk } from "ai";
import { streamResume, streamTurn } from "@keel/stream";
import { messageText } from "@keel/kernel";
import { uiMessageStreamResponse } from "../src/index.ts";
import { DEPLOY_SCRIPT, scriptedAgent } from "./support.ts";

/** The Response as the SDK's client reads it: every chunk must pass the SDK's schema. */
async function readAsSDK(res: Response, message?: UIMessage): Promise<UIMessage> {
  expect(res.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
  expect(res.headers.get("content-type")).toBe("text/event-stream");
  const chunks = parseJsonEventStream({ stream: res.body!, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream<{ success: boolean; value?: UIMessageChunk; error?: unknown }, UIMessageChunk>({
      transform(parsed, controller) {
        if (!parsed.success) throw new Error(`A chunk the SDK rejects: ${String(parsed.error)}`);
        controller.enqueue(parsed.value!);
      },
    }),
  );
  let last: UIMessage | undefined;
  const errors: unknown[] = [];
  for await (const m of readUIMessageStream({
    stream: chunks,
    ...(message ? { message } : {}),
    onError: (e) => errors.push(e),
  }))
    last = m;
  expect(errors).toEqual([]);
  return last!;
}

describe("@keel/ui-stream: read by the AI SDK", () => {
  it("builds the assistant message useChat shows: reasoning, text, a tool awaiting approval, then its output", async () => {
    const { agent } = await scriptedAgent(DEPLOY_SCRIPT);
    const session = await agent.session();
    const res = uiMessageStreamResponse(streamTurn(session, "deploy v2"), { messageId: "m1" });
    const raw = res.clone();
    const paused = await readAsSDK(res);
    expect((await raw.text()).trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(paused.id).toBe("m1");
    expect(paused.parts.map((p) => p.type)).toEqual(["step-start", "reasoning", "text", "tool-deploy"]);
    const tool = paused.parts[3] as { state: string; input: unknown; approval: { id: string } };
    expect(tool).toMatchObject({ state: "approval-requested", input: { version: "v2" }, approval: { id: "call_1" } });
    expect(paused.parts[2]).toMatchObject({ type: "text", text: "Deploying v2.", state: "done" });
    await agent.close();
  });

  it("continues the same message after the approval: the tool part gets its output, then the answer", async () => {
    const { agent } = await scriptedAgent(DEPLOY_SCRIPT);
    const session = await agent.session();
    const paused = await readAsSDK(uiMessageStreamResponse(streamTurn(session, "deploy v2"), { messageId: "m1" }));
    // What addToolApprovalResponse leaves on the part.
    const answered = structuredClone(paused);
    Object.assign(answered.parts[3]!, { state: "approval-responded", approval: { id: "call_1", approved: true } });
    await session.approve("call_1");
    const outputOf = (id: string) => {
      const m = session.messages.find((x) => x.role === "tool" && x.toolCallId === id);
      return m && messageText(m);
    };
    const done = await readAsSDK(
      uiMessageStreamResponse(streamResume(session), { messageId: "m1", knownCalls: ["call_1"], outputOf }),
      answered,
    );
    expect(done.id).toBe("m1");
    expect(done.parts.map((p) => p.type)).toEqual([
      "step-start",
      "reasoning",
      "text",
      "tool-deploy",
      "data-tool-progress",
      "step-start",
      "text",
    ]);
    expect(done.parts[3]).toMatchObject({ state: "output-available", output: "v2 is live" });
    expect(done.parts.at(-1)).toMatchObject({ type: "text", text: "Done: v2 is live.", state: "done" });
    await agent.close();
  });
});
