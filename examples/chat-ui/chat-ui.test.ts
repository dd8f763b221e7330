/**
 * The chat page in Debian's Chromium (playwright-core): built with vite's build() into a temp
 * dir, served by the http example (offline model) with /api/chat. A request to deploy streams
 * text, shows the call waiting for approval with Approve / Deny, Approve resumes the turn, it
 * finishes, and the deploy is in deployments.log; Deny shows the call denied and deploys nothing.
 * A reload keeps the chat (its id is in the URL's hash): the waiting deploy shows Approve again,
 * and a reload while the approved deploy runs rejoins it to its end; it is deployed once.
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { browserMissing, launchChromium } from "../../packages/cli/test/support/browser.ts";
import { offlineModel, offlineModelWith } from "../http-server/offline-model.ts";
import { startServer } from "../http-server/server.ts";
import { buildChatPage } from "./build-page.ts";

const missing = browserMissing();

describe.skipIf(missing)("examples/chat-ui: useChat in a browser", () => {
  let browser: Browser;
  let server: Awaited<ReturnType<typeof startServer>>;
  let outDir: string;
  const home = mkdtempSync(join(tmpdir(), "keel-chat-ui-"));

  beforeAll(async () => {
    outDir = await buildChatPage();
    server = await startServer({
      home,
      provider: offlineModelWith({ wordMs: 40 }),
      port: 0,
      stepMs: 30,
      worker: false,
      staticDir: outDir,
    });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it("streams text, shows the approval, Approve resumes the turn to its end, the deploy is recorded", async () => {
    const page = await browser.newPage();
    const failed: string[] = [];
    page.on("pageerror", (e) => failed.push(e.message));
    await page.goto(server.url);
    // Every text the assistant's paragraphs show, as they change: streamed text shows more than once.
    await page.evaluate(() => {
      const w = globalThis as unknown as { seen: string[]; MutationObserver: any; document: any };
      w.seen = [];
      new w.MutationObserver(() => {
        for (const p of w.document.querySelectorAll(".assistant .text")) {
          const t = p.textContent as string;
          if (t && w.seen.at(-1) !== t) w.seen.push(t);
        }
      }).observe(w.document.body, { subtree: true, childList: true, characterData: true });
    });

    await page.getByLabel("Message").fill("please deploy v1.4.2");
    await page.getByRole("button", { name: "Send" }).click();
    await page.locator(".assistant .text", { hasText: "Deploying v1.4.2." }).waitFor();
    const tool = page.locator('.tool[data-tool="deploy"]');
    await tool.locator("button", { hasText: "Approve" }).waitFor();
    expect(await tool.getAttribute("data-state")).toBe("approval-requested");
    expect(await tool.textContent()).toContain('deploy({"version":"v1.4.2"})');
    expect(await tool.locator("button", { hasText: "Deny" }).count()).toBe(1);
    expect(existsSync(join(home, "deployments.log"))).toBe(false);

    await tool.locator("button", { hasText: "Approve" }).click();
    await page.locator('.tool[data-state="output-available"]').waitFor();
    await page.locator(".assistant .text", { hasText: "Done." }).waitFor();
    await page.locator('#status[data-status="ready"]').waitFor();
    expect(await page.locator(".tool .output").textContent()).toContain("v1.4.2 is live");
    expect(readFileSync(join(home, "deployments.log"), "utf8")).toMatch(/ v1\.4\.2 by /);

    const seen = (await page.evaluate(() => (globalThis as unknown as { seen: string[] }).seen)) as string[];
    // The text arrived in pieces: a prefix of an answer was on screen before all of it (40 ms
    // between words, so even a busy page paints a piece before the whole).
    const answers = [seen.findLast((t) => t.startsWith("Deploying"))!, seen.findLast((t) => t.startsWith("Done."))!];
    expect(answers.every((a) => a !== undefined)).toBe(true);
    expect(seen.some((t) => t.length > 0 && answers.some((a) => t !== a && a.startsWith(t)))).toBe(true);
    expect(failed).toEqual([]);
  }, 60_000);

  it("Deny: the call is shown denied, the turn finishes, nothing is deployed", async () => {
    const page = await browser.newPage();
    await page.goto(server.url);
    await page.getByLabel("Message").fill("deploy v9.9.9");
    await page.getByRole("button", { name: "Send" }).click();
    const tool = page.locator('.tool[data-tool="deploy"]');
    await tool.locator("button", { hasText: "Deny" }).click();
    await page.locator('.tool[data-state="output-denied"]').waitFor();
    await page.locator(".assistant .text", { hasText: "✗ deploy" }).waitFor();
    await page.locator('#status[data-status="ready"]').waitFor();
    expect(await tool.locator("button").count()).toBe(0);
    expect(readFileSync(join(home, "deployments.log"), "utf8")).not.toContain("v9.9.9");
  }, 60_000);

  it("a turn stopped by limits.maxCostUsd shows the stop and its code in the message, and the page stays usable", async () => {
    const limited = await startServer({
      home: mkdtempSync(join(tmpdir(), "keel-chat-ui-budget-")),
      provider: offlineModel,
      port: 0,
      worker: false,
      staticDir: outDir,
      limits: { maxCostUsd: 0.01 },
    });
    try {
      const page = await browser.newPage();
      await page.goto(limited.url);
      for (const text of ["deploy v1.4.2", "status"]) {
        await page.getByLabel("Message").fill(text);
        await page.getByRole("button", { name: "Send" }).click();
        await page.locator('#status[data-status="ready"]').waitFor();
      }
      const said = await page.locator(".assistant .text").allTextContents();
      expect(said).toHaveLength(2);
      for (const t of said) expect(t).toMatch(/^Stopped: This turn spent .* \(KEEL_BUDGET_EXCEEDED\)$/s);
      expect(await page.locator(".error").count()).toBe(0);
    } finally {
      await limited.close();
    }
  }, 60_000);

  it("a reload keeps the chat: the waiting deploy shows Approve again; a reload mid-deploy rejoins it to its end; deployed once", async () => {
    // Deploy steps of 1.5 s: the page reloads while the approved deploy runs.
    const slowHome = mkdtempSync(join(tmpdir(), "keel-chat-ui-reload-"));
    const slow = await startServer({
      home: slowHome,
      provider: offlineModel,
      port: 0,
      stepMs: 1500,
      worker: false,
      staticDir: outDir,
    });
    try {
      const page = await browser.newPage();
      const failed: string[] = [];
      page.on("pageerror", (e) => failed.push(e.message));
      await page.goto(slow.url);
      await page.getByLabel("Message").fill("please deploy v2.0.0");
      await page.getByRole("button", { name: "Send" }).click();
      const tool = page.locator('.tool[data-tool="deploy"]');
      await tool.locator("button", { hasText: "Approve" }).waitFor();
      await page.locator('#status[data-status="ready"]').waitFor();
      const chatUrl = page.url();
      expect(new URL(chatUrl).hash.length).toBeGreaterThan(1);

      await page.reload();
      expect(page.url()).toBe(chatUrl);
      await tool.locator("button", { hasText: "Approve" }).waitFor();
      expect(await page.locator(".user", { hasText: "please deploy v2.0.0" }).count()).toBe(1);
      expect(await page.locator(".assistant .text", { hasText: "Deploying v2.0.0." }).count()).toBe(1);
      await tool.locator("button", { hasText: "Approve" }).click();
      await page.locator(".progress", { hasText: "v2.0.0" }).waitFor();

      // Mid-deploy: the page goes away and comes back; the turn ran on and is rejoined.
      await page.reload();
      await page.locator('.tool[data-state="output-available"]').waitFor({ timeout: 30_000 });
      await page.locator(".assistant .text", { hasText: "Done." }).waitFor();
      await page.locator('#status[data-status="ready"]').waitFor();
      expect(await page.locator(".tool .output").textContent()).toContain("v2.0.0 is live");
      expect(await page.locator(".user").count()).toBe(1);
      expect(await page.locator("button", { hasText: "Approve" }).count()).toBe(0);
      const deployed = readFileSync(join(slowHome, "deployments.log"), "utf8").trim().split("\n");
      expect(deployed).toHaveLength(1);
      expect(deployed[0]).toMatch(/ v2\.0\.0 by /);
      expect(failed).toEqual([]);
    } finally {
      await slow.close();
    }
  }, 90_000);
});
