/** Terminal rendering of an agent's events: the answer on stdout, progress on stderr. */
import type { AgentEvent } from "@keel/kernel";
import { truncate } from "@keel/text";

/** What the slow-phase line says about a phase: when it runs, and which plugins subscribe to it. */
export interface PhaseInfo {
  runs: string;
  plugins: string[];
}

/** Where rendering writes. */
export interface Streams {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** A running tool call is said to be still running every this many ms without progress. */
const STILL_RUNNING_MS = 5_000;

/**
 * A listener that streams the answer and shows tools (with progress, and elapsed time on long
 * calls), approvals and slow phases.
 * Contract: with `json`, every stored event of the session is one JSON line on `out` (it has a
 * `seq`), and so are the live events `model.delta` (text and thinking channels) and
 * `tool.progress` (no `seq`), so a pipe can render the answer as it streams; nothing else is.
 */
export function renderer(
  streams: Streams,
  options: {
    json: boolean;
    slowPhaseMs?: number;
    phaseInfo?: (phase: string) => PhaseInfo | undefined;
    columns?: number;
  },
): { listener: (e: AgentEvent) => void; dispose(): void } {
  let slow: ReturnType<typeof setTimeout> | undefined;
  /** The phase a slow line was shown for: its end says how long it took. */
  let shownSlow: string | undefined;
  let midLine = false;
  const clear = () => {
    if (slow) clearTimeout(slow);
    slow = undefined;
  };
  /** Tool calls running now: when they started and when a line last spoke of them. */
  const running = new Map<string, { name: string; t0: number; said: number }>();
  let ticker: ReturnType<typeof setInterval> | undefined;
  const tick = () => {
    const now = Date.now();
    for (const r of running.values()) {
      if (now - r.said < STILL_RUNNING_MS) continue;
      r.said = now;
      err(`  … ${r.name} still running (${seconds(now - r.t0)})\n`);
    }
  };
  const err = (line: string) => {
    if (midLine) streams.out("\n");
    midLine = false;
    streams.err(line);
  };
  const listener = (e: AgentEvent) => {
    if (options.json) {
      if ("seq" in e || e.type === "tool.progress" || (e.type === "model.delta" && e.channel !== "tool_args"))
        streams.out(`${JSON.stringify(e)}\n`);
      return;
    }
    clear();
    switch (e.type) {
      case "model.delta":
        if (e.channel === "text") {
          streams.out(e.text);
          midLine = !e.text.endsWith("\n");
        }
        break;
      case "phase.started":
        slow = setTimeout(() => {
          shownSlow = e.phase;
          err(slowLine(e.phase, options.slowPhaseMs ?? 400, options.phaseInfo?.(e.phase)));
        }, options.slowPhaseMs ?? 400);
        slow.unref?.();
        break;
      case "phase.completed":
        if (e.phase === shownSlow) {
          shownSlow = undefined;
          const slowest = [...e.handlers]
            .filter((h) => h.durationMs >= 1)
            .sort((a, b) => b.durationMs - a.durationMs)
            .slice(0, 3);
          err(
            `  … ${e.phase} took ${Math.round(e.durationMs)} ms${slowest.length ? ` (${slowest.map((h) => `${h.plugin} ${Math.round(h.durationMs)} ms`).join(", ")})` : ""}\n`,
          );
        }
        break;
      case "tool.started":
        err(`  → ${e.name} ${preview(JSON.stringify(e.args) ?? "")}\n`);
        running.set(e.callId, { name: e.name, t0: Date.now(), said: Date.now() });
        ticker ??= setInterval(tick, 1_000);
        ticker.unref?.();
        break;
      case "tool.progress": {
        const r = running.get(e.callId);
        if (r) r.said = Date.now();
        err(
          `  … ${e.name}: ${preview(e.message, 200)}${e.fraction !== undefined ? ` (${Math.round(e.fraction * 100)}%)` : ""} · ${seconds(e.elapsedMs)}\n`,
        );
        break;
      }
      case "tool.completed":
        running.delete(e.callId);
        if (!running.size && ticker) {
          clearInterval(ticker);
          ticker = undefined;
        }
        err(
          `  ${e.status === "ok" ? "✓" : "✗"} ${e.name} ${e.status}${e.decision ? ` (${e.decision})` : ""} (${e.durationMs >= 10_000 ? seconds(e.durationMs) : `${Math.round(e.durationMs)} ms`})\n`,
        );
        break;
      case "approval.requested":
        err(
          `  ? ${e.name}${e.via ? ` (subagent ${e.via.child})` : ""} needs approval${e.plugin ? ` (${e.plugin}${e.reason ? `: ${preview(e.reason, 200)}` : ""})` : e.reason ? ` (${preview(e.reason, 200)})` : ""}\n`,
        );
        break;
      case "approval.resolved":
        if (e.by === "always") err(`  ✓ ${e.name} allowed (always, in this session)\n`);
        else if (e.by === "callback")
          err(
            `  ${e.approved ? "✓" : "✗"} ${e.name} ${e.approved ? "approved" : "not approved"}${e.reason ? `: ${preview(e.reason, 200)}` : ""}\n`,
          );
        break;
      case "model.notice":
        err(`  ! ${e.message}\n`);
        break;
      case "model.failed":
        err(`  ✗ model: ${e.errorClass}: ${preview(e.message)}\n`);
        break;
      case "turn.failed":
        if (e.verdict.status === "failed") err(`  ✗ ${preview(e.verdict.message, 600)}\n`);
        break;
      case "guard.tripped":
        err(`  ! guard ${e.guard} tripped (${e.value} of ${e.limit})\n`);
        break;
      case "diagnostic":
        // A kernel diagnostic's message already starts with its code, plugin and phase.
        if (e.level !== "info")
          err(
            wrap(
              `${e.level}: ${e.message.startsWith(e.code) ? "" : `${e.code}${e.plugin ? ` [${e.plugin}${e.phase ? ` @ ${e.phase}` : ""}]` : ""}: `}${truncate(e.message, DIAGNOSTIC_MAX)}`,
              options.columns ?? 100,
            ),
          );
        break;
      default:
    }
  };
  return {
    listener,
    dispose: () => {
      clear();
      if (ticker) clearInterval(ticker);
      ticker = undefined;
    },
  };
}

/** `1.2 s`, `75 s`. */
function seconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

/** `  … session.start is still running after 400 ms: it runs once, when …; plugins in it: a, b`. */
function slowLine(phase: string, afterMs: number, info: PhaseInfo | undefined): string {
  if (!info) return `  … ${phase} is still running after ${afterMs} ms\n`;
  const plugins = info.plugins.length ? `; plugins working in it: ${info.plugins.join(", ")}` : "";
  return `  … phase ${phase} is still running after ${afterMs} ms (it runs ${info.runs}${plugins})\n`;
}

/** Width for wrapped diagnostics: the terminal's on a TTY, else 100. Contract: at least 40. */
export function terminalColumns(): number {
  return Math.max(40, process.stderr.isTTY ? process.stderr.columns || 100 : 100);
}

/** A diagnostic is shown whole (wrapped); only an absurd one is cut, and says so. */
const DIAGNOSTIC_MAX = 4_000;

/**
 * `text` as lines of at most `columns` code points (at least 40), broken at spaces where it can,
 * the first indented by two spaces and the rest by four. Contract: no text is dropped; ends with a newline.
 */
export function wrap(text: string, columns: number): string {
  const width = Math.max(40, columns);
  const out: string[] = [];
  const room = () => width - (out.length ? 4 : 2);
  for (const paragraph of text.split("\n")) {
    let line: string[] = [];
    for (const word of paragraph.split(" ")) {
      const w = [...word];
      if (line.length && line.length + 1 + w.length > room()) {
        out.push(line.join(""));
        line = [];
      }
      if (line.length) line.push(" ");
      line.push(...w);
      while (line.length > room()) {
        const r = room();
        out.push(line.slice(0, r).join(""));
        line = line.slice(r);
      }
    }
    out.push(line.join(""));
  }
  return `${out.map((l, i) => `${i ? "    " : "  "}${l}`).join("\n")}\n`;
}

function preview(text: string, max = 160): string {
  return truncate(text, max + 1);
}
