/**
 * `prun` (the pi loop's pruning requests): a tool the model calls to drop its own stale tool
 * outputs, by call id or by a range of them. The request is read back from the conversation
 * (a successful `prun` call and its arguments), so it holds across restarts, and applied at
 * the next round.pre_request, after the round's tools ran, as `mask_tool_result` edits: a
 * call keeps its result (a short stub), so no pair is ever split.
 */
import { z } from "zod";
import type { Message, MessageEdit, ToolDefinition, ToolResultMessage } from "@keel/kernel";
import { defineTool } from "@keel/kernel";
import { headOf } from "@keel/text";
import { plainText } from "./messages.ts";

/** The text a pruned output becomes starts with this. */
export const PRUNED_PREFIX = "[output pruned by the model";

export const PrunArgs = z
  .strictObject({
    ids: z.array(z.string().min(1)).max(200).optional().describe("tool call ids whose outputs to drop"),
    from: z.string().min(1).optional().describe("drop every output from this call id…"),
    to: z.string().min(1).optional().describe("…up to and including this one (default: up to this call)"),
    reason: z.string().max(300).optional().describe("why they are stale, kept in their place"),
  })
  .refine((a) => (a.ids?.length ?? 0) > 0 || a.from !== undefined, {
    message: "give ids, or a range starting at from",
  });

/** The results (tool call ids, in order) a prun call with `args` names, among `messages` before it. */
export function prunTargets(
  messages: readonly Message[],
  args: z.output<typeof PrunArgs>,
): { ids: string[]; unknown: string[] } {
  const order = messages.flatMap((m) => (m.role === "tool" ? [m.toolCallId] : []));
  const at = new Map(order.map((id, i) => [id, i]));
  const ids = new Set<string>();
  const unknown: string[] = [];
  for (const id of args.ids ?? []) at.has(id) ? ids.add(id) : unknown.push(id);
  if (args.from !== undefined) {
    const start = at.get(args.from);
    const end = args.to === undefined ? order.length - 1 : at.get(args.to);
    if (start === undefined) unknown.push(args.from);
    if (args.to !== undefined && end === undefined) unknown.push(args.to);
    if (start !== undefined && end !== undefined)
      for (let i = Math.min(start, end); i <= Math.max(start, end); i++) ids.add(order[i]!);
  }
  return { ids: [...ids], unknown };
}

/**
 * The masks every successful prun call in `messages` still asks for. Contract: a result that is
 * already pruned, or is itself a prun result, is left alone; each id at most once.
 */
export function prunEdits(messages: readonly Message[], name: string): MessageEdit[] {
  const edits = new Map<string, MessageEdit>();
  // The first result of an id is the one a mask edit changes (a history may hold a stray duplicate).
  const results = new Map<string, ToolResultMessage>();
  for (const m of messages) if (m.role === "tool" && !results.has(m.toolCallId)) results.set(m.toolCallId, m);
  const prunIds = new Set<string>();
  for (const [i, m] of messages.entries()) {
    if (m.role !== "assistant") continue;
    for (const b of m.content) {
      if (b.type !== "tool_call" || b.name !== name) continue;
      prunIds.add(b.id);
      const done = results.get(b.id);
      const parsed = PrunArgs.safeParse(b.args);
      if (!done || done.isError || !parsed.success) continue;
      const reason = parsed.data.reason ? `: ${headOf(parsed.data.reason, 300)}` : "";
      for (const id of prunTargets(messages.slice(0, i), parsed.data).ids) {
        const r = results.get(id);
        if (!r || prunIds.has(id) || plainText(r).startsWith(PRUNED_PREFIX)) continue;
        edits.set(id, {
          op: "mask_tool_result",
          toolCallId: id,
          text: `${PRUNED_PREFIX}${reason}; ${r.toolName}, ${plainText(r).length} chars]`,
        });
      }
    }
  }
  return [...edits.values()];
}

/** The prun tool. `seen(sessionId)` is the history of the session's last request, to check ids against. */
export function prunTool(name: string, seen: (sessionId: string) => readonly Message[]): ToolDefinition {
  return defineTool({
    name,
    description:
      "Drop your own stale tool outputs from the context (by call id, or a range from one call id to another) to keep it small and focused. Each is replaced by a short note; the calls stay. Use it for outputs you will not need again.",
    input: PrunArgs,
    category: "info",
    parallel: false,
    execute: (args, tc) => {
      const history = seen(tc.sessionId);
      const { ids: named, unknown } = prunTargets(history, args);
      // Say what will really go: not the prun results themselves, nor outputs already pruned.
      const first = new Map<string, Message>();
      for (const m of history) if (m.role === "tool" && !first.has(m.toolCallId)) first.set(m.toolCallId, m);
      const ids = named.filter((id) => {
        const r = first.get(id);
        return r?.role === "tool" && r.toolName !== name && !plainText(r).startsWith(PRUNED_PREFIX);
      });
      if (unknown.length)
        return {
          content: `Error: no tool output with id ${unknown.map((u) => JSON.stringify(headOf(u, 80))).join(", ")} in this conversation; nothing was pruned. Use the ids of earlier tool calls.`,
          isError: true,
        };
      if (!ids.length)
        return {
          content: "Error: nothing there is left to prune (no tool outputs, or only pruned ones and prun results).",
          isError: true,
        };
      return `${ids.length} tool output(s) will be dropped before your next request: ${ids.slice(0, 20).join(", ")}${ids.length > 20 ? ", …" : ""}.`;
    },
  });
}
