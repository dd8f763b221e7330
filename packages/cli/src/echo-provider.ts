/** The offline model of last resort: answers every request by saying what it received. */
import type { ModelEvent, ModelProvider, ModelRequest } from "@keel/kernel";
import { ProviderError } from "@keel/kernel";
import { headOf } from "@keel/text";

/** Contract: streams one short text answer per request; honours abort. */
export function echoProvider(): ModelProvider {
  return {
    id: "offline:echo",
    async *stream(request: ModelRequest, { signal }: { signal: AbortSignal }): AsyncIterable<ModelEvent> {
      if (signal.aborted) throw new ProviderError("aborted", "aborted");
      const last = [...request.messages].reverse().find((m) => m.role === "user");
      const said = last ? last.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join(" ") : "";
      const text = `(offline echo model: no API key is set) You said: ${headOf(said, 400)}`;
      yield { type: "text_delta", text };
      yield {
        type: "response",
        message: { role: "assistant", content: [{ type: "text", text }] },
        stopReason: "end_turn",
        usage: { inputTokens: 0, outputTokens: 0 },
      };
    },
  };
}
