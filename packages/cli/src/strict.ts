/** Strict mode for plugin CI: every warning or error a plugin caused during the command fails it. */
import type { Agent, AgentEvent } from "@keel/agent";
import { KeelError } from "@keel/kernel";
import { countOf } from "@keel/text";

/** Is strict mode on: `--strict`, or KEEL_STRICT set to 1/true/yes. Contract: anything else is off. */
export function strictFromEnv(flag: boolean | undefined, env: NodeJS.ProcessEnv): boolean {
  return flag === true || /^(1|true|yes|on)$/i.test(env.KEEL_STRICT?.trim() ?? "");
}

/**
 * Collect warn- and error-level diagnostics from the agent's live events (rejected
 * contributions, handlers that threw or timed out, plugins' own warnings).
 * Contract: `failure()` is undefined when none was seen, else a KEEL_STRICT_FAILED listing each.
 */
export function strictCollector(agent: Agent): { failure(): KeelError | undefined; dispose(): void } {
  const problems: string[] = [];
  const off = agent.subscribe((e: AgentEvent) => {
    if (e.type !== "diagnostic" || e.level === "info") return;
    // A kernel diagnostic's message already starts with its code, plugin and phase.
    problems.push(
      e.message.startsWith(e.code)
        ? e.message
        : `${e.code}${e.plugin ? ` [${e.plugin}${e.phase ? ` @ ${e.phase}` : ""}]` : ""}: ${e.message}`,
    );
  });
  return {
    failure: () =>
      problems.length
        ? new KeelError(
            "KEEL_STRICT_FAILED",
            `${countOf(problems.length, "plugin problem")} during the command:\n${problems.map((p, i) => `${i + 1}. ${p}`).join("\n")}`,
          )
        : undefined,
    dispose: off,
  };
}
