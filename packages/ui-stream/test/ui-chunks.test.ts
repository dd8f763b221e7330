/**
 * The UI message stream of real turns (a kernel on a scripted model): the exact chunk sequence
 * of a turn that pauses for approval, of its resumption, of a denial and of a failed turn.
 */
import { describe, expect, it } from "vitest";
import { streamResume, streamTurn } from "@keel/stream";
import { messageText } from "@keel/kernel";
import type { Session } from "@keel/agent";
import { toUIMessageStream } from "../src/index.ts";
import { DEPLOY_SCRIPT, drain, scriptedAgent } from "./support.ts";

const resultOf = (s: Session) => (callId: string) => {
  const m = s.messages.find((x) => x.role === "tool" && x.toolCallId === callId);
  return m && messageText(m);
};

/** Part ids carry the session log position of their first delta: replaced by their kind for comparison. */
const plain = (chunks: unknown[]) => JSON.parse(JSON.stringify(chunks).replace(/"(text|reasoning)-[\d.]+"/g, '"$1"'));

describe("@keel/ui-stream: UI message chunks", () => {
  it("a turn that pauses for approval, then its resumption, chunk by chunk", async () => {
    const { agent } = await scriptedAgent(DEPLOY_SCRIPT);
    const session = await agent.session();
    const first = await drain(toUIMessageStream(streamTurn(session, "deploy v2"), { messageId: "m1" }));
    expect(plain(first)).toEqual([
      { type: "start", messageId: "m1" },
      { type: "start-step" },
      { type: "reasoning-start", id: "reasoning" },
      { type: "reasoning-delta", id: "reasoning", delta: "Ship it." },
      { type: "reasoning-end", id: "reasoning" },
      { type: "text-start", id: "text" },
      { type: "text-delta", id: "text", delta: "Deploying v2." },
      { type: "text-end", id: "text" },
      { type: "tool-input-start", toolCallId: "call_1", toolName: "deploy" },
      { type: "tool-input-available", toolCallId: "call_1", toolName: "deploy", input: { version: "v2" } },
      {
        type: "tool-approval-request",
        approvalId: "call_1",
        toolCallId: "call_1",
        // Why it asks, and who: the AI SDK's `approval.requestReason` and `approval.descriptor`.
        reason: "deploys reach production",
        approvalDescriptor: { plugin: "review" },
      },
      { type: "finish-step" },
      { type: "finish", finishReason: "tool-calls" },
    ]);
    // Part ids are unique: the two parts of the message differ.
    expect(first[2]).not.toEqual(first[5]);

    await session.approve("call_1");
    const second = await drain(
      toUIMessageStream(streamResume(session), {
        messageId: "m1",
        knownCalls: ["call_1"],
        outputOf: resultOf(session),
      }),
    );
    expect(plain(second)).toEqual([
      { type: "start", messageId: "m1" },
      {
        type: "data-tool-progress",
        id: "call_1",
        data: { toolCallId: "call_1", message: "deploying v2", fraction: 0.5 },
      },
      { type: "tool-output-available", toolCallId: "call_1", output: "v2 is live" },
      { type: "start-step" },
      { type: "text-start", id: "text" },
      { type: "text-delta", id: "text", delta: "Done: v2 is live." },
      { type: "text-end", id: "text" },
      { type: "finish-step" },
      { type: "finish", finishReason: "stop" },
    ]);
    await agent.close();
  });

  it("a denied approval is tool-output-denied; without knownCalls the call's input is sent first", async () => {
    const { agent } = await scriptedAgent([
      { toolCalls: [{ id: "call_1", name: "deploy", args: { version: "v2" } }] },
      { text: "Not deployed." },
    ]);
    const session = await agent.session();
    await drain(toUIMessageStream(streamTurn(session, "deploy v2")));
    await session.deny("call_1", { reason: "not today" });
    const chunks = await drain(toUIMessageStream(streamResume(session)));
    expect(plain(chunks).map((c: { type: string }) => c.type)).toEqual([
      "start",
      "start-step",
      "tool-input-start",
      "tool-input-available",
      "tool-output-denied",
      "finish-step",
      "start-step",
      "text-start",
      "text-delta",
      "text-end",
      "finish-step",
      "finish",
    ]);
    expect(chunks[0]).toEqual({ type: "start", messageId: expect.stringMatching(/^keel-.+\/1$/) });
    await agent.close();
  });

  it("a failed turn ends with the error chunk (its message and code, no stack) and finish 'error'", async () => {
    const { agent } = await scriptedAgent([
      { error: { class: "auth", message: "The API key was refused.", status: 401 } },
    ]);
    const session = await agent.session();
    const chunks = await drain(toUIMessageStream(streamTurn(session, "hello")));
    const error = chunks.find((c) => c.type === "error") as { errorText: string };
    expect(error.errorText).toContain("The API key was refused.");
    expect(error.errorText).not.toMatch(/\n\s+at /);
    expect(chunks.at(-1)).toEqual({ type: "finish", finishReason: "error" });
    // Said on the page first (a text part any useChat page renders, and the end as data), then the
    // error chunk, which makes useChat throw: nothing after it is read.
    expect(chunks.map((c) => c.type)).toEqual([
      "start",
      "text-start",
      "text-delta",
      "text-end",
      "data-keel-end",
      "error",
      "finish",
    ]);
    const note = chunks.find((c) => c.type === "text-delta") as { delta: string };
    expect(note.delta).toMatch(/^Failed: .*The API key was refused\..* \(KEEL_PROVIDER_ERROR\)$/s);
    expect(chunks.find((c) => c.type === "data-keel-end")).toMatchObject({
      data: { status: "failed", reason: "provider_error", code: "KEEL_PROVIDER_ERROR" },
    });
    await agent.close();
  });
});
