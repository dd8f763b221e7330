import { join } from "node:path";
import type { Message } from "@keel/kernel";
import { createAgent, definePlugin } from "@keel/agent";
import { defaultSessionDbPath, SqliteSessionStore } from "@keel/store-sqlite";
import { scriptedProvider } from "@keel/testkit";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { compaction, SUMMARY_PREFIX } from "../src/index.ts";
import { dropTestSchemas, rawRows, requirePostgres, testTarget } from "../../store-postgres/test/support/pg.ts";
import { PostgresSessionStore } from "@keel/store-postgres";
import { cleanupDirs, expectPairs, scriptedTool, setup, tempDir, textOf } from "./support.ts";

afterEach(cleanupDirs);

describe("repeated hard compactions in one long turn (real kernel turns)", () => {
  it("fold the earlier summary into the next one instead of keeping a pile of summaries", async () => {
    const long = (i: number) =>
      `Step ${i}: reading /srv/app/mod_${i}.py. ${"We weigh the options for the migration plan carefully. ".repeat(40)}`;
    const steps = [
      ...Array.from({ length: 14 }, (_, i) => ({
        text: long(i),
        toolCalls: [{ id: `c${i}`, name: "bash", args: { command: `step ${i}` } }],
      })),
      { text: "done" },
    ];
    const { session, provider } = await setup({
      steps,
      window: 3_000,
      tools: [
        scriptedTool(
          "bash",
          Array.from({ length: 14 }, (_, i) => `ok exit_code_${i}`),
        ),
      ],
      plugin: {
        model: false,
        taco: { enabled: false },
        maskText: false,
        cooldownRounds: 0,
        subgoals: { extractor: "heuristic" },
      },
    });
    const r = await session.run("migrate the database");
    expect(r.verdict.status).toBe("completed");
    const summaries = provider.requests.map(
      (q) => q.messages.filter((m) => textOf(m).startsWith(SUMMARY_PREFIX)).length,
    );
    expect(Math.max(...summaries)).toBe(1);
    const last = provider.requests.at(-1)!.messages;
    expectPairs(last);
    expect(textOf(last[0]!)).toBe("migrate the database");
    // The one summary covers the earliest steps too (merged, not dropped).
    expect(textOf(last.find((m) => textOf(m).startsWith(SUMMARY_PREFIX))!)).toContain("/srv/app/mod_0.py");
  });
});

describe.each(["SQLite", "PostgreSQL"])(
  "a long turn that pauses for approval and is resumed by a new agent (another process), raw store on %s",
  (backend) => {
    beforeAll(async () => {
      if (backend === "PostgreSQL") await requirePostgres();
    });
    afterAll(async () => {
      vi.unstubAllEnvs();
      await dropTestSchemas();
    });
    it("still folds the summary written before the pause into the next one (a secret in it is redacted in the log)", async () => {
      const home = tempDir();
      const long = (i: number) =>
        `Step ${i}: reading /srv/app/mod_${i}.py with key AKIAIOSFODNN7EXAMPL${i % 10}. ${"We weigh the options for the migration plan carefully. ".repeat(40)}`;
      const step = (i: number) => ({
        text: long(i),
        toolCalls: [{ id: `c${i}`, name: i === 7 ? "write_note" : "bash", args: { command: `step ${i}` } }],
      });
      // On PostgreSQL the session log is there too: a plugin's data goes where its agent's does.
      const pg = backend === "PostgreSQL" ? testTarget() : undefined;
      const options = {
        ...(pg ? {} : { path: join(home, "compaction.sqlite") }),
        model: false as const,
        taco: { enabled: false },
        maskText: false,
        cooldownRounds: 0,
        subgoals: { extractor: "heuristic" as const },
      };
      const guard = definePlugin({
        name: "guard",
        version: "1.0.0",
        setup: (ctx) =>
          ctx.on("tool.pre_call", (e) =>
            e.call.name === "write_note"
              ? { kind: "tool_decision", decision: "ask", reason: "writes are reviewed" }
              : undefined,
          ),
      });
      const tools = () => [
        scriptedTool(
          "bash",
          Array.from({ length: 20 }, (_, i) => `ok exit_code_${i}`),
        ),
        scriptedTool("write_note", ["written"], { category: "edit" }),
      ];
      const agent = async (steps: ReturnType<typeof step>[] | Array<{ text: string }>) => {
        const provider = scriptedProvider(steps, { contextWindow: 3_000 });
        const store = pg ? new PostgresSessionStore(pg) : new SqliteSessionStore({ path: defaultSessionDbPath(home) });
        return {
          provider,
          store,
          agent: await createAgent({ provider, store, tools: tools(), plugins: [compaction(options), guard] }),
        };
      };
      const countSummaries = (p: { requests: ReadonlyArray<{ messages: readonly Message[] }> }) =>
        p.requests.map((q) => q.messages.filter((m) => textOf(m).startsWith(SUMMARY_PREFIX)).length);

      const one = await agent(Array.from({ length: 8 }, (_, i) => step(i)));
      const session = await one.agent.session();
      const paused = await session.run("migrate the database");
      expect(paused.verdict.status).toBe("paused");
      // A summary was written before the pause (after the turn's input).
      expect(countSummaries(one.provider).at(-1)).toBe(1);
      await one.agent.close();
      one.store.close();

      const two = await agent([...Array.from({ length: 8 }, (_, i) => step(i + 8)), { text: "done" }]);
      const resumed = await two.agent.session(session.id);
      // The log keeps the summary redacted: the text differs from the one process 1 wrote.
      expect(resumed.messages.map(textOf).find((t) => t.startsWith(SUMMARY_PREFIX))).toContain("[REDACTED:");
      await resumed.approve("c7");
      const r = await resumed.resume();
      expect(r.verdict.status).toBe("completed");
      const summaries = countSummaries(two.provider);
      expect(summaries.length).toBeGreaterThan(5);
      expect(Math.max(...summaries)).toBe(1);
      const last = two.provider.requests.at(-1)!.messages;
      expectPairs(last);
      expect(textOf(last[0]!)).toBe("migrate the database");
      expect(textOf(last.find((m) => textOf(m).startsWith(SUMMARY_PREFIX))!)).toContain("/srv/app/mod_0.py");
      await two.agent.close();
      two.store.close();
      if (pg) {
        // Only the digests of the summaries reached the database, not their text.
        const rows = (await rawRows(pg.schema, "keel_compaction_raw"))
          .map((r) => JSON.parse(r) as Record<string, unknown>)
          .filter((r) => r.kind === "summary");
        expect(rows.length).toBeGreaterThan(1);
        for (const row of rows)
          expect(row).toMatchObject({
            text: "",
            tool_name: "summary",
            tool_call_id: expect.stringMatching(/^[0-9a-f]{64}$/),
          });
      }
    }, 60_000);
  },
);
