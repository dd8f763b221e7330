/**
 * Converters from the shared trajectory formats (SWE-agent `.traj`, mini-swe-agent
 * `.traj.json`, tau-bench runs) to replayable turns: a user input, then model steps, each
 * with its text, its tool calls and the recorded output of every call.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export interface Step {
  text: string;
  /** `id` is unique in the trajectory (recorded ids repeat in some runs); `orig` is the recorded one. */
  calls: Array<{ id: string; orig?: string; name: string; args: Record<string, unknown>; output: string | undefined }>;
}
export interface Turn {
  input: string;
  steps: Step[];
}
export interface Trajectory {
  source: "swe-agent" | "mini-swe-agent" | "tau-bench";
  name: string;
  system: string;
  turns: Turn[];
}

type Raw = {
  role: string;
  content?: unknown;
  tool_calls?: Array<{ id?: string; function: { name: string; arguments: string } }>;
  tool_call_ids?: string[];
  tool_call_id?: string;
  action?: string;
  is_demo?: boolean;
};

function text(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content.map((c) => (typeof c === "string" ? c : typeof c?.text === "string" ? c.text : "")).join("\n");
  return content == null ? "" : JSON.stringify(content);
}

function parseArgs(s: string): Record<string, unknown> {
  try {
    const v = JSON.parse(s);
    return v && typeof v === "object" && !Array.isArray(v) ? v : { value: v };
  } catch {
    return { raw: s };
  }
}

const BASH_BLOCK = /```(?:bash|sh)?\s*\n([\s\S]*?)```/;

/**
 * Generic conversion of a role-tagged message list. An assistant message's action is its
 * `tool_calls`, else its `action` field, else (mini-swe-agent) its ```bash block; the
 * following tool/user messages are the outputs; a user message after an assistant message
 * without an action starts a new turn.
 */
function fromMessages(
  source: Trajectory["source"],
  name: string,
  messages: Raw[],
  actionOf: (m: Raw) => string | undefined,
): Trajectory {
  const system = messages
    .filter((m) => m.role === "system")
    .map((m) => text(m.content))
    .join("\n\n");
  const rest = messages.filter((m) => m.role !== "system");
  const turns: Turn[] = [];
  let turn: Turn | undefined;
  let open: Step | undefined;
  let n = 0;
  for (const m of rest) {
    if (m.role === "assistant") {
      if (!turn) turns.push((turn = { input: "(start)", steps: [] }));
      const calls: Step["calls"] = m.tool_calls?.length
        ? m.tool_calls.map((c) => ({
            id: `t${n++}`,
            ...(c.id ? { orig: c.id } : {}),
            name: sanitize(c.function.name),
            args: parseArgs(c.function.arguments),
            output: undefined,
          }))
        : (() => {
            const action = actionOf(m);
            return action ? [{ id: `t${n++}`, name: "bash", args: { command: action }, output: undefined }] : [];
          })();
      // A text-format action is sent once, as the tool call, not also inside the text.
      const body = text(m.content);
      const step: Step = {
        text: m.tool_calls?.length || !calls.length ? body : stripAction(body, String(calls[0]!.args.command)),
        calls,
      };
      const prev = turn.steps.at(-1);
      if (prev && prev.calls.length === 0) {
        // A reply without calls ends a turn: a second assistant message right after it joins it.
        prev.text = `${prev.text}\n\n${step.text}`.trim();
        prev.calls = calls;
        open = calls.length ? prev : undefined;
        continue;
      }
      turn.steps.push(step);
      open = calls.length ? step : undefined;
      continue;
    }
    const body = text(m.content);
    if (open && (m.role === "tool" || m.role === "user")) {
      const ids = m.tool_call_ids ?? (m.tool_call_id ? [m.tool_call_id] : undefined);
      const target =
        (ids && open.calls.find((c) => c.orig !== undefined && ids.includes(c.orig) && c.output === undefined)) ??
        open.calls.find((c) => c.output === undefined);
      if (target) {
        target.output = body;
        if (open.calls.every((c) => c.output !== undefined)) open = undefined;
        continue;
      }
    }
    if (m.role === "tool") continue; // an output without a call: nothing to replay
    open = undefined;
    if (turn && turn.steps.length === 0) turn.input += `\n\n${body}`;
    else turns.push((turn = { input: body, steps: [] }));
  }
  return { source, name, system, turns: turns.filter((t) => t.steps.length > 0) };
}

function stripAction(body: string, action: string): string {
  const fenced = /```[a-z]*\s*\n?([\s\S]*?)```/g;
  let out = body;
  for (const m of body.matchAll(fenced)) if (m[1]!.trim() === action.trim()) out = out.replace(m[0], "").trim();
  return out;
}

function sanitize(name: string): string {
  return name.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64) || "tool";
}

/** SWE-agent `.traj` files (their `history`, demonstrations left out). */
export function loadSweAgent(dir: string): Trajectory[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".traj"))
    .sort()
    .map((f) => {
      const j = JSON.parse(readFileSync(join(dir, f), "utf8")) as { history?: Raw[] };
      return fromMessages(
        "swe-agent",
        f,
        (j.history ?? []).filter((m) => !m.is_demo),
        (m) => (typeof m.action === "string" && m.action.trim() ? m.action.trim() : undefined),
      );
    })
    .filter((t) => t.turns.length > 0);
}

/** mini-swe-agent `.traj.json` files: actions are ```bash blocks in the assistant's text. */
export function loadMiniSweAgent(dir: string): Trajectory[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".traj.json"))
    .sort()
    .map((f) => {
      const j = JSON.parse(readFileSync(join(dir, f), "utf8")) as { messages: Raw[] };
      return fromMessages(
        "mini-swe-agent",
        f,
        j.messages,
        (m) => BASH_BLOCK.exec(text(m.content))?.[1]?.trim() || undefined,
      );
    })
    .filter((t) => t.turns.length > 0);
}

/** tau-bench airline runs (OpenAI chat messages). `trials` limits which trials are kept. */
export function loadTauBench(file: string, trials: readonly number[]): Trajectory[] {
  const runs = JSON.parse(readFileSync(file, "utf8")) as Array<{ task_id: number; trial: number; traj: Raw[] }>;
  return runs
    .filter((r) => trials.includes(r.trial))
    .map((r) => fromMessages("tau-bench", `task ${r.task_id} trial ${r.trial}`, r.traj, () => undefined))
    .filter((t) => t.turns.length > 0);
}
