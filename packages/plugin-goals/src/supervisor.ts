/**
 * The goal supervisor: an independent model call that reads the goal and the end of the
 * session and answers whether the goal is achieved, as JSON `{ achieved, reason }`.
 */
import type { Message, ModelProvider } from "@keel/kernel";
import { complete, errorMessage, messageText, ProviderError } from "@keel/kernel";
import { truncate } from "@keel/text";

/** What a supervisor call came to. `deferred`: rate limited (429); ask again later, not a failure. */
export type SupervisorOutcome =
  | { kind: "verdict"; achieved: boolean; reason: string }
  | { kind: "failed"; error: string }
  | { kind: "deferred"; error: string };

const SYSTEM =
  "You verify whether an AI agent has achieved its goal. Read the goal and the end of the agent's session. " +
  'Answer with JSON only: {"achieved": true|false, "reason": "<one sentence>"}. Say achieved only when the work the goal asks for is done, not merely planned or claimed.';

/** Ask `model` about `goal` given the last messages. Contract: never throws. */
export async function superviseGoal(
  model: ModelProvider,
  goal: string,
  messages: readonly Message[],
  options: { timeoutMs: number; signal?: AbortSignal; maxChars?: number },
): Promise<SupervisorOutcome> {
  const transcript = truncate(
    messages
      .slice(-12)
      .map(
        (m) =>
          `${m.role === "tool" ? `tool ${m.toolName}` : m.role}: ${
            messageText(m) ||
            (m.role === "assistant"
              ? m.content
                  .filter((b) => b.type === "tool_call")
                  .map((b) => (b.type === "tool_call" ? `[calls ${b.name}]` : ""))
                  .join(" ")
              : "")
          }`,
      )
      .join("\n"),
    options.maxChars ?? 12_000,
    { tail: Math.floor((options.maxChars ?? 12_000) / 2) },
  );
  let timeout: AbortSignal | undefined;
  try {
    timeout = AbortSignal.timeout(options.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const call = complete(
      model,
      {
        system: SYSTEM,
        messages: [
          { role: "user", content: [{ type: "text", text: `Goal: ${goal}\n\nEnd of the session:\n${transcript}` }] },
        ],
        options: { maxTokens: 200, temperature: 0 },
      },
      { signal },
    );
    // A provider that ignores its signal cannot hold the run: the deadline wins the race.
    const r = await Promise.race([
      call,
      new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true })),
    ]);
    call.catch(() => {});
    return parseVerdict(r.text);
  } catch (err) {
    if (err instanceof ProviderError && err.errorClass === "rate_limited")
      return { kind: "deferred", error: errorMessage(err) };
    return { kind: "failed", error: timeout?.aborted ? `timed out after ${options.timeoutMs} ms` : errorMessage(err) };
  }
}

/** The verdict in a supervisor's text (the whole text, or its first JSON object). */
export function parseVerdict(text: string): SupervisorOutcome {
  const m = /\{[\s\S]*\}/.exec(text);
  try {
    const v = JSON.parse(m ? m[0] : text) as { achieved?: unknown; reason?: unknown };
    if (typeof v.achieved !== "boolean")
      return { kind: "failed", error: `the supervisor's answer has no boolean "achieved": ${truncate(text, 200)}` };
    return {
      kind: "verdict",
      achieved: v.achieved,
      reason: typeof v.reason === "string" ? truncate(v.reason, 500) : "",
    };
  } catch {
    return { kind: "failed", error: `the supervisor did not answer with JSON: ${truncate(text, 200)}` };
  }
}
