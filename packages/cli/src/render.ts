/** Terminal rendering of an agent's events: the answer on stdout, progress on stderr. */
import type { AgentEvent } from "@keel/kernel";
import { truncate } from "@keel/kernel";

/** Where rendering writes. */
export interface Streams {
  out: (text: string) => void;
  err: (text: string) => void;
}

/**
 * A listener that streams the answer and shows tools and slow phases.
 * Contract: with `json`, every stored event of the session is one JSON line on `out`, nothing else is.
 */
export function renderer(streams: Streams, options: { json: boolean; slowPhaseMs?: number }): { listener: (e: AgentEvent) => void; dispose(): void } {
  let slow: ReturnType<typeof setTimeout> | undefined;
  let midLine = false;
  const clear = () => {
    if (slow) clearTimeout(slow);
    slow = undefined;
  };
  const err = (line: string) => {
    if (midLine) streams.out("\n");
    midLine = false;
    streams.err(line);
  };
  const listener = (e: AgentEvent) => {
    if (options.json) {
      if ("seq" in e) streams.out(`${JSON.stringify(e)}\n`);
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
        slow = setTimeout(() => err(`  … ${e.phase}\n`), options.slowPhaseMs ?? 400);
        slow.unref?.();
        break;
      case "tool.started":
        err(`  → ${e.name} ${preview(JSON.stringify(e.args) ?? "")}\n`);
        break;
      case "tool.completed":
        err(`  ${e.status === "ok" ? "✓" : "✗"} ${e.name} ${e.status}${e.decision ? ` (${e.decision})` : ""} (${Math.round(e.durationMs)} ms)\n`);
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
        if (e.level !== "info") err(`  ${e.level}: ${e.code}${e.plugin ? ` [${e.plugin}${e.phase ? ` @ ${e.phase}` : ""}]` : ""}: ${preview(e.message)}\n`);
        break;
      default:
    }
  };
  return { listener, dispose: clear };
}

function preview(text: string, max = 160): string {
  return truncate(text, max + 1);
}
