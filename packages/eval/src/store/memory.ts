/** Experiments in this process's memory: for embedding, tests and runs that keep nothing. */
import { KeelError } from "@keel/kernel";
import type { CaseResult, ExperimentRecord, ExperimentStore, ExperimentSummary } from "../types.ts";
import { closedStore, listLimit, unknownExperiment } from "./rows.ts";

const WHERE = "memory";

/**
 * An ExperimentStore held in memory.
 * Contract: behaves as the database stores do (records are copied in and out, so a caller's
 * later change to an object it passed or got does not reach the store; a duplicate `create`,
 * a `finish` or `putCase` of an unknown experiment throw KEEL_STORE_FAILED); nothing outlives
 * the process; after `close()` every call throws KEEL_STORE_FAILED.
 */
export function memoryExperimentStore(): ExperimentStore {
  /** In creation order: `list` sorts by `startedAt`, the later created first on a tie. */
  const experiments = new Map<string, ExperimentRecord>();
  const cases = new Map<string, Map<string, CaseResult>>();
  let closed = false;
  const open = () => {
    if (closed) throw closedStore(WHERE);
  };
  return {
    async create(experiment: ExperimentRecord) {
      open();
      if (experiments.has(experiment.id))
        throw new KeelError("KEEL_STORE_FAILED", `An experiment "${experiment.id}" already exists in ${WHERE}.`, {
          path: WHERE,
        });
      experiments.set(experiment.id, structuredClone(experiment));
      cases.set(experiment.id, new Map());
    },
    async finish(id: string, status: "completed" | "failed", summary: ExperimentSummary, endedAt: number) {
      open();
      const e = experiments.get(id);
      if (!e) throw unknownExperiment(id, WHERE);
      experiments.set(id, { ...e, status, summary: structuredClone(summary), endedAt });
    },
    async putCase(result: CaseResult) {
      open();
      const list = cases.get(result.experimentId);
      if (!list) throw unknownExperiment(result.experimentId, WHERE);
      list.set(result.caseId, structuredClone(result));
    },
    async get(id: string) {
      open();
      const e = experiments.get(id);
      return e && structuredClone(e);
    },
    async list(options: { agent?: string; limit?: number } = {}) {
      open();
      const all = [...experiments.values()]
        .map((e, order) => ({ e, order }))
        .filter(({ e }) => options.agent === undefined || e.agent === options.agent)
        .sort((a, b) => b.e.startedAt - a.e.startedAt || b.order - a.order)
        .map(({ e }) => structuredClone(e));
      const limit = listLimit(options.limit);
      return limit === undefined ? all : all.slice(0, limit);
    },
    async cases(experimentId: string) {
      open();
      return [...(cases.get(experimentId)?.values() ?? [])]
        .sort((a, b) => a.index - b.index || (a.caseId < b.caseId ? -1 : a.caseId > b.caseId ? 1 : 0))
        .map((c) => structuredClone(c));
    },
    async close() {
      closed = true;
    },
  };
}
