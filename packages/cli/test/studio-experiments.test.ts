/**
 * Experiments in `keel studio`: the endpoints (served from a real SQLite experiment store in the
 * session database; token required; unknown → 404; another agent's reads as unknown), and the
 * page in a real headless chromium through the real CLI: the list, an experiment compared with
 * its baseline (a regression and a fix, scorer flips, output before → after, escaped), the
 * replay command, and the link to the case's session.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresExperimentStore, sqliteExperimentStore } from "@keel/eval";
import type { ExperimentStore } from "@keel/eval";
import { endSharedPools } from "@keel/store-postgres";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../store-postgres/test/support/pg.ts";
import { caseResult, experiment, SUMMARY } from "../../eval/test/store-fixtures.ts";
import { startStudio, type Studio } from "../src/studio/server.ts";
import { browserMissing, launchChromium } from "./support/browser.ts";
import { offlineEnv, runKeel } from "./support/run-keel.ts";
import { startStudioProcess, type StudioProcess } from "./support/studio.ts";

const root = mkdtempSync(join(tmpdir(), "keel-studio-experiments-"));
const home = join(root, ".keel");
const db = join(home, "sessions.sqlite");
const env = offlineEnv({ KEEL_HOME: home });
const AGENT = "eval-studio";
/** Case output is untrusted model text: markup must show as text. */
const HOSTILE = `<img src=x onerror="globalThis.pwned=1"><script>globalThis.pwned=2</script> I cannot refund that.`;

writeFileSync(
  join(root, "agent.config.mjs"),
  `export default {
  name: ${JSON.stringify(AGENT)},
  offline: { script: { steps: [
    { when: { lastUserIncludes: "refund" }, text: "Refunds take 5 days." },
    { when: { lastUserIncludes: "hours" }, text: "We open at 9." },
  ] } },
};
`,
);

let sessions: string[] = [];
/** What afterAll stops: in-process studios (with their stores) and CLI processes. */
const closers: Array<() => Promise<void> | void> = [];

/** Baseline: c1 passed, c2 failed. Candidate: c1 regressed, c2 fixed, c3 new (an error), one scorer errored. */
async function writeExperiments(store: ExperimentStore, [s1, s2]: string[]): Promise<void> {
  const score = (scorer: string, pass: boolean, extra: object = {}) => ({
    scorer,
    pass,
    score: pass ? 1 : 0,
    ...extra,
  });
  await store.create(experiment({ id: "base", name: "baseline-run", agent: AGENT, startedAt: 1_000 }));
  await store.putCase(
    caseResult({
      experimentId: "base",
      caseId: "c1",
      index: 0,
      input: "can I get a refund?",
      output: "Refunds take 5 days.",
      sessionId: s1,
      scores: [score("contains", true), score("judge", true)],
    }),
  );
  await store.putCase(
    caseResult({
      experimentId: "base",
      caseId: "c2",
      index: 1,
      input: "opening hours?",
      status: "failed",
      output: "No idea.",
      scores: [score("contains", false, { reason: 'expected "9"' })],
    }),
  );
  await store.finish("base", "completed", { ...SUMMARY, cases: 2, passed: 1, failed: 1, passRate: 0.5 }, 2_000);
  await store.create(
    experiment({ id: "cand", name: "candidate-run", agent: AGENT, baseline: "base", startedAt: 3_000 }),
  );
  await store.putCase(
    caseResult({
      experimentId: "cand",
      caseId: "c1",
      index: 0,
      input: "can I get a refund?",
      status: "failed",
      output: HOSTILE,
      sessionId: s2,
      scores: [
        score("contains", false, { reason: 'expected "5 days"' }),
        score("judge", false, { error: "judge model timed out" }),
      ],
    }),
  );
  await store.putCase(
    caseResult({
      experimentId: "cand",
      caseId: "c2",
      index: 1,
      input: ["opening hours?", "and on Sunday?"],
      output: "We open at 9.",
      sessionId: s1,
      scores: [score("contains", true)],
    }),
  );
  await store.putCase(
    caseResult({
      experimentId: "cand",
      caseId: "c3",
      index: 2,
      status: "error",
      output: "😀".repeat(5_000),
      scores: [],
      error: "KEEL_PROVIDER_KEY_MISSING",
    }),
  );
  await store.create(experiment({ id: "other", name: "another agent's", agent: "someone-else", startedAt: 4_000 }));
}

beforeAll(async () => {
  for (const input of ["can I get a refund?", "opening hours?"]) {
    const r = await runKeel(["run", "--new", input], { cwd: root, env });
    expect(r.code, r.stderr).toBe(0);
  }
  const store = new SqliteSessionStore({ path: db, readOnly: true });
  sessions = (await store.listSessions()).map((s) => s.id).reverse();
  store.close();
  const writer = sqliteExperimentStore({ path: db });
  await writeExperiments(writer, sessions);
  await writer.close();
}, 60_000);

afterAll(async () => {
  for (const close of closers) await close();
  await dropTestSchemas();
  await endSharedPools();
  rmSync(root, { recursive: true, force: true });
});

/** A studio in this process over the home's session database, its experiments opened read-only. */
async function inProcess(options: { agent?: string; experiments?: boolean } = {}): Promise<Studio> {
  const store = new SqliteSessionStore({ path: db, readOnly: true });
  const experiments = options.experiments === false ? undefined : sqliteExperimentStore({ path: db, readOnly: true });
  const studio = await startStudio({
    store,
    where: db,
    ...(options.agent ? { agent: options.agent } : {}),
    ...(experiments ? { experiments } : {}),
  });
  closers.push(async () => {
    await studio.close();
    await experiments?.close();
    store.close();
  });
  return studio;
}

function get(studio: Studio, path: string, auth = true): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const headers = auth ? { authorization: `Bearer ${studio.token}` } : undefined;
    request(`http://127.0.0.1:${studio.port}${path}`, { headers }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(body) }));
    })
      .on("error", reject)
      .end();
  });
}

describe("keel studio: experiment endpoints", () => {
  it("need the token like every other request", async () => {
    const studio = await inProcess({ agent: AGENT });
    for (const path of ["/api/experiments", "/api/experiments/cand"]) {
      const r = await get(studio, path, false);
      expect(r.status).toBe(401);
      expect(r.body.error).toMatch(/needs the token/);
    }
  });

  it("list the agent's experiments, most recent first, with totals and the baseline's name", async () => {
    const studio = await inProcess({ agent: AGENT });
    const r = await get(studio, "/api/experiments");
    expect(r.status).toBe(200);
    expect(r.body.available).toBe(true);
    expect(r.body.experiments.map((e: { id: string }) => e.id)).toEqual(["cand", "base"]);
    const [cand, base] = r.body.experiments;
    // Still running: totals counted from its cases so far.
    expect(cand).toMatchObject({
      name: "candidate-run",
      status: "running",
      baseline: "base",
      baselineName: "baseline-run",
    });
    expect(cand.totals).toMatchObject({ cases: 3, passed: 1, failed: 1, errored: 1 });
    expect(cand.totals.passRate).toBeCloseTo(1 / 3);
    expect(base).toMatchObject({ status: "completed", totals: { cases: 2, passRate: 0.5 } });
    expect(base).not.toHaveProperty("baselineName");
    // Without an agent filter, every agent's.
    const all = await get(await inProcess(), "/api/experiments");
    expect(all.body.experiments.map((e: { id: string }) => e.id)).toEqual(["other", "cand", "base"]);
  });

  it("one experiment: pass rate per scorer, each case against the baseline, the replay command", async () => {
    const studio = await inProcess({ agent: AGENT });
    const r = await get(studio, "/api/experiments/cand");
    expect(r.status).toBe(200);
    const d = r.body;
    expect(d.baseline).toMatchObject({ id: "base", name: "baseline-run" });
    expect(d.scorers).toEqual([
      { scorer: "contains", passed: 1, total: 2, mean: 0.5 },
      { scorer: "judge", passed: 0, total: 1, mean: 0 },
    ]);
    expect(d.changes).toEqual({ regression: 1, fixed: 1, unchanged: 0, new: 1 });
    expect(d.missing).toEqual([]);
    const [c1, c2, c3] = d.cases;
    expect(c1.diff).toEqual({
      change: "regression",
      before: { status: "passed", output: { text: "Refunds take 5 days.", more: 0 } },
      scorers: [
        { scorer: "contains", change: "regression", before: true, after: false },
        { scorer: "judge", change: "regression", before: true, after: false },
      ],
    });
    expect(c1.output).toEqual({ text: HOSTILE, more: 0 });
    expect(c1.scores[1]).toMatchObject({ scorer: "judge", error: "judge model timed out" });
    expect(c1.replay).toBe(`keel replay ${sessions[1]}`);
    expect(c1.sessionId).toBe(sessions[1]);
    expect(c2.diff.change).toBe("fixed");
    expect(c2.diff.scorers).toEqual([{ scorer: "contains", change: "fixed", before: false, after: true }]);
    expect(c2.input.map((t: { text: string }) => t.text)).toEqual(["opening hours?", "and on Sunday?"]);
    expect(c3.diff).toEqual({ change: "new", scorers: [] });
    expect(c3).not.toHaveProperty("replay");
    expect(c3.error).toBe("KEEL_PROVIDER_KEY_MISSING");
    // Cut by code points (an emoji is two UTF-16 units): 4,000 shown, the rest counted.
    expect([...c3.output.text]).toHaveLength(4_000);
    expect(c3.output.more).toBe(1_000);
  });

  it("an unknown id, another agent's experiment, or no experiment store is 404; bad encoding is 400", async () => {
    const studio = await inProcess({ agent: AGENT });
    const unknown = await get(studio, "/api/experiments/nope");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatch(/No experiment "nope" of agent "eval-studio"/);
    expect((await get(studio, "/api/experiments/other")).status).toBe(404);
    expect((await get(studio, "/api/experiments/%E0%A4%A")).status).toBe(400);
    expect((await get(studio, "/api/experiments/cand/more")).status).toBe(404);
    const bare = await inProcess({ experiments: false });
    expect((await get(bare, "/api/experiments")).body).toEqual({ available: false, experiments: [] });
    expect((await get(bare, "/api/experiments/cand")).status).toBe(404);
  });

  it("a replay needs a studio started with a config: 409 saying so; an unknown session is 404", async () => {
    const studio = await inProcess({ agent: AGENT });
    const r = await get(studio, `/api/sessions/${sessions[0]}/replay`);
    expect(r.status).toBe(409);
    expect(r.body.error).toContain("--config");
    expect((await get(studio, "/api/sessions/nope/replay")).status).toBe(404);
  });
});

describe("keel studio on PostgreSQL: experiments", () => {
  it("reads the experiments from the agent's database and schema, beside its sessions", async () => {
    await requirePostgres();
    const schema = testSchema();
    const pgEnv = offlineEnv({
      KEEL_HOME: join(root, "pg-home"),
      KEEL_DATABASE_URL: PG_URL,
      KEEL_DATABASE_SCHEMA: schema,
    });
    for (const input of ["can I get a refund?", "opening hours?"]) {
      const r = await runKeel(["run", "--new", input], { cwd: root, env: pgEnv });
      expect(r.code, r.stderr).toBe(0);
    }
    const writer = postgresExperimentStore({ url: PG_URL, schema });
    await writeExperiments(writer, ["pg-s1", "pg-s2"]);
    await writer.close();
    const studio = await startStudioProcess([], { cwd: root, env: pgEnv });
    closers.push(() => studio.stop());
    const list = (await (await fetch(`${studio.origin}/api/experiments?token=${studio.token}`)).json()) as {
      experiments: Array<{ id: string }>;
    };
    expect(list.experiments.map((e) => e.id)).toEqual(["cand", "base"]);
    const view = (await (await fetch(`${studio.origin}/api/experiments/cand?token=${studio.token}`)).json()) as {
      changes: Record<string, number>;
      cases: Array<{ replay?: string }>;
    };
    expect(view.changes).toEqual({ regression: 1, fixed: 1, unchanged: 0, new: 1 });
    expect(view.cases[0]!.replay).toBe("keel replay pg-s2");
  }, 60_000);
});

const missing = browserMissing();
/** The page's navigator, as far as the test reads it (the tests' types have no DOM). */
type Clipboarded = { navigator: { clipboard: { readText(): Promise<string> } } };

describe.skipIf(missing)("keel studio in a browser: experiments", () => {
  let browser: Browser;
  let cli: StudioProcess;
  beforeAll(async () => {
    // The browser and the studio process start side by side.
    [browser, cli] = await Promise.all([launchChromium(), startStudioProcess([], { cwd: root, env })]);
    closers.push(() => cli.stop());
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  it("lists experiments, shows the regression against the baseline as text, copies the replay command, and links to the case's session", async () => {
    const context = await browser.newContext({
      viewport: { width: 1400, height: 1000 },
      permissions: ["clipboard-read", "clipboard-write"],
    });
    const page = await context.newPage();
    await page.goto(cli.url);
    await page.locator("#experiments-link").click();
    const rows = page.locator('table[data-table="experiments"] tr[data-experiment]');
    await expect.poll(() => rows.count()).toBe(2);
    const cand = page.locator('tr[data-experiment="cand"]');
    expect(await cand.textContent()).toContain("candidate-run");
    expect(await cand.textContent()).toContain("33.3%");
    expect(await cand.textContent()).toContain("baseline-run");
    await cand.locator("a").first().click();
    await page.locator("[data-baseline]").waitFor();
    expect(await page.locator("[data-baseline]").textContent()).toMatch(
      /baseline-run.*regression 1 · fixed 1 · unchanged 0 · new 1/,
    );
    expect(await page.locator('tr[data-scorer="contains"]').textContent()).toMatch(/1\/2\s*50\.0%\s*0\.500/);
    // The regression starts open: status and each scorer flipped, the output before → after, as text.
    const c1 = page.locator('details.case[data-case="c1"]');
    expect(await c1.getAttribute("open")).not.toBeNull();
    expect(await c1.locator("summary [data-change]").textContent()).toBe("regression");
    expect(await c1.locator('[data-score="contains"] [data-change]').textContent()).toBe("regression");
    expect(await c1.locator('[data-score="judge"]').textContent()).toContain("judge model timed out");
    expect(await c1.locator('[data-output="before"]').textContent()).toBe("Refunds take 5 days.");
    expect(await c1.locator('[data-output="after"]').textContent()).toBe(HOSTILE);
    expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
    expect(await page.locator("#detail img, #detail script").count()).toBe(0);
    expect(await page.locator('details.case[data-case="c2"] summary [data-change]').textContent()).toBe("fixed");
    expect(await page.locator('details.case[data-case="c3"] summary [data-change]').textContent()).toBe("new");
    expect(await c1.locator("code.replay").textContent()).toBe(`keel replay ${sessions[1]}`);
    await c1.locator("button[data-copy]").click();
    await expect.poll(() => c1.locator("button[data-copy]").textContent()).toBe("Copied");
    expect(await page.evaluate(() => (globalThis as unknown as Clipboarded).navigator.clipboard.readText())).toBe(
      `keel replay ${sessions[1]}`,
    );
    await page.screenshot({
      path: join(process.env.KEEL_STUDIO_SHOT_DIR ?? root, "studio-experiment.png"),
      fullPage: true,
    });
    // The case's session opens in the studio's session view.
    await c1.locator("a[data-session-link]").click();
    await expect.poll(() => page.locator("#detail h2 code").textContent()).toBe(sessions[1]);
    await expect.poll(() => page.locator("details.turn .input").first().textContent()).toBe("opening hours?");
    expect(await page.locator(`nav a[data-session="${sessions[1]}"]`).getAttribute("class")).toContain("selected");
    // Back to the experiment through history.
    await page.goBack();
    await page.locator('details.case[data-case="c1"]').waitFor();
    await context.close();
  });

  it("replays a case's session with today's config from the page: identical, request by request", async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    await page.goto(`${cli.url}#experiment=cand`);
    const c1 = page.locator('details.case[data-case="c1"]');
    await c1.locator("a[data-replay-link]").click();
    await page.locator('[data-replay="identical"]').waitFor({ timeout: 30_000 });
    const rows = page.locator('table[data-table="replay"] tr[data-request]');
    expect(await rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain("same");
    expect(await page.locator('tr[data-replay-turn="0"]').textContent()).toContain("opening hours?");
    // From the session view too; an unknown session is an error shown on the page.
    await page.goto(`${cli.url}#${sessions[0]}`);
    await page.locator("a[data-replay-link]").click();
    await page.locator('[data-replay="identical"]').waitFor({ timeout: 30_000 });
    await page.goto(`${cli.url}#replay=no-such-session`);
    await page.locator('[data-replay="error"]').waitFor();
    expect(await page.locator('[data-replay="error"]').textContent()).toContain('No session "no-such-session"');
    await page.close();
  }, 60_000);

  it("a running experiment's new cases appear without a reload", async () => {
    const writer = sqliteExperimentStore({ path: db });
    await writer.create(experiment({ id: "live", name: "live-run", agent: AGENT, startedAt: 5_000 }));
    await writer.putCase(caseResult({ experimentId: "live", caseId: "first" }));
    const page = await browser.newPage();
    await page.goto(`${cli.url}#experiment=live`);
    await page.locator('details.case[data-case="first"]').waitFor();
    await page.evaluate(() => ((globalThis as { marker?: number }).marker = 7));
    await writer.putCase(caseResult({ experimentId: "live", caseId: "second", index: 1, status: "failed" }));
    await page.locator('details.case[data-case="second"]').waitFor({ timeout: 10_000 });
    await expect.poll(() => page.locator("[data-totals]").textContent()).toMatch(/50\.0% passed \(1 of 2/);
    await writer.finish("live", "completed", SUMMARY, 6_000);
    await expect.poll(() => page.locator("#detail h2 .badge").textContent(), { timeout: 10_000 }).toBe("completed");
    expect(await page.evaluate(() => (globalThis as { marker?: number }).marker)).toBe(7);
    await writer.close();
    await page.close();
  });

  it("with no experiments the page says how to make one", async () => {
    const studio = await inProcess({ agent: "nobody-yet" });
    const page = await browser.newPage();
    await page.goto(`${studio.url}#experiments`);
    const empty = page.locator('[data-empty="experiments"]');
    await empty.waitFor();
    expect(await empty.textContent()).toMatch(/No experiments yet\. Run keel eval DATASET/);
    await page.close();
  });
});

describe("keel studio: the session list", () => {
  it("leaves out the sessions keel eval ran unless asked for (?evals=1)", async () => {
    const { createAgent } = await import("@keel/agent");
    const { MemorySessionStore, scriptedProvider } = await import("@keel/testkit");
    const store = new MemorySessionStore();
    const agent = await createAgent({
      name: "listed",
      provider: scriptedProvider([{ text: "a" }, { text: "b" }]),
      store,
      sideModel: false,
    });
    const mine = await agent.session();
    await mine.run("a person asked");
    const scored = await agent.session();
    await scored.run("a case", { metadata: { experiment: "exp_0123456789abcdef", case: "c1" } });
    await agent.close();
    const studio = await startStudio({ store, where: "memory" });
    closers.push(() => studio.close());
    const ids = async (path: string) =>
      ((await get(studio, path)).body.sessions as Array<{ id: string }>).map((s) => s.id).sort();
    expect(await ids("/api/sessions")).toEqual([mine.id]);
    expect(await ids("/api/sessions?evals=1")).toEqual([mine.id, scored.id].sort());
  });
});
