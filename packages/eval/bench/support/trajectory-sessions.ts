/**
 * The shared trajectories (SWE-agent, mini-swe-agent, tau-bench) as Keel sessions: each is
 * recorded in a real SQLite file of its own home by an agent whose model is the trajectory's
 * steps and whose tools return the recorded outputs, then replayed with the same plugins.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAgent, defineTool } from "@keel/agent";
import type { KeelEvent, KeelPlugin } from "@keel/kernel";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { scriptedProvider } from "@keel/testkit";
import type { ScriptStep } from "@keel/testkit";
import type { Trajectory } from "../../../plugin-compaction/bench/support/convert.ts";
import { loadMiniSweAgent, loadSweAgent, loadTauBench } from "../../../plugin-compaction/bench/support/convert.ts";
import { replaySession } from "../../src/index.ts";
import type { ReplayReport } from "../../src/index.ts";

export type { Trajectory };

/** Every shared trajectory (tau-bench: all four trials). */
export function allTrajectories(data: string): Trajectory[] {
  return [
    ...loadSweAgent(join(data, "trajectories", "swe-agent")),
    ...loadMiniSweAgent(join(data, "trajectories", "mini-swe-agent")),
    ...loadTauBench(join(data, "trajectories", "tau-bench", "gpt-4o-airline.json"), [0, 1, 2, 3]),
  ];
}

const LIMITS = { maxRounds: 10_000, maxToolCalls: 100_000, tokenBudget: 1e12, wallTimeMs: 600_000 };

/** The model's steps, turn by turn: a turn whose last step still calls tools gets a closing answer. */
function script(t: Trajectory): ScriptStep[] {
  return t.turns.flatMap((turn) => {
    const steps: ScriptStep[] = turn.steps.map((s) => ({
      ...(s.text ? { text: s.text } : {}),
      ...(s.calls.length ? { toolCalls: s.calls.map((c) => ({ id: c.id, name: c.name, args: c.args })) } : {}),
      usage: { inputTokens: 100, outputTokens: 20 },
    }));
    if (!steps.length || steps.at(-1)!.toolCalls) steps.push({ text: "(end of the recorded turn)" });
    return steps;
  });
}

function recordedTools(t: Trajectory) {
  const outputs = new Map<string, string>();
  const names = new Set<string>();
  for (const turn of t.turns)
    for (const s of turn.steps)
      for (const c of s.calls) {
        outputs.set(c.id, c.output ?? "");
        names.add(c.name);
      }
  return [...names].map((name) =>
    defineTool({
      name,
      description: `The trajectory's ${name} tool: returns what it returned when recorded.`,
      execute: (_args, ctx) => outputs.get(ctx.callId) ?? "",
    }),
  );
}

/** A scratch home per trajectory: the recording and the replay each start with empty plugin files. */
export function scratchHome(): { home: string; drop(): void } {
  const home = mkdtempSync(join(tmpdir(), "keel-traj-"));
  return { home, drop: () => rmSync(home, { recursive: true, force: true }) };
}

/**
 * Record one trajectory as a session in `<home>/sessions.sqlite` and read its log back.
 * Contract: `plugins` builds fresh plugin instances (called once per agent).
 */
export async function recordTrajectory(t: Trajectory, plugins: () => KeelPlugin[], home: string): Promise<KeelEvent[]> {
  const path = join(home, "sessions.sqlite");
  const agent = await createAgent({
    name: "trajectories",
    provider: scriptedProvider(script(t)),
    // As keel run offline: the script answers the conversation only; plugins use their fallbacks.
    sideModel: false,
    store: new SqliteSessionStore({ path }),
    home,
    ...(t.system ? { instructions: t.system } : {}),
    tools: recordedTools(t),
    plugins: plugins(),
    limits: LIMITS,
  });
  let id = "";
  try {
    const session = await agent.session();
    id = session.id;
    for (const turn of t.turns) await session.run(turn.input);
  } finally {
    await agent.close();
  }
  const store = new SqliteSessionStore({ path, readOnly: true });
  try {
    return await store.events(id);
  } finally {
    store.close();
  }
}

/** Replay a recorded trajectory session with fresh plugins in its own scratch home. */
export async function replayTrajectory(
  t: Trajectory,
  events: KeelEvent[],
  plugins: () => KeelPlugin[],
  home: string,
): Promise<ReplayReport> {
  return replaySession({
    events,
    build: (rig) =>
      createAgent({
        name: "trajectories",
        provider: rig.provider,
        sideModel: rig.sideModel,
        store: rig.store,
        home,
        ...(t.system ? { instructions: t.system } : {}),
        tools: recordedTools({
          ...t,
          turns: t.turns.map((x) => ({
            ...x,
            steps: x.steps.map((s) => ({
              ...s,
              calls: s.calls.map((c) => ({ ...c, output: "(not run in a replay)" })),
            })),
          })),
        }),
        plugins: [...plugins(), ...rig.plugins],
        approve: rig.approve,
        limits: LIMITS,
      }),
  });
}
