/**
 * `keel goal "<goal>" [--turns N] [--every N] [--budget USD]`: an autonomous run (@keel/plugin-goals) on the
 * config's agent, supervised by its side model every N turns; `keel goal status` lists runs.
 * Ctrl-C stops the run after the current turn is cancelled (exit 130); SIGTERM the same (exit 143).
 */
import { join } from "node:path";
import type { Agent, Session } from "@keel/agent";
import { countOf, truncate } from "@keel/text";
import type { CliEnv } from "./stdio.ts";
import { exitNow, onSignal } from "./exit.ts";

async function plugin() {
  return import("@keel/plugin-goals");
}

export const goalCommand = {
  async run(
    agent: Agent,
    session: Session,
    goal: string,
    limits: { turns: number; every: number; budget?: number },
    io: CliEnv,
    home: string,
  ): Promise<number> {
    const { GoalStore, runGoal } = await plugin();
    const store = new GoalStore(join(home, "goals.sqlite"));
    const ctrl = new AbortController();
    // Ctrl-C or SIGTERM stops the run (the running turn is cancelled and recorded interrupted:
    // exit 130, or 143 after SIGTERM, as keel run); a second signal exits at once.
    let terminated = false;
    const offSignals = onSignal((signal) => {
      if (ctrl.signal.aborted)
        exitNow(
          signal,
          signal === "SIGTERM" ? "\nkeel: terminated; exiting now\n" : "\nkeel: interrupted twice; exiting now\n",
        );
      terminated = signal === "SIGTERM";
      io.err(terminated ? "\nkeel: terminated (SIGTERM); stopping the goal run\n" : "\nkeel: stopping the goal run\n");
      ctrl.abort();
    });
    try {
      // The supervisor is an independent call: on the side model when there is one, else the agent's model.
      const side = agent.options.sideModel;
      const supervisor = side || agent.options.provider;
      io.err(
        `keel: goal run on session ${session.id}: up to ${countOf(limits.turns, "turn")}${limits.budget !== undefined ? `, budget $${limits.budget}` : ""}, supervisor every ${limits.every}\n`,
      );
      const r = await runGoal(session, {
        goal,
        store,
        maxTurns: limits.turns,
        ...(limits.budget !== undefined ? { maxCostUsd: limits.budget } : {}),
        signal: ctrl.signal,
        supervisor: { ...(supervisor ? { model: supervisor } : {}), every: limits.every },
        onTurn: (n, t) => io.err(`keel: goal turn ${n}: ${t.verdict.status}\n`),
      });
      io.out(`\n`);
      io.err(
        `keel: goal ${r.status} (${r.reason}) · ${countOf(r.turns, "turn")} · run ${r.run.id} · session ${session.id}\n`,
      );
      return r.status === "achieved" ? 0 : ctrl.signal.aborted ? (terminated ? 143 : 130) : 1;
    } finally {
      offSignals();
      store.close();
    }
  },

  async status(io: CliEnv, home: string, json: boolean): Promise<number> {
    const { GoalStore } = await plugin();
    const store = new GoalStore(join(home, "goals.sqlite"));
    try {
      store.markOrphans();
      const runs = store.runs({ limit: 50 });
      if (json) io.out(`${JSON.stringify(runs)}\n`);
      else if (!runs.length) io.out('no goal runs yet (keel goal "…" starts one)\n');
      else
        for (const r of runs)
          io.out(
            `${r.status.padEnd(9)} ${String(r.turns).padStart(3)}/${countOf(r.maxTurns, "turn")}  ${new Date(r.startedAt).toISOString().slice(0, 16).replace("T", " ")}  ${truncate(r.goal, 60)}  (run ${r.id.slice(0, 8)}, session ${r.sessionId.slice(0, 8)})${r.reason ? `\n          ${truncate(r.reason, 160)}` : ""}\n`,
          );
      return 0;
    } finally {
      store.close();
    }
  },
};
