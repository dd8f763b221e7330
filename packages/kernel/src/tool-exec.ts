import { errorMessage, KeelError } from "./errors.ts";
import type { ContentBlock, ToolResultMessage } from "./messages.ts";
import { textContent } from "./messages.ts";
import { snapshot } from "./snapshot.ts";
import { faultScope } from "./faults.ts";
import type { ToolContext, ToolDefinition, ToolOutput } from "./tools.ts";

/** How a tool call ended. */
export type ToolRunStatus = "ok" | "error" | "timeout" | "cancelled";

/** A finished tool run. Contract: `result` is always set, also on timeout or cancellation. */
export interface ToolRun {
  status: ToolRunStatus;
  result: ToolResultMessage;
  durationMs: number;
  /** Hidden tools the output asked to reveal. */
  reveal?: readonly string[];
}

/** Build an error result for a call. */
export function errorResult(callId: string, toolName: string, text: string): ToolResultMessage {
  return { role: "tool", toolCallId: callId, toolName, content: textContent(text), isError: true };
}

function normalize(callId: string, toolName: string, out: ToolOutput): ToolResultMessage {
  if (typeof out === "string") return { role: "tool", toolCallId: callId, toolName, content: textContent(out), isError: false };
  if (out === null || typeof out !== "object" || !("content" in out)) {
    return { role: "tool", toolCallId: callId, toolName, content: textContent(out === undefined ? "" : safeJson(out)), isError: false };
  }
  const content: ContentBlock[] = typeof out.content === "string" ? textContent(out.content) : Array.isArray(out.content) ? out.content.map(block) : textContent(safeJson(out.content));
  return { role: "tool", toolCallId: callId, toolName, content, isError: out.isError === true };
}

function revealOf(out: ToolOutput): readonly string[] | undefined {
  const r = typeof out === "object" && out !== null ? (out as { reveal?: unknown }).reveal : undefined;
  return Array.isArray(r) ? r.filter((n): n is string => typeof n === "string") : undefined;
}

/** A content block as given, or, when it is not a valid text or image block, its JSON as text. */
function block(b: unknown): ContentBlock {
  const o = b as Partial<ContentBlock> | null;
  if (o?.type === "text" && typeof o.text === "string") return { type: "text", text: o.text };
  if (o?.type === "image" && typeof o.mediaType === "string" && typeof o.data === "string") return { type: "image", mediaType: o.mediaType, data: o.data };
  return { type: "text", text: safeJson(b) };
}

function safeJson(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/**
 * Run one tool call under its timeout and the turn's signal.
 * Contract: never throws and never waits past the timeout or the abort, even when the tool
 * ignores its signal.
 */
export function executeTool(tool: ToolDefinition, args: unknown, ctx: Omit<ToolContext, "signal">, timeoutMs: number, turnSignal: AbortSignal, plugin?: string): Promise<ToolRun> {
  const t0 = performance.now();
  const ctrl = new AbortController();
  const ms = () => Math.round((performance.now() - t0) * 1000) / 1000;
  return new Promise<ToolRun>((resolve) => {
    let done = false;
    const finish = (status: ToolRunStatus, result: ToolResultMessage, reveal?: readonly string[]) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      turnSignal.removeEventListener("abort", onAbort);
      resolve({ status, result, durationMs: ms(), ...(reveal ? { reveal } : {}) });
    };
    const onAbort = () => {
      ctrl.abort(turnSignal.reason);
      finish("cancelled", errorResult(ctx.callId, tool.name, `Cancelled: the turn was cancelled while "${tool.name}" was running.`));
    };
    const timer = setTimeout(() => {
      const err = new KeelError("KEEL_TOOL_TIMEOUT", `"${tool.name}" ran past ${timeoutMs} ms.`, { tool: tool.name });
      ctrl.abort(err);
      finish("timeout", errorResult(ctx.callId, tool.name, `Error: ${err.message}`));
    }, timeoutMs);
    if (turnSignal.aborted) return onAbort();
    turnSignal.addEventListener("abort", onAbort, { once: true });
    try {
      const unreadable = (err: unknown) => {
        const e = new KeelError("KEEL_OUTPUT_UNREADABLE", `"${tool.name}" returned a result that cannot be read: ${errorMessage(err)}.`, { tool: tool.name });
        finish("error", errorResult(ctx.callId, tool.name, `Error: ${e.message}`));
      };
      const settle = (raw: unknown) => {
        // The tool's output is read once, inside a guard, into plain data (getters, Proxies, toJSON).
        let out: ToolOutput;
        try {
          out = snapshot(raw) as ToolOutput;
        } catch (err) {
          return unreadable(err);
        }
        const result = normalize(ctx.callId, tool.name, out);
        finish(result.isError ? "error" : "ok", result, revealOf(out));
      };
      const raw: unknown = faultScope.run({ tool: tool.name, ...(plugin ? { plugin } : {}) }, () => tool.execute(args, { ...ctx, signal: ctrl.signal }));
      let then: unknown;
      try {
        then = raw !== null && (typeof raw === "object" || typeof raw === "function") ? (raw as { then?: unknown }).then : undefined;
      } catch (err) {
        return unreadable(err);
      }
      if (typeof then !== "function") return settle(raw);
      new Promise<unknown>((res, rej) => (then as (a: (v: unknown) => void, b: (e: unknown) => void) => void).call(raw, res, rej)).then(settle, (err) => finish("error", errorResult(ctx.callId, tool.name, `Error: ${errorMessage(err)}`)));
    } catch (err) {
      finish("error", errorResult(ctx.callId, tool.name, `Error: ${errorMessage(err)}`));
    }
  });
}
