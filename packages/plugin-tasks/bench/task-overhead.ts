/**
 * What delegating costs: a turn whose one tool call is a plain tool, against the same turn whose
 * call is a task (a child session created, logged and run for one scripted answer). Reports the
 * time from the tool call starting to the child's first model request, and whole turns, both
 * interleaved in this one run, in-memory and SQLite stores. Run with `pnpm bench tasks`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAgent, defineTool } from "@keel/agent";
import { MemorySessionStore, ScriptedProvider } from "@keel/testkit";
import { SqliteSessionStore } from "@keel/store-sqlite";
import type { ModelProvider, ModelRequest, SessionStore } from "@keel/kernel";
import type { ProviderScript } from "@keel/testkit";
import { tasks } from "../src/index.ts";

const TURNS = Number(process.env.BENCH_TURNS ?? 400);
const WARMUP = 50;

/** A scripted model that notes when each request arrives. */
function timed(steps: ProviderScript["steps"], arrivals: number[]): ModelProvider {
  const inner = new ScriptedProvider({ steps });
  return {
    id: inner.id,
    stream: (req: ModelRequest, o: { signal: AbortSignal }) => (arrivals.push(performance.now()), inner.stream(req, o)),
  };
}

async function variant(kind: "plain" | "task", store: SessionStore) {
  const n = TURNS + WARMUP;
  const childArrivals: number[] = [];
  const callStarts: number[] = [];
  const lookup = defineTool({
    name: "lookup",
    description: "Looks up.",
    execute: () => (callStarts.push(performance.now()), "42"),
  });
  const parentSteps = Array.from({ length: 2 * n }, (_, i) =>
    i % 2 === 0
      ? {
          toolCalls: [
            kind === "plain"
              ? { name: "lookup", args: {} }
              : { name: "task", args: { profile: "helper", prompt: "answer" } },
          ],
        }
      : { text: "done" },
  );
  const child = timed(
    Array.from({ length: n }, () => ({ text: "42" })),
    childArrivals,
  );
  const plugins = kind === "task" ? [tasks({ profiles: { helper: { description: "Helps.", model: child } } })] : [];
  const agent = await createAgent({
    provider: new ScriptedProvider({ steps: parentSteps }),
    sideModel: false,
    store,
    tools: kind === "plain" ? [lookup] : [],
    plugins,
  });
  // The task's start: when the task tool's execute begins (the kernel calls it right after tool.started).
  const starts: number[] = [];
  agent.subscribe((e) => e.type === "tool.started" && starts.push(performance.now()));
  return { kind, agent, session: await agent.session(), starts, childArrivals, callStarts, turns: [] as number[] };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const dir = mkdtempSync(join(tmpdir(), "keel-task-bench-"));
for (const backend of ["memory", "sqlite"] as const) {
  const store = (name: string): SessionStore =>
    backend === "memory" ? new MemorySessionStore() : new SqliteSessionStore({ path: join(dir, `${name}.sqlite`) });
  const plain = await variant("plain", store("plain"));
  const task = await variant("task", store("task"));
  for (let i = 0; i < TURNS + WARMUP; i++) {
    for (const v of [plain, task]) {
      const t0 = performance.now();
      await v.session.run("go");
      if (i >= WARMUP) v.turns.push(performance.now() - t0);
    }
  }
  const toWork = (v: typeof plain, ends: number[]) => v.starts.slice(WARMUP).map((s, i) => ends[WARMUP + i]! - s);
  const plainStart = median(toWork(plain, plain.callStarts));
  const taskStart = median(toWork(task, task.childArrivals));
  console.log(`${backend} store, ${TURNS} turns each, interleaved (median ms):`);
  console.log(
    `  tool.started → work begins: plain tool ${plainStart.toFixed(3)}, task (child session to its first request) ${taskStart.toFixed(3)}: ${(taskStart / plainStart).toFixed(1)}x`,
  );
  console.log(
    `  whole turn: plain ${median(plain.turns).toFixed(3)}, task ${median(task.turns).toFixed(3)}: ${(median(task.turns) / median(plain.turns)).toFixed(2)}x`,
  );
  await plain.agent.close();
  await task.agent.close();
  if (backend === "sqlite") for (const s of [plain, task]) await s.agent.store.close();
}
rmSync(dir, { recursive: true, force: true });
