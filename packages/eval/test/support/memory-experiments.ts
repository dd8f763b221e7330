/**
 * A small in-memory ExperimentStore for the runner's tests (the real stores are
 * @keel/eval's `memoryExperimentStore`, SQLite and PostgreSQL ones, tested on their own).
 */
import type { CaseResult, ExperimentRecord, ExperimentStore, ExperimentSummary } from "../../src/types.ts";

export interface TestExperimentStore extends ExperimentStore {
  experiments: Map<string, ExperimentRecord>;
  results: Map<string, Map<string, CaseResult>>;
  puts: number;
}

export function testExperimentStore(): TestExperimentStore {
  const experiments = new Map<string, ExperimentRecord>();
  const results = new Map<string, Map<string, CaseResult>>();
  const copy = <T>(v: T): T => structuredClone(v);
  const store: TestExperimentStore = {
    experiments,
    results,
    puts: 0,
    async create(e) {
      experiments.set(e.id, copy(e));
    },
    async finish(id: string, status: "completed" | "failed", summary: ExperimentSummary, endedAt: number) {
      const e = experiments.get(id);
      if (e) experiments.set(id, { ...e, status, summary: copy(summary), endedAt });
    },
    async putCase(r) {
      store.puts++;
      if (!results.has(r.experimentId)) results.set(r.experimentId, new Map());
      results.get(r.experimentId)!.set(r.caseId, copy(r));
    },
    async get(id) {
      return experiments.has(id) ? copy(experiments.get(id)!) : undefined;
    },
    async list(options = {}) {
      return [...experiments.values()]
        .filter((e) => !options.agent || e.agent === options.agent)
        .sort((a, b) => b.startedAt - a.startedAt)
        .slice(0, options.limit ?? 100)
        .map(copy);
    },
    async cases(id) {
      return [...(results.get(id)?.values() ?? [])].sort((a, b) => a.index - b.index).map(copy);
    },
    async close() {},
  };
  return store;
}
