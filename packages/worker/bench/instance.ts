/**
 * One instance of the kill-recovery bench (kill-recovery.ts starts three): a server that runs
 * turns for the sessions the parent names on stdin ("RUN <label>") and a worker beside it that
 * finishes what dead instances left. Its model is the wire server (the official Anthropic SDK);
 * its tool `slow` is repeatable (info) and waits SLOW_MS.
 */
import { writeSync } from "node:fs";
import { createInterface } from "node:readline";
import { createAgent, defineTool } from "@keel/agent";
import type { SessionStore } from "@keel/kernel";
import { anthropicProvider } from "@keel/providers";
import { PostgresSessionStore } from "@keel/store-postgres";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { runWorker } from "../src/index.ts";

const say = (line: string) => writeSync(1, `${line}\n`);
const env = process.env;
const store: SessionStore = env.BENCH_PG_SCHEMA
  ? new PostgresSessionStore({ url: env.BENCH_PG_URL!, schema: env.BENCH_PG_SCHEMA })
  : new SqliteSessionStore({ path: env.BENCH_DB! });
const slow = defineTool({
  name: "slow",
  description: "Works for a while.",
  category: "info",
  execute: (_a: unknown, ctx) =>
    new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => resolve("worked"), Number(env.SLOW_MS ?? 200));
      ctx.signal.addEventListener("abort", () => (clearTimeout(t), reject(ctx.signal.reason)), { once: true });
    }),
});
const agent = await createAgent({
  name: "bench",
  provider: anthropicProvider({ model: "claude-sonnet-4-6", apiKey: "sk-bench", baseURL: env.BENCH_WIRE! }),
  store,
  tools: [slow],
  recovery: "auto",
  lease: { ttlMs: Number(env.LEASE_TTL_MS ?? 2000) },
});
void runWorker({
  agent,
  intervalMs: 100,
  concurrency: 50,
  onEvent: (e) => e.type === "finished" && say(`RECOVERED ${e.sessionId} ${Date.now()}`),
});
createInterface({ input: process.stdin }).on("line", (line) => {
  const [cmd, label] = line.split(" ");
  if (cmd !== "RUN") return;
  void (async () => {
    const s = await agent.session();
    // Begun once the model answered the first request: the input is durable by then.
    const off = agent.subscribe((e) => {
      if (e.sessionId === s.id && e.type === "model.responded") {
        off();
        say(`STARTED ${label} ${s.id}`);
      }
    });
    const r = await s.run(`${label} rounds:${env.ROUNDS ?? 3}`);
    say(`DONE ${s.id} ${r.verdict.status} ${Date.now()}`);
  })().catch((err: unknown) => say(`ERROR ${label} ${String(err)}`));
});
say("READY");
