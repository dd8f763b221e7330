/**
 * `keel studio` end to end: the real CLI serves a home that real `keel run`s wrote; a real
 * headless chromium (Debian's, through playwright-core) opens a session, expands a turn, reads a
 * request's manifest (which plugin built each section), sees the plugin times and a rejected
 * contribution, watches a turn run by another process appear live, and answers an approval when
 * (and only when) the studio was started with --allow-approvals. Requests without the token are refused.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { connect } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { createAgent } from "@keel/agent";
import { scriptedProvider } from "@keel/testkit";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { browserMissing, launchChromium } from "./support/browser.ts";
import { offlineEnv, runKeel } from "./support/run-keel.ts";
import { startStudioProcess, type StudioProcess } from "./support/studio.ts";

const root = mkdtempSync(join(tmpdir(), "keel-studio-"));
const notes = join(root, "notes.txt");
const home = join(root, ".keel");
const env = offlineEnv({ KEEL_HOME: home });
/** The "slowly" turn holds in a tool until this file exists: it runs for as long as the test needs to see it running. */
const release = join(root, "release-slow-answer");

/** One agent for every test: a plugin that adds a section, misplaces a contribution and asks before writes. */
const HOUSE = `{ name: "house", version: "1.0.0", setup(ctx) {
    ctx.on("turn.pre_prompt_compile", () => ({ kind: "prompt_section", id: "house.rules", sectionId: "house-rules", title: "House rules", domain: "house", content: "Answer in one line." }));
    ctx.on("turn.pre_prompt_context", () => ({ kind: "prompt_section", id: "misplaced", sectionId: "x", domain: "x", content: "wrong phase" }));
    ctx.on("tool.pre_call", (e) => e.call.name === "write_note" ? { kind: "tool_decision", decision: "ask", reason: "writes are reviewed" } : undefined);
  } }`;
const TOOLS = `[
    { name: "lookup", description: "Looks a value up.", category: "info", parameters: { type: "object", properties: {} }, execute: () => "the answer is 42" },
    { name: "write_note", description: "Appends a note.", category: "edit", parameters: { type: "object", properties: { text: { type: "string" } } }, execute: ({ text }) => { appendFileSync(${JSON.stringify(notes)}, text + "\\n"); return "wrote " + text; } },
    { name: "hold", description: "Waits to be released.", category: "info", parameters: { type: "object", properties: {} }, execute: async () => { const end = Date.now() + 60_000; while (!existsSync(${JSON.stringify(release)}) && Date.now() < end) await new Promise((r) => setTimeout(r, 20)); return "released"; } },
  ]`;
writeFileSync(
  join(root, "agent.config.mjs"),
  `import { appendFileSync, existsSync } from "node:fs";
export default {
  name: "studio-test",
  tools: ${TOOLS},
  plugins: [${HOUSE}],
  offline: { script: { steps: [
    { when: { lastUserIncludes: "look it up" }, toolCalls: [{ id: "l1", name: "lookup", args: {} }] },
    { when: { lastUserIncludes: "look it up" }, text: "It is 42." },
    { when: { lastUserIncludes: "slowly" }, toolCalls: [{ id: "h1", name: "hold", args: {} }] },
    { when: { lastUserIncludes: "slowly" }, text: "A slow answer." },
    { when: { lastUserIncludes: "note" }, text: "Written." },
  ] } },
};
`,
);

const started: StudioProcess[] = [];

/** `keel studio …` on this test's project. */
async function studio(args: string[] = []): Promise<StudioProcess> {
  const s = await startStudioProcess(args, { cwd: root, env });
  started.push(s);
  return s;
}

/** A raw HTTP request, so the Host header can be forged. */
function raw(
  url: string,
  headers: Record<string, string> = {},
  method = "GET",
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode!, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

const missing = browserMissing();
let browser: Browser;
let readOnly: StudioProcess;

beforeAll(async () => {
  // The browser starts while the first turn is recorded and the studio comes up.
  const [first, launched] = await Promise.all([
    runKeel(["run", "please look it up"], { cwd: root, env }),
    missing ? undefined : launchChromium(),
  ]);
  if (launched) browser = launched;
  expect(first.code, first.stderr).toBe(0);
  readOnly = await studio();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  for (const s of started) s.stop();
  rmSync(root, { recursive: true, force: true });
});

describe("keel studio: access", () => {
  it("refuses every request without the token, with a wrong one, or for another host name", async () => {
    const { origin, url } = readOnly;
    const token = new URL(url).searchParams.get("token")!;
    expect(token.length).toBeGreaterThanOrEqual(40);
    for (const path of ["/", "/app.js", "/api/sessions"]) {
      const r = await raw(`${origin}${path}`);
      expect(r.status).toBe(401);
      expect(JSON.parse(r.body).error).toMatch(/needs the token that keel studio printed/);
    }
    expect((await raw(`${origin}/api/sessions?token=${token.slice(0, -1)}x`)).status).toBe(401);
    expect((await raw(`${origin}/api/sessions`, { authorization: "Bearer nope" })).status).toBe(401);
    // DNS rebinding: the right token from a page whose host name only resolves here.
    expect((await raw(`${origin}/api/sessions?token=${token}`, { host: "attacker.example:80" })).status).toBe(421);
    const ok = await raw(`${origin}/api/sessions?token=${token}`);
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body).sessions).toHaveLength(1);
    // An empty token is no token, whatever else the request carries.
    expect((await raw(`${origin}/api/sessions?token=`, { authorization: `Bearer ${token}` })).status).toBe(200);
    expect((await raw(`${origin}/api/sessions?token=`)).status).toBe(401);
  });

  it("sets no cookie (every port of 127.0.0.1 would receive it): the page's own files carry the token, the page sends it as a header", async () => {
    const page = await new Promise<{ headers: Record<string, string | string[] | undefined>; body: string }>(
      (resolve, reject) => {
        request(readOnly.url, (res) => {
          let body = "";
          res.on("data", (d: Buffer) => (body += d.toString()));
          res.on("end", () => resolve({ headers: res.headers, body }));
        })
          .on("error", reject)
          .end();
      },
    );
    expect(page.headers["set-cookie"]).toBeUndefined();
    expect(page.body).toContain(`src="/app.js?token=${readOnly.token}"`);
    expect(page.body).toContain(`href="/app.css?token=${readOnly.token}"`);
    expect(page.headers["content-security-policy"]).toMatch(/script-src 'self'/);
  });

  it("answers malformed paths and parameters with 400, never 500", async () => {
    const auth = { authorization: `Bearer ${readOnly.token}` };
    expect((await raw(`${readOnly.origin}/api/sessions/%E0%A4%A`, auth)).status).toBe(400);
    const list = JSON.parse((await raw(`${readOnly.origin}/api/sessions`, auth)).body);
    for (const after of ["abc", "1e400", "-1"])
      expect(
        (await raw(`${readOnly.origin}/api/sessions/${list.sessions[0].id}/since?after=${after}`, auth)).status,
      ).toBe(400);
    expect((await raw(`${readOnly.origin}/api/sessions/no-such-session`, auth)).status).toBe(404);
  });

  it("Ctrl-C stops it at once, even with an idle connection open", async () => {
    const s = await studio();
    const socket = connect(Number(new URL(s.url).port), "127.0.0.1");
    socket.on("error", () => {});
    await new Promise((r) => socket.once("connect", r));
    const t0 = performance.now();
    s.child.kill("SIGINT");
    const exit = await new Promise((r) => s.child.once("exit", (code, signal) => r({ code, signal })));
    expect(exit).toEqual({ code: 0, signal: null });
    expect(performance.now() - t0).toBeLessThan(3_000);
    socket.destroy();
  });

  it("is read-only unless started with --allow-approvals", async () => {
    const token = new URL(readOnly.url).searchParams.get("token")!;
    const list = JSON.parse((await raw(`${readOnly.origin}/api/sessions?token=${token}`)).body);
    const r = await raw(
      `${readOnly.origin}/api/sessions/${list.sessions[0].id}/approvals/w1?token=${token}`,
      { "x-keel-studio": "1", "content-type": "application/json" },
      "POST",
    );
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).error).toMatch(/read-only: start it with --allow-approvals/);
  });

  it("listens on the loopback address only", async () => {
    expect(readOnly.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//);
    await expect
      .poll(() => readOnly.stderr())
      .toMatch(/keel: studio on .*sessions\.sqlite \(read-only\); Ctrl-C stops it/);
  });
});

describe.skipIf(missing)("keel studio in a browser", () => {
  let page: Page;

  it("shows a recorded turn: its timeline, which plugin built each section of a request, plugin times, a rejected contribution", async () => {
    // A browser without the token (a fresh profile: no cookie) gets the refusal, not the page.
    const stranger = await browser.newContext();
    const refused = await (await stranger.newPage()).goto(readOnly.origin);
    expect(refused!.status()).toBe(401);
    expect(await refused!.text()).toMatch(/needs the token/);
    await stranger.close();
    const db = join(home, "sessions.sqlite");
    const before = createHash("sha256").update(readFileSync(db)).digest("hex");
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    await page.goto(readOnly.url);
    await page.locator("nav a", { hasText: "please look it up" }).waitFor();
    const turn = page.locator("details.turn").first();
    await expect.poll(() => turn.getAttribute("open")).not.toBeNull();
    await expect.poll(() => turn.locator(".input").textContent()).toBe("please look it up");
    expect(await turn.locator(".answer").textContent()).toBe("It is 42.");
    // The timeline: phases with their plugins' handler times, both model rounds, the tool call.
    expect(await turn.locator('[data-timeline="request"]').count()).toBe(2);
    expect(await turn.locator('[data-timeline="tool"]').textContent()).toContain("tool · lookup");
    const compile = turn.locator('[data-timeline="phase"]', { hasText: "turn.pre_prompt_compile" });
    expect(await compile.locator(".tl-handlers").textContent()).toMatch(/house \d+(\.\d+)? ms · 1 contribution/);
    // A request's manifest: the section and the plugin that contributed it, the tools sent, tokens by part.
    await turn.locator("details.request summary").first().click();
    const request = turn.locator("details.request").first();
    const section = request.locator('tr[data-section="house-rules"]');
    await section.waitFor();
    expect(await section.locator("td").nth(1).textContent()).toBe("House rules");
    expect(await section.locator(".plugin").allTextContents()).toEqual(["house"]);
    expect(await request.locator('[data-table="tools"]').textContent()).toContain("write_note");
    expect(await request.locator('[data-table="tokens"] td').count()).toBe(4);
    expect(await turn.locator('[data-table="plugin-times"]').textContent()).toContain("house");
    const rejected = turn.locator('[data-finding="contribution rejected"]');
    expect(await rejected.textContent()).toMatch(
      /house in turn\.pre_prompt_context prompt_section: not accepted by turn\.pre_prompt_context/,
    );
    await page.screenshot({ path: join(process.env.KEEL_STUDIO_SHOT_DIR ?? root, "studio-turn.png"), fullPage: true });
    // Viewing never writes: the database is byte for byte what keel run left.
    expect(createHash("sha256").update(readFileSync(db)).digest("hex")).toBe(before);
  });

  it("a turn run by another process appears while it runs, and completes, without a reload", async () => {
    await page.evaluate(() => ((globalThis as unknown as { marker: number }).marker = 7));
    const list = await page.locator("nav a").first().getAttribute("data-session");
    const run = runKeel(["run", "--session", list!, "answer slowly"], { cwd: root, env });
    const second = page.locator("details.turn").nth(1);
    await expect.poll(() => second.locator(".input").textContent(), { timeout: 10_000 }).toBe("answer slowly");
    await expect.poll(() => second.locator(".badge").first().textContent(), { timeout: 10_000 }).toBe("running");
    expect(await page.locator(".live-dot").count()).toBe(1);
    writeFileSync(release, "");
    expect((await run).code).toBe(0);
    await expect.poll(() => second.locator(".badge").first().textContent(), { timeout: 10_000 }).toBe("completed");
    expect(await second.locator(".answer").textContent()).toBe("A slow answer.");
    expect(await page.evaluate(() => (globalThis as unknown as { marker: number }).marker)).toBe(7);
  });

  it("answers pending approvals from the page only with --allow-approvals; an answer is final; the turn resumes once all are answered", async () => {
    // Turns paused on two writes, stored by an embedding host (no approve callback: the turn pauses); one of another agent.
    const pausedTurn = async (agentName: string) => {
      const store = new SqliteSessionStore({ path: join(home, "sessions.sqlite") });
      const host = await createAgent({
        name: agentName,
        provider: scriptedProvider([
          {
            toolCalls: [
              { id: "w1", name: "write_note", args: { text: "release is Thursday" } },
              { id: "w2", name: "write_note", args: { text: "ship it" } },
            ],
          },
        ]),
        sideModel: false,
        store,
        // Parallel-safe here, so both calls are asked at once and the turn waits for two answers.
        tools: [{ name: "write_note", description: "Appends a note.", category: "info", execute: () => "unused" }],
        plugins: [
          {
            name: "house",
            version: "1.0.0",
            setup: (ctx) =>
              ctx.on("tool.pre_call", (e) =>
                e.call.name === "write_note"
                  ? { kind: "tool_decision", decision: "ask", reason: "writes are reviewed" }
                  : undefined,
              ),
          },
        ],
      });
      const session = await host.session();
      const paused = await session.run("note the release day");
      expect(paused.verdict.status).toBe("paused");
      expect(paused.pending!.map((p) => p.callId)).toEqual(["w1", "w2"]);
      await host.close();
      store.close();
      return session.id;
    };
    const id = await pausedTurn("studio-test");
    const foreign = await pausedTurn("other-agent");

    // The read-only studio shows it waiting, without buttons.
    await page.goto(`${readOnly.url}#${id}`);
    const waiting = page.locator('[data-pending="w1"]');
    await waiting.waitFor();
    expect(await waiting.textContent()).toContain("read-only: start keel studio --allow-approvals to answer here");
    expect(await waiting.locator("button").count()).toBe(0);

    const answering = await studio(["--allow-approvals", "--config", "agent.config.mjs"]);
    const post = (session: string, call: string, approved: boolean) =>
      fetch(`${answering.origin}/api/sessions/${session}/approvals/${call}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${answering.token}`,
          "x-keel-studio": "1",
          "content-type": "application/json",
        },
        body: JSON.stringify({ approved }),
      });
    // The config's agent answers only its own sessions.
    expect((await post(foreign, "w1", true)).status).toBe(404);
    expect(
      (
        await fetch(`${answering.origin}/api/sessions/${foreign}`, {
          headers: { authorization: `Bearer ${answering.token}` },
        })
      ).status,
    ).toBe(404);

    const p2 = await browser.newPage();
    await p2.goto(`${answering.url}#${id}`);
    const first = p2.locator('[data-pending="w1"]');
    await first.waitFor();
    expect(await first.textContent()).toContain("asked by house");
    await first.locator("button.approve").click();
    await expect.poll(() => p2.locator('[data-pending="w1"]').count()).toBe(0);
    // Answered is final: a stale tab cannot flip it.
    const again = await post(id, "w1", false);
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: string }).error).toMatch(/it was answered already/);
    const second = p2.locator('[data-pending="w2"]');
    await second.locator('input[aria-label="reason"]').fill("not today");
    await second.locator("button.deny").click();
    const turn = p2.locator("details.turn").first();
    await expect.poll(() => turn.locator(".badge").first().textContent(), { timeout: 10_000 }).toBe("completed");
    expect(await turn.locator(".answer").textContent()).toBe("Written.");
    expect(existsSync(notes) && readFileSync(notes, "utf8")).toBe("release is Thursday\n");
    expect(await p2.locator("[data-pending]").count()).toBe(0);
    // Answered approvals stay in the turn's history: why it was asked, who answered (the studio's user), when, and why.
    const who = `studio:${userInfo().username}`;
    const approved = turn.locator('[data-table="approvals"] tr[data-approval="w1"]');
    expect(await approved.locator("[data-answerer]").textContent()).toBe(who);
    expect(await approved.locator("[data-ask-reason]").textContent()).toBe("writes are reviewed");
    expect(await approved.locator(".badge").first().textContent()).toBe("approved");
    const denied = turn.locator('[data-table="approvals"] tr[data-approval="w2"]');
    expect(await denied.locator("[data-answerer]").textContent()).toBe(who);
    expect(await denied.locator(".badge").first().textContent()).toBe("denied");
    expect(await denied.locator("[data-answer-reason]").textContent()).toBe("not today");
    // And each call with what it was given and what it returned.
    expect(await turn.locator('tr[data-call="w1"] [data-result]').textContent()).toBe("wrote release is Thursday");
    expect(await turn.locator('tr[data-call="w2"] [data-args]').textContent()).toBe('{\n  "text": "ship it"\n}');
    expect((await post(id, "w2", true)).status).toBe(409);
    await p2.close();
  });

  it("eight tabs on one studio all stay live (no request holds a connection)", async () => {
    const context = await browser.newContext();
    const tabs = await Promise.all(Array.from({ length: 8 }, () => context.newPage()));
    await Promise.all(tabs.map((t) => t.goto(readOnly.url)));
    for (const t of tabs) await t.locator("details.turn").first().waitFor({ timeout: 10_000 });
    // A turn run now shows in the last tab too.
    const list = await tabs[7]!.locator("nav a").first().getAttribute("data-session");
    const before = await tabs[7]!.locator("details.turn").count();
    expect((await runKeel(["run", "--session", list!, "look it up again"], { cwd: root, env })).code).toBe(0);
    await expect.poll(() => tabs[7]!.locator("details.turn").count(), { timeout: 10_000 }).toBe(before + 1);
    await context.close();
  });

  it("a routed request shows the pool member it went to, the plugin that routed it and why", async () => {
    const store = new SqliteSessionStore({ path: join(home, "sessions.sqlite") });
    const cheap = scriptedProvider([{ text: "Routed." }]);
    const host = await createAgent({
      name: "studio-test",
      provider: scriptedProvider([]),
      pool: {
        fast: { provider: { id: "openai:gpt-4.1-mini", stream: (r, o) => cheap.stream(r, o) }, tags: ["cheap"] },
      },
      sideModel: false,
      store,
      plugins: [
        {
          name: "picker",
          version: "1.0.0",
          setup: (ctx) =>
            ctx.on("round.pre_request", () => ({
              kind: "request_options",
              options: { route: { model: "fast", reason: "a short question" } },
            })),
        },
      ],
    });
    const session = await host.session();
    expect((await session.run("route me")).text).toBe("Routed.");
    await host.close();
    store.close();
    const view = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    await view.goto(`${readOnly.url}#${session.id}`);
    const turn = view.locator("details.turn").first();
    await expect.poll(() => turn.locator(".input").textContent()).toBe("route me");
    await turn.locator("details.request summary").first().click();
    const route = turn.locator('details.request [data-route="fast"]');
    await route.waitFor();
    expect(await route.textContent()).toBe("routed to fast (openai:gpt-4.1-mini) by picker: a short question");
    await view.close();
  });
});
