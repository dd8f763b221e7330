/**
 * The example's in-process worker through a PostgreSQL outage: a TCP proxy between the server
 * and the shared test database refuses and drops connections for a few seconds. The worker
 * does not stop ("worker stopped" was the end of it): `GET /worker/health` turns 503 with the
 * failures and the backoff while the store is away, and 200 again once it answers.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { dropTestSchemas, requirePostgres, testSchema } from "../../packages/store-postgres/test/support/pg.ts";
import { startPgProxy } from "../../packages/store-postgres/test/support/proxy.ts";
import { offlineModel } from "./offline-model.ts";
import { startServer } from "./server.ts";

beforeAll(requirePostgres);
afterAll(dropTestSchemas);

async function health(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${url}/worker/health`);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

async function until(pred: () => Promise<boolean>, what: string): Promise<void> {
  const end = Date.now() + 40_000;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

it("the worker waits out a PostgreSQL outage and says so at /worker/health; it never stops", async () => {
  const proxy = await startPgProxy();
  const saved = { url: process.env.KEEL_DATABASE_URL, schema: process.env.KEEL_DATABASE_SCHEMA };
  process.env.KEEL_DATABASE_URL = proxy.url;
  process.env.KEEL_DATABASE_SCHEMA = testSchema();
  const s = await startServer({
    home: mkdtempSync(join(tmpdir(), "keel-worker-health-")),
    provider: offlineModel,
    port: 0,
  });
  try {
    await until(async () => (await health(s.url)).body.lastPollAt !== null, "the first poll");
    expect(await health(s.url)).toMatchObject({ status: 200, body: { state: "ok", consecutiveFailures: 0 } });
    await proxy.down();
    await until(async () => Number((await health(s.url)).body.consecutiveFailures) >= 2, "two failed polls");
    const down = await health(s.url);
    expect(down).toMatchObject({ status: 503, body: { state: "retrying", lastError: "KEEL_STORE_FAILED" } });
    expect(Number(down.body.backoffMs)).toBeGreaterThan(0);
    expect(JSON.stringify(down.body)).not.toContain("postgres://");
    await proxy.up();
    await until(async () => (await health(s.url)).status === 200, "the store to answer again");
    expect((await health(s.url)).body).toMatchObject({ state: "ok", consecutiveFailures: 0, backoffMs: 0 });
    expect(s.workerHealth()?.state).toBe("ok");
  } finally {
    await s.close();
    await proxy.close();
    process.env.KEEL_DATABASE_URL = saved.url;
    process.env.KEEL_DATABASE_SCHEMA = saved.schema;
    if (saved.url === undefined) delete process.env.KEEL_DATABASE_URL;
    if (saved.schema === undefined) delete process.env.KEEL_DATABASE_SCHEMA;
  }
});
