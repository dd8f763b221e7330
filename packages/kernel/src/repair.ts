import type { Message, ToolResultMessage } from "./messages.ts";
import { textContent } from "./messages.ts";

/** The text of a synthesized result for a tool call that never got one. */
export const INTERRUPTED_RESULT =
  "No result: the tool call was interrupted before it finished (the session was cancelled or the process stopped). Call the tool again if you still need it.";

/**
 * Make a history safe to send: every tool call is followed (before any other message) by
 * exactly one result, and no result lacks its call.
 * Contract: returns the input array itself when nothing needed repair; otherwise a new
 * array plus the ids of synthesized and dropped results. Never reorders other messages.
 */
export function repairToolPairs(messages: readonly Message[]): {
  messages: readonly Message[];
  synthesized: string[];
  dropped: string[];
} {
  const known = pairStates.get(messages);
  if (known !== undefined && known !== null && known.length === 0) return { messages, synthesized: [], dropped: [] };
  const synthesized: string[] = [];
  const dropped: string[] = [];
  let out: Message[] | undefined;
  let pending: Array<{ id: string; name: string }> = [];
  const flush = (into: Message[]) => {
    for (const call of pending) {
      const r: ToolResultMessage = {
        role: "tool",
        toolCallId: call.id,
        toolName: call.name,
        content: textContent(INTERRUPTED_RESULT),
        isError: true,
      };
      into.push(r);
      synthesized.push(call.id);
    }
    pending = [];
  };
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (m.role === "tool") {
      const at = pending.findIndex((c) => c.id === m.toolCallId);
      if (at >= 0) {
        pending.splice(at, 1);
        out?.push(m);
      } else {
        out ??= messages.slice(0, i) as Message[];
        dropped.push(m.toolCallId);
      }
      continue;
    }
    if (pending.length) {
      out ??= messages.slice(0, i) as Message[];
      flush(out);
    }
    out?.push(m);
    if (m.role === "assistant") {
      for (const b of m.content) if (b.type === "tool_call") pending.push({ id: b.id, name: b.name });
    }
  }
  if (pending.length) {
    out ??= messages.slice() as Message[];
    flush(out);
  }
  if (messages.length >= HISTORY_FACTS_MIN) pairStates.set(out ?? messages, []);
  return out ? { messages: out, synthesized, dropped } : { messages, synthesized, dropped };
}

/** Histories shorter than this are scanned whole each time (cheaper than keeping facts about them). */
export const HISTORY_FACTS_MIN = 32;

/**
 * What the pairing scan knows about a history array: the ids of calls still waiting for their
 * results at its end, or null when it needs a repair. Arrays are immutable once shared, so a
 * long history is scanned once and then extended one message at a time.
 */
const pairStates = new WeakMap<readonly Message[], readonly string[] | null>();

/** Contract: `next` is `prev` plus `message`; records its pairing state when `prev`'s is known. */
export function extendPairState(prev: readonly Message[], next: readonly Message[], message: Message): void {
  const st = pairStates.get(prev);
  if (st === undefined) return;
  let after: readonly string[] | null;
  if (st === null) after = null;
  else if (message.role === "tool") {
    const at = st.indexOf(message.toolCallId);
    after = at < 0 ? null : st.filter((_, k) => k !== at);
  } else if (st.length) after = null;
  else
    after = message.role === "assistant" ? message.content.flatMap((b) => (b.type === "tool_call" ? [b.id] : [])) : [];
  pairStates.set(next, after);
}
