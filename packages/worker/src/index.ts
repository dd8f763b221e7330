/**
 * @keel/worker: finishes the turns stopped processes left. It claims, across instances through
 * the session leases, every turn that should go on (a turn a dead process left unfinished, a
 * paused turn whose approvals were all answered and never resumed) and continues it.
 */
export { runWorker, startWorker } from "./worker.ts";
export type {
  WorkerEvent,
  WorkerHandle,
  WorkerHealth,
  WorkerOptions,
  WorkerReport,
  WorkSource,
} from "./worker.ts";
