import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

/**
 * A closed session must be collectable, also when the host never yields to the event loop
 * between sessions (a synchronous store, a scripted provider: every await is a microtask).
 * Each session used to leave "write soon" immediates queued, and each held its session.
 */
describe("retention", () => {
  it("60 sessions run back to back without yielding leave no queued work behind (each queued immediate held its closed session)", () => {
    const kernel = new URL("../src/index.ts", import.meta.url).href;
    const sqlite = new URL("../../store-sqlite/src/index.ts", import.meta.url).href;
    const testkit = new URL("../../testkit/src/index.ts", import.meta.url).href;
    const code = `
      const { createAgent } = await import(${JSON.stringify(kernel)});
      const { SqliteSessionStore } = await import(${JSON.stringify(sqlite)});
      const { scriptedProvider } = await import(${JSON.stringify(testkit)});
      const { mkdtempSync } = await import("node:fs"); const { tmpdir } = await import("node:os"); const { join } = await import("node:path");
      const store = new SqliteSessionStore({ path: join(mkdtempSync(join(tmpdir(), "keel-ret-")), "s.sqlite") });
      const steps = Array.from({ length: 120 }, (_, i) => (i % 2 ? { text: "done" } : { toolCalls: [{ name: "t", args: {} }] }));
      const agent = await createAgent({ provider: scriptedProvider(steps), store, tools: [{ name: "t", description: "t", parameters: { type: "object", properties: {} }, execute: () => "ok" }] });
      const immediates = () => process.getActiveResourcesInfo().filter((r) => r === "Immediate").length;
      const before = immediates();
      for (let i = 0; i < 60; i++) { const s = await agent.session(); await s.run("go"); await s.close(); }
      const queued = immediates() - before;
      await agent.close();
      console.log(JSON.stringify({ queued }));`;
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", code], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout.trim().split("\n").at(-1)!).queued).toBeLessThanOrEqual(1);
  });
});
