/**
 * Fault class 10, observability: tracing and the studio see a turn, they never change one.
 * Observers that throw, hang in their flush or in their listener leave the turn and the exit
 * status alone and are named on stderr; a session holding hostile text (markup, scripts, lone
 * surrogates, long inputs) is shown by `keel studio` as text, cut, and never runs in the page.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent, defineTool } from "../../packages/agent/src/index.ts";
import { SqliteSessionStore, defaultSessionDbPath } from "../../packages/store-sqlite/src/index.ts";
import { scriptedProvider } from "../../packages/testkit/src/index.ts";
import { isWellFormed } from "../../packages/text/src/index.ts";
import { browserMissing, launchChromium } from "../../packages/cli/test/support/browser.ts";
import { startStudioProcess } from "../../packages/cli/test/support/studio.ts";
import { expectNoStack, keel, project, ROOT, scenarioEnv } from "./support/cli.ts";

afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

const SCRIPT = `offline: { script: { steps: [{ text: "The answer stands." }] } }`;

describe.concurrent("fault/observe: an observer cannot change a turn", { timeout: 120_000 }, () => {
  it("an observer whose flush never finishes: keel run answers, exits 0 within the detach deadline, and says what was lost", async () => {
    const dir = project({
      "agent.config.mjs": `export default { name: "stuck", observers: [{ name: "stuck-exporter", attach: () => () => new Promise(() => {}) }], ${SCRIPT} };`,
    });
    const r = await keel(["run", "hello"], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("The answer stands.");
    expect(r.ms).toBeLessThan(20_000);
    expect(r.stderr).toMatch(/KEEL_OBSERVER_FAILED.*Observer "stuck-exporter" did not detach within 5000 ms/s);
    expectNoStack(r.stderr);
  });

  it("an observer whose attach throws, and one whose listener throws on every event: the turn completes, each is named once", async () => {
    const dir = project({
      "agent.config.mjs": `export default { name: "throwing", observers: [
        { name: "broken-attach", attach() { throw new Error("no exporter configured"); } },
        { name: "noisy", attach(agent) { agent.subscribe(() => { throw new Error("listener exploded"); }); } },
      ], ${SCRIPT} };`,
    });
    const r = await keel(["run", "hello"], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("The answer stands.");
    const said = r.stderr.replace(/\s+/g, " ");
    expect(
      said.match(
        /KEEL_OBSERVER_FAILED \(at observers\[0\]\): Observer "broken-attach" threw in attach\(\): no exporter configured/g,
      ),
    ).toHaveLength(1);
    expect(
      said.match(
        /KEEL_OBSERVER_FAILED: An event listener \(agent\.subscribe, or an observer's\) threw on a session\.created event: listener exploded/g,
      ),
    ).toHaveLength(1);
    expect(said.match(/listener exploded/g)).toHaveLength(1);
    expectNoStack(r.stderr);
    const log = await keel(
      ["sessions", "show", (await keel(["sessions", "list"], { cwd: dir })).stdout.split(" ")[0]!, "--json"],
      { cwd: dir },
    );
    const events = log.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; code?: string });
    expect(events.filter((e) => e.code === "KEEL_OBSERVER_FAILED")).toHaveLength(2);
    expect(events.at(-1)!.type).toBe("turn.completed");
  });

  it("an observer failing with errors JSON cannot see (a list of errors, an AggregateError, a non-enumerable message) is named by their messages, never `[{}]`", async () => {
    const dir = project({
      "agent.config.mjs": `export default { name: "listy", observers: [
        { name: "list-detach", attach: () => () => Promise.reject([new Error("exporter down"), new TypeError("queue full")]) },
        { name: "aggregate-attach", attach() { throw new AggregateError([new Error("no endpoint"), new Error("no key")]); } },
        { name: "odd-listener", attach(agent) { agent.subscribe(() => { throw Object.defineProperty({}, "message", { value: "span buffer overflow" }); }); } },
      ], ${SCRIPT} };`,
    });
    const r = await keel(["run", "hello"], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    const said = r.stderr.replace(/\s+/g, " ");
    expect(said).toContain('Observer "list-detach" threw in its detach: exporter down; queue full');
    expect(said).toContain('Observer "aggregate-attach" threw in attach(): no endpoint; no key');
    expect(said).toContain("span buffer overflow");
    expect(said).not.toContain("{}");
    expectNoStack(r.stderr);
  });

  it("an observers entry that is not an observer is a located config error, exit 2", async () => {
    const dir = project({
      "agent.config.mjs": `export default { name: "bad", observers: [{ name: "otel" }], ${SCRIPT} };`,
    });
    const r = await keel(["run", "hello"], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("observers[0]");
    expect(r.stderr).toMatch(/expected an observer/);
    expectNoStack(r.stderr);
  });
});

const missing = browserMissing();

describe.skipIf(missing)(
  "fault/observe: keel studio shows hostile text as text",
  // Concurrent: each scenario uses its own test's expect (expect.poll needs it).
  { timeout: 60_000, concurrent: true },
  () => {
    const stops: Array<() => void> = [];
    // One browser for both scenarios (each has a context of its own), started once the first asks for it.
    let launched: ReturnType<typeof launchChromium> | undefined;
    const chromium = () => (launched ??= launchChromium());
    // It starts while the scenarios' keel runs do (a failed launch fails the scenario that awaits it).
    beforeAll(() => void chromium().catch(() => {}));
    afterAll(async () => {
      for (const stop of stops) stop();
      await (await launched)?.close();
    });

    it("markup and scripts in the input, the answer, a plugin's name and its diagnostic never run; a 100 KB input with lone surrogates is cut", async ({
      expect,
    }) => {
      const xss = `<img src=x onerror="globalThis.pwned=1"><script>globalThis.pwned=2</script>`;
      const dir = project({
        "agent.config.mjs": `export default { name: "hostile",
        plugins: [{ name: ${JSON.stringify(`evil${xss}`)}, version: "1.0.0", setup(ctx) { ctx.on("turn.pre_prompt_context", () => ({ kind: "diagnostic", level: "warn", code: "evil.code", message: ${JSON.stringify(xss)} })); } }],
        offline: { script: { steps: [{ text: ${JSON.stringify(`answer ${xss}`)} }, { text: "big one" }] } } };`,
      });
      const first = await keel(["run", `question ${xss}`], { cwd: dir });
      expect(first.code, first.stderr).toBe(0);
      // As large as one argument may be (the kernel limits a single argv string to 128 KiB).
      const big = `${"\ud800x".repeat(10)}${"y".repeat(100_000)}`;
      const second = await keel(["run", "-c", big], { cwd: dir, killAfterMs: 60_000 });
      expect(second.code, second.stderr).toBe(0);

      const studio = await startStudioProcess([], { cwd: dir, env: scenarioEnv(dir) });
      stops.push(studio.stop);
      const url = studio.url;
      const browser = await (await chromium()).newContext();
      try {
        const page = await browser.newPage();
        const errors: string[] = [];
        page.on("pageerror", (e) => errors.push(e.message));
        await page.goto(url);
        const turns = page.locator("details.turn");
        await expect.poll(() => turns.count()).toBe(2);
        await turns.first().locator(":scope > summary").click();
        const firstTurn = turns.first();
        await expect.poll(() => firstTurn.locator(".input").textContent()).toBe(`question ${xss}`);
        expect(await firstTurn.locator(".answer").textContent()).toBe(`answer ${xss}`);
        expect(await firstTurn.locator('[data-finding="evil.code"]').textContent()).toContain(xss);
        expect(await page.locator("img, script:not([src])").count()).toBe(0);
        expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
        // The 100 KB input: shown cut (4,000 code points and an ellipsis), each lone surrogate as U+FFFD.
        const shown = (await turns.nth(1).locator(".input").textContent())!;
        expect(shown.length).toBeLessThan(5_000);
        expect(shown.startsWith("\ufffdx\ufffdx")).toBe(true);
        expect(shown.endsWith("…")).toBe(true);
        expect(errors).toEqual([]);
      } finally {
        await browser.close();
      }
    });
    it("who approved what, and what did it cost: each call's arguments and result, each answered approval with who, when and why, each turn's $ and the session's, all as text", async ({
      expect,
    }) => {
      const xss = `<img src=x onerror="globalThis.pwned=3"><script>globalThis.pwned=4</script>`;
      const dir = project({ "agent.config.mjs": `export default { name: "audit" };` });
      const store = new SqliteSessionStore({ path: defaultSessionDbPath(join(dir, ".keel-home")) });
      // A priced model ($3 / $15 per million tokens): two requests of 1,000 in and 100 out tokens cost $0.009.
      const scripted = scriptedProvider([
        {
          toolCalls: [{ id: "d1", name: "deploy", args: { env: `prod ${xss}`, notes: "😀".repeat(3_000) } }],
          usage: { inputTokens: 1_000, outputTokens: 100 },
        },
        { text: "Deployed.", usage: { inputTokens: 1_000, outputTokens: 100 } },
      ]);
      const host = await createAgent({
        name: "audit",
        provider: { id: "test:priced", price: { input: 3, output: 15 }, stream: (r, o) => scripted.stream(r, o) },
        sideModel: false,
        store,
        tools: [
          defineTool({
            name: "deploy",
            description: "Deploys.",
            category: "exec",
            execute: () => `deployed ${xss}`,
          }),
        ],
        plugins: [
          {
            name: "rules",
            version: "1.0.0",
            setup: (ctx) =>
              ctx.on("tool.pre_call", () => ({
                kind: "tool_decision",
                decision: "ask",
                reason: `deploys are reviewed ${xss}`,
              })),
          },
        ],
      });
      const session = await host.session();
      expect((await session.run("deploy it")).verdict.status).toBe("paused");
      await session.approve("d1", { answerer: `ops ${xss}`, reason: "change window is open" });
      expect((await session.resume()).text).toBe("Deployed.");
      await host.close();
      store.close();

      const studio = await startStudioProcess([], { cwd: dir, env: scenarioEnv(dir) });
      stops.push(studio.stop);
      // The JSON API: the call, the approval with its answerer, the cost.
      const res = await fetch(`${studio.origin}/api/sessions/${session.id}`, {
        headers: { authorization: `Bearer ${studio.token}` },
      });
      const detail = (await res.json()) as {
        cost: { usd: number; priced: number; unpriced: number };
        turns: Array<{
          cost: { usd: number; priced: number; unpriced: number };
          calls: Array<{ name: string; args: string; result?: string; status?: string }>;
          approvals: Array<{
            name: string;
            reason?: string;
            askedAt?: number;
            answer?: { approved: boolean; answerer?: string; reason?: string; at: number; by: string };
          }>;
        }>;
      };
      const [turn] = detail.turns;
      expect(turn!.calls).toHaveLength(1);
      expect(turn!.calls[0]).toMatchObject({ name: "deploy", status: "ok", result: `deployed ${xss}` });
      expect(turn!.calls[0]!.args).toContain(`"env": "prod <img src=x onerror=\\"globalThis.pwned=3\\">`);
      // The 3,000 emoji are cut by code points (2,000 at most, never half a pair), saying how much was dropped.
      expect([...turn!.calls[0]!.args].length).toBeLessThanOrEqual(2_000);
      expect(turn!.calls[0]!.args).toMatch(/… \[\d+ more chars\]$/);
      expect(isWellFormed(turn!.calls[0]!.args)).toBe(true);
      expect(turn!.approvals).toHaveLength(1);
      const approval = turn!.approvals[0]!;
      expect(approval).toMatchObject({ name: "deploy", reason: `deploys are reviewed ${xss}` });
      expect(approval.answer).toMatchObject({
        approved: true,
        by: "host",
        answerer: `ops ${xss}`,
        reason: "change window is open",
      });
      expect(approval.answer!.at).toBeGreaterThanOrEqual(approval.askedAt!);
      expect(turn!.cost.usd).toBeCloseTo(0.009, 9);
      expect(turn!.cost).toMatchObject({ priced: 2, unpriced: 0 });
      expect(detail.cost.usd).toBeCloseTo(0.009, 9);

      // The page shows the same, as text.
      const browser = await (await chromium()).newContext({ viewport: { width: 1400, height: 1000 } });
      try {
        const page = await browser.newPage();
        const errors: string[] = [];
        page.on("pageerror", (e) => errors.push(e.message));
        await page.goto(`${studio.url}#${session.id}`);
        const shown = page.locator("details.turn").first();
        await expect.poll(() => shown.getAttribute("open")).not.toBeNull();
        const call = shown.locator('[data-table="calls"] tr[data-call="d1"]');
        await call.waitFor();
        // The arguments as the log holds them (JSON), character for character.
        expect(await call.locator("[data-args]").textContent()).toBe(turn!.calls[0]!.args);
        expect(await call.locator("[data-result]").textContent()).toBe(`deployed ${xss}`);
        const row = shown.locator('[data-table="approvals"] tr[data-approval="d1"]');
        expect(await row.locator("[data-answerer]").textContent()).toBe(`ops ${xss}`);
        expect(await row.locator("[data-ask-reason]").textContent()).toBe(`deploys are reviewed ${xss}`);
        expect(await row.locator("[data-answer-reason]").textContent()).toBe("change window is open");
        expect(await row.locator(".badge").first().textContent()).toBe("approved");
        expect(await row.locator("[data-answered-at]").textContent()).not.toBe("");
        expect(await shown.locator('[data-cost="turn"]').textContent()).toBe("$0.0090");
        expect(await page.locator('[data-cost="session"]').textContent()).toBe("$0.0090 in all");
        expect(await page.locator("img, script:not([src])").count()).toBe(0);
        expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
        expect(errors).toEqual([]);
      } finally {
        await browser.close();
      }
    });
  },
);
