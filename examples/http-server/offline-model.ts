/**
 * A stand-in model for running the example offline: it reads the conversation and answers by
 * rule, so it gives the same answer whichever process asks (a restarted server included).
 * "deploy v1.2" → calls deploy; "status" → calls service_status; a tool result → a summary.
 * Set KEEL_MODEL (e.g. `anthropic:claude-sonnet-4-5`) to use a real model instead.
 */
import { createHash } from "node:crypto";
import { messageText } from "@keel/kernel";
import type { AssistantMessage, Message, ModelEvent, ModelProvider, ModelRequest } from "@keel/kernel";
import { ProviderError } from "@keel/kernel";

const B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** A call id shaped like Anthropic's (`toolu_01` and 24 random-looking characters), the same for the same conversation. */
function callId(messages: readonly Message[]): string {
  const digest = createHash("sha256")
    .update(JSON.stringify(messages.map((m) => [m.role, messageText(m)])))
    .digest();
  return `toolu_01${[...digest.subarray(0, 24)].map((b) => B62[b % 62]).join("")}`;
}

function decide(messages: readonly Message[]): AssistantMessage {
  const last = messages.at(-1);
  if (last?.role === "tool") {
    const results = messages.slice(messages.findLastIndex((m) => m.role === "assistant") + 1);
    const lines = results.map((m) =>
      m.role === "tool" ? `${m.isError ? "✗" : "✓"} ${m.toolName}: ${messageText(m)}` : "",
    );
    return { role: "assistant", content: [{ type: "text", text: `Done.\n${lines.join("\n")}` }] };
  }
  const text = last ? messageText(last) : "";
  const version = /\bdeploy\s+(v?\d+(?:\.\d+){0,2})/i.exec(text)?.[1];
  const id = callId(messages);
  if (version)
    return {
      role: "assistant",
      content: [
        { type: "text", text: `Deploying ${version}.` },
        { type: "tool_call", id, name: "deploy", args: { version } },
      ],
    };
  if (/\b(status|live|running)\b/i.test(text))
    return { role: "assistant", content: [{ type: "tool_call", id, name: "service_status", args: {} }] };
  return {
    role: "assistant",
    content: [{ type: "text", text: 'I can deploy a version ("deploy v1.4.2") or tell you what is live ("status").' }],
  };
}

/**
 * The offline provider, streaming its text a word at a time with `wordMs` between words.
 * Contract: deterministic in the conversation; honours abort.
 */
export function offlineModelWith({ wordMs = 5 }: { wordMs?: number } = {}): ModelProvider {
  return {
    id: "offline:release-rules",
    contextWindow: 32_000,
    // A mid-size model's price (USD per million tokens), so budgets (MAX_COST_USD) can be tried offline.
    price: { input: 3, output: 15 },
    async *stream(request: ModelRequest, { signal }: { signal: AbortSignal }): AsyncIterable<ModelEvent> {
      const message = decide(request.messages);
      for (const block of message.content) {
        if (block.type !== "text") continue;
        for (const word of block.text.split(/(?<= )/)) {
          if (signal.aborted) throw new ProviderError("aborted", "The request was aborted.");
          yield { type: "text_delta", text: word };
          await new Promise((r) => setTimeout(r, wordMs));
        }
      }
      const calls = message.content.some((b) => b.type === "tool_call");
      yield {
        type: "response",
        message,
        stopReason: calls ? "tool_use" : "end_turn",
        usage: { inputTokens: 0, outputTokens: 0 },
      };
    },
  };
}

/** The offline provider (5 ms between words). Contract: deterministic in the conversation; honours abort. */
export const offlineModel: ModelProvider = offlineModelWith();
