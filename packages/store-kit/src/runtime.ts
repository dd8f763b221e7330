/**
 * Who this process is, for the records a lease or a durable job leaves: read through
 * `globalThis.process` (and Node's `process.getBuiltinModule`), never imported, so the
 * package loads in any runtime. Where there is no Node process (a Worker, a browser tab), the
 * process id is 0, the host is "localhost", and no other process's liveness can be read.
 */

interface NodeLike {
  pid: number;
  kill(pid: number, signal: number): boolean;
  getBuiltinModule?(name: string): unknown;
}

const proc = (globalThis as { process?: NodeLike }).process;

/** This process's id (0 where the runtime has no process). */
export const PROCESS_ID: number = typeof proc?.pid === "number" ? proc.pid : 0;

/**
 * This process's id for the records it leaves (a durable job's attempts): a pid alone cannot
 * tell this process from a killed one that had the same pid (a container's PID 1 restarted).
 * Shared by every copy of the module in the process; made on first use (a Worker may not draw
 * random values while its modules load).
 */
export function processInstance(): string {
  return ((globalThis as Record<symbol, unknown>)[Symbol.for("keel.processInstance")] ??=
    globalThis.crypto.randomUUID()) as string;
}

let host: string | undefined;
/** This machine's name (os.hostname(), read once: the call is a system call); "localhost" outside Node. */
export function thisHost(): string {
  if (host === undefined) {
    const os = proc?.getBuiltinModule?.("node:os") as { hostname(): string } | undefined;
    host = os ? os.hostname() : "localhost";
  }
  return host;
}

/**
 * Whether process `pid` on this host is gone: true when it is (or is a zombie not reaped yet),
 * false when it lives or cannot be told (no Node process here).
 */
export function processGone(pid: number): boolean {
  if (!proc) return false;
  try {
    proc.kill(pid, 0);
  } catch (err) {
    return (err as { code?: string }).code === "ESRCH";
  }
  // A killed child its parent has not reaped yet still answers signal 0; it is a zombie.
  try {
    const fs = proc.getBuiltinModule?.("node:fs") as { readFileSync(p: string, e: "utf8"): string } | undefined;
    if (!fs) return false;
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "Z";
  } catch {
    return false;
  }
}
