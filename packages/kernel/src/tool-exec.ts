import { trackAbandoned } from "./abandoned.ts";
import { whenAborted } from "./abort-watch.ts";
import { errorMessage, isKeelError, KeelError } from "./errors.ts";
import type { ContentBlock, ToolResultMessage } from "./messages.ts";
import { textContent } from "./messages.ts";
import { codePointLength, isWellFormed, toWellFormed, truncate } from "./text.ts";
import { snapshot } from "./snapshot.ts";
import { faultScopesActive, inFaultScope } from "./fault-scope.ts";
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
  /** The output asked to lift its plugin's tool_visibility for the rest of the turn. */
  unhide?: boolean;
}

/** Build an error result for a call. */
export function errorResult(callId: string, toolName: string, text: string): ToolResultMessage {
  return { role: "tool", toolCallId: callId, toolName, content: textContent(text), isError: true };
}

function normalize(callId: string, toolName: string, out: ToolOutput): ToolResultMessage {
  if (typeof out === "string")
    return { role: "tool", toolCallId: callId, toolName, content: textContent(out), isError: false };
  if (out === null || typeof out !== "object" || !("content" in out)) {
    return {
      role: "tool",
      toolCallId: callId,
      toolName,
      content: textContent(out === undefined ? "" : safeJson(out)),
      isError: false,
    };
  }
  const content: ContentBlock[] =
    typeof out.content === "string"
      ? textContent(out.content)
      : Array.isArray(out.content)
        ? out.content.map(block)
        : textContent(safeJson(out.content));
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
  if (o?.type === "image" && typeof o.mediaType === "string" && typeof o.data === "string")
    return { type: "image", mediaType: o.mediaType, data: o.data };
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
export function executeTool(
  tool: ToolDefinition,
  args: unknown,
  ctx: Omit<ToolContext, "signal" | "progress">,
  timeoutMs: number,
  turnSignal: AbortSignal,
  plugin?: string,
  onProgress?: (p: { message: string; fraction?: number; elapsedMs: number }) => void,
): Promise<ToolRun> {
  const t0 = performance.now();
  const ctrl = new AbortController();
  const ms = () => Math.round((performance.now() - t0) * 1000) / 1000;
  return new Promise<ToolRun>((resolve) => {
    let done = false;
    let running: Promise<unknown> | undefined;
    let unwatch: (() => void) | undefined;
    const finish = (status: ToolRunStatus, result: ToolResultMessage, reveal?: readonly string[], unhide?: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      unwatch?.();
      resolve({ status, result, durationMs: ms(), ...(reveal ? { reveal } : {}), ...(unhide ? { unhide } : {}) });
    };
    const onAbort = () => {
      ctrl.abort(turnSignal.reason);
      if (!done) trackAbandoned(`tool ${tool.name} (call ${ctx.callId})`, running);
      const why = isKeelError(turnSignal.reason, "KEEL_GUARD_TRIPPED")
        ? "the turn's wall-time limit ran out"
        : "the turn was cancelled";
      finish("cancelled", errorResult(ctx.callId, tool.name, `Cancelled: ${why} while "${tool.name}" was running.`));
    };
    const timer = setTimeout(() => {
      const err = new KeelError("KEEL_TOOL_TIMEOUT", `"${tool.name}" ran past ${timeoutMs} ms.`, { tool: tool.name });
      ctrl.abort(err);
      if (!done) trackAbandoned(`tool ${tool.name} (call ${ctx.callId})`, running);
      finish("timeout", errorResult(ctx.callId, tool.name, `Error: ${err.message}`));
    }, timeoutMs);
    if (turnSignal.aborted) return onAbort();
    unwatch = whenAborted(turnSignal, onAbort);
    try {
      const unreadable = (err: unknown) => {
        const e = new KeelError(
          "KEEL_OUTPUT_UNREADABLE",
          `"${tool.name}" returned a result that cannot be read: ${errorMessage(err)}.`,
          { tool: tool.name },
        );
        finish("error", errorResult(ctx.callId, tool.name, `Error: ${e.message}`));
      };
      const settle = (raw: unknown) => settleOutput(ctx.callId, tool.name, raw, finish, unreadable);
      const progress = progressReporter(onProgress, t0, () => done);
      const run = () =>
        tool.execute(args, { ...ctx, signal: ctrl.signal, progress, child: (o) => ctx.child(o, ctrl.signal) });
      const raw: unknown = faultScopesActive()
        ? inFaultScope(() => ({ tool: tool.name, ...(plugin ? { plugin } : {}) }), run)
        : run();
      let then: unknown;
      try {
        then =
          raw !== null && (typeof raw === "object" || typeof raw === "function")
            ? (raw as { then?: unknown }).then
            : undefined;
      } catch (err) {
        return unreadable(err);
      }
      if (typeof then !== "function") return settle(raw);
      running = new Promise<unknown>((res, rej) =>
        (then as (a: (v: unknown) => void, b: (e: unknown) => void) => void).call(raw, res, rej),
      ).then(settle, (err) => finish("error", errorResult(ctx.callId, tool.name, `Error: ${errorMessage(err)}`)));
    } catch (err) {
      finish("error", errorResult(ctx.callId, tool.name, `Error: ${errorMessage(err)}`));
    }
  });
}

/** Read a tool's output once, inside a guard, into plain data (getters, Proxies, toJSON), and finish the call with it. */
function settleOutput(
  callId: string,
  name: string,
  raw: unknown,
  finish: (status: ToolRunStatus, result: ToolResultMessage, reveal?: readonly string[], unhide?: boolean) => void,
  unreadable: (err: unknown) => void,
): void {
  let out: ToolOutput;
  try {
    out = snapshot(raw) as ToolOutput;
  } catch (err) {
    return unreadable(err);
  }
  const result = normalize(callId, name, out);
  const unhide =
    !result.isError && typeof out === "object" && out !== null && (out as { unhide?: unknown }).unhide === true;
  finish(result.isError ? "error" : "ok", result, revealOf(out), unhide);
}

/** A tool's `progress(message, fraction)`: read inside a guard, cut, and dropped once the call is over. */
function progressReporter(
  onProgress: ((p: { message: string; fraction?: number; elapsedMs: number }) => void) | undefined,
  t0: number,
  over: () => boolean,
): (message: unknown, fraction?: unknown) => void {
  return (message, fraction) => {
    if (over() || !onProgress) return;
    try {
      const f = typeof fraction === "number" && fraction >= 0 && fraction <= 1 ? fraction : undefined;
      onProgress({
        message: truncate(toWellFormed(typeof message === "string" ? message : String(message)), 200),
        ...(f !== undefined ? { fraction: f } : {}),
        elapsedMs: Math.round(performance.now() - t0),
      });
    } catch {
      // A message whose toString throws is dropped: progress never fails the tool.
    }
  };
}

/** `result` with the images past `maxBytes` (in all) replaced by a note; itself when all fit. */
function boundImages(result: ToolResultMessage, maxBytes: number): ToolResultMessage {
  let used = 0;
  let dropped = false;
  const content = result.content.map((b) => {
    if (b.type !== "image") return b;
    // (files are user input only: normalizeBlock never lets a tool return one)
    const size = typeof b.data === "string" ? b.data.length : 0;
    if (used + size <= maxBytes) {
      used += size;
      return b;
    }
    dropped = true;
    return {
      type: "text" as const,
      text: `[an image (${b.mediaType}, ${size} bytes) was dropped from this tool result: its images may hold ${maxBytes} bytes in all (limits.maxToolResultImageBytes)]`,
    };
  });
  return dropped ? { ...result, content } : result;
}

/**
 * A tool result as it may enter history: every text well-formed (lone surrogates become
 * U+FFFD) and at most `maxChars` code points of text in all, keeping about 3/4 head and 1/4
 * tail around a marker that says how much was cut and which limit cut it.
 * Images are kept in order while their data (base64, as sent) fits `maxImageBytes` in all;
 * each one past it becomes a text note saying what was dropped and which limit dropped it.
 * Contract: returns `result` itself when nothing changes; a cut result's text blocks are
 * joined into one.
 */
export function boundResult(
  result: ToolResultMessage,
  maxChars: number,
  maxImageBytes = Number.POSITIVE_INFINITY,
): ToolResultMessage {
  result = boundImages(result, maxImageBytes);
  let units = 0;
  let repaired = false;
  for (const b of result.content) {
    if (b.type !== "text") continue;
    units += b.text.length;
    if (!isWellFormed(b.text)) repaired = true;
  }
  if (units <= maxChars && !repaired) return result;
  const texts = result.content.filter((b) => b.type === "text").map((b) => b.text);
  const total = texts.reduce((n, t) => n + codePointLength(t), 0) + Math.max(0, texts.length - 1);
  if (total <= maxChars)
    return {
      ...result,
      content: result.content.map((b) => (b.type === "text" ? { type: "text", text: toWellFormed(b.text) } : b)),
    };
  const marker = (n: number) =>
    `\n[… ${n} characters cut from this tool result (limits.maxToolResultChars is ${maxChars}) …]\n`;
  const text = truncate(texts.join("\n"), maxChars, { marker, tail: Math.floor(maxChars / 4), graphemes: true });
  const images = result.content.filter((b) => b.type !== "text");
  return { ...result, content: [{ type: "text", text }, ...images] };
}
