/**
 * Fault class 10, observability: tracing and the studio see a turn, they never change one.
 * Observers that throw, hang in their flush or in their listener leave the turn and the exit
 * status alone and are named on stderr; a session holding hostile text (markup, scripts, lone
 * surrogates, long inputs) is shown by `keel studio` as text, cut, and never runs in the page.
 */
import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
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

describe.skipIf(missing)("fault/observe: keel studio shows hostile text as text", { timeout: 60_000 }, () => {
  const stops: Array<() => void> = [];
  afterAll(() => {
    for (const stop of stops) stop();
  });

  it("markup and scripts in the input, the answer, a plugin's name and its diagnostic never run; a 100 KB input with lone surrogates is cut", async () => {
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
    const browser = await launchChromium();
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
});
