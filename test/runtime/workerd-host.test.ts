/**
 * The host off Node (host-entry.ts) in workerd, without and with `nodejs_compat`: with the flag a
 * Worker has a `process` whose `versions.node` is set, yet no file system and no
 * @keel/agent/node in its bundle, so it is no Node to the host. Each scenario is one request:
 * createAgent with no store, a child session, an approval, a durable job, steering, what plugins
 * are told of storage, `store: "sqlite"` refused with a KeelError.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTurnWorker, TURN_WORKER, type TurnWorker } from "./support/workerd.ts";

const HOST_ENTRY = fileURLToPath(new URL("./host-entry.ts", import.meta.url));

describe.each([
  { flags: [] as string[], label: "no nodejs_compat" },
  { flags: ["nodejs_compat"], label: "nodejs_compat" },
])("the host in workerd ($label)", ({ flags }) => {
  // Started once; a failure to bundle or start is thrown by each test (vitest would call them skipped).
  let worker: Promise<TurnWorker>;
  beforeAll(async () => {
    worker = startTurnWorker(
      `import { runScenario } from ${JSON.stringify(HOST_ENTRY)};
import { turnWorker } from ${JSON.stringify(TURN_WORKER)};
export default turnWorker((query) => runScenario(query.get("s") ?? ""));
`,
      {},
      flags,
    );
    await worker.catch(() => undefined);
  });
  afterAll(async () => {
    await (await worker.catch(() => undefined))?.dispose();
  });
  const run = async (scenario: string) => (await worker).run(`/?s=${scenario}`);

  it("createAgent with no store keeps the log in memory, and plugins are told there is no home", async () => {
    expect(await run("storage")).toEqual({
      ok: { told: { home: "", database: { kind: "sqlite" } }, store: "MemorySessionStore", text: "ok" },
    });
  });

  it("a tool's child session runs a turn on the parent's model and its answer reaches the parent", async () => {
    const outcome = (await run("child")) as { ok: { results: string[]; events: string[] } };
    expect(outcome).toMatchObject({ ok: { verdict: "completed", text: "all done" } });
    expect(outcome.ok.results).toEqual(["the helper said: found it"]);
    expect(outcome.ok.events).toContain("child.started");
  });

  it("an approval pauses the turn; approve and resume run the tool once", async () => {
    expect(await run("approval")).toEqual({
      ok: {
        paused: { status: "paused", reason: "approval", pending: ["w1"] },
        resumed: "completed",
        text: "noted",
        results: ["wrote a"],
      },
    });
  });

  it("a durable job runs once after the turn and reads its turn from the log", async () => {
    expect(await run("job")).toEqual({
      ok: { seen: [{ ok: 1 }, "remember the blue door"], jobs: ["job.pending", "job.started", "job.completed"] },
    });
  });

  it("steering sent while a tool runs skips the call not yet started", async () => {
    const outcome = (await run("steering")) as { ok: { results: string[] } };
    expect(outcome).toMatchObject({ ok: { verdict: "completed", text: "did the other thing", queued: 1 } });
    expect(outcome.ok.results).toEqual(["stepped", "Skipped due to queued user message."]);
  });

  it('store: "sqlite" is refused with a KeelError that says to pass a store', async () => {
    const outcome = (await run("sqlite")) as { ok: { refused: { message: string } } };
    expect(outcome).toMatchObject({ ok: { refused: { name: "KeelError", code: "KEEL_AGENT_OPTIONS_INVALID" } } });
    expect(outcome.ok.refused.message).toContain("MemorySessionStore");
  });
});
