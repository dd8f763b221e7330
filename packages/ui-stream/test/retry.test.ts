/**
 * A provider's stream retried mid-answer (a `notice` of kind retry; what the failed attempt
 * streamed is void): the UI stream takes the attempt's parts back with `reset-step`, and a retry
 * before any delta of a round takes nothing back (the step on the client is the previous round's).
 */
import { describe, expect, it } from "vitest";
import { streamResume, streamTurn } from "@keel/stream";
import type { ModelEvent, ModelProvider } from "@keel/kernel";
import { toUIMessageStream } from "../src/index.ts";
import { drain, scriptedAgent } from "./support.ts";

/** First request: "Brok", a retry, then the call; second: a retry, then the answer. */
function retrying(): ModelProvider {
  let calls = 0;
  return {
    id: "test:retrying",
    contextWindow: 32_000,
    async *stream(): AsyncIterable<ModelEvent> {
      calls++;
      const usage = { inputTokens: 0, outputTokens: 0 };
      if (calls === 1) {
        yield { type: "text_delta", text: "Brok" };
        yield { type: "notice", kind: "retry", message: "The stream was cut; retrying." };
        yield { type: "text_delta", text: "Deploying." };
        yield {
          type: "response",
          message: {
            role: "assistant",
            content: [
              { type: "text", text: "Deploying." },
              { type: "tool_call", id: "call_1", name: "deploy", args: { version: "v2" } },
            ],
          },
          stopReason: "tool_use",
          usage,
        };
        return;
      }
      yield { type: "notice", kind: "retry", message: "Overloaded; retrying." };
      yield { type: "text_delta", text: "Done." };
      yield {
        type: "response",
        message: { role: "assistant", content: [{ type: "text", text: "Done." }] },
        stopReason: "end_turn",
        usage,
      };
    },
  };
}

describe("@keel/ui-stream: provider retries", () => {
  it("reset-step takes back the failed attempt's text, and only when it streamed some", async () => {
    const { agent } = await scriptedAgent(retrying());
    const session = await agent.session();
    const first = await drain(toUIMessageStream(streamTurn(session, "deploy v2")));
    const types = first.map((c) => c.type);
    expect(types.slice(0, 8)).toEqual([
      "start",
      "start-step",
      "text-start",
      "text-delta",
      "text-end",
      "reset-step",
      "text-start",
      "text-delta",
    ]);
    expect(first[7]).toMatchObject({ delta: "Deploying." });
    await session.approve("call_1");
    const second = await drain(toUIMessageStream(streamResume(session), { knownCalls: ["call_1"] }));
    expect(second.map((c) => c.type)).not.toContain("reset-step");
    expect(second.find((c) => c.type === "text-delta")).toMatchObject({ delta: "Done." });
    await agent.close();
  });
});
