/**
 * The chat page when the server refuses a message (Debian's Chromium, the http example's
 * offline model): a message sent while a deploy waits for approval is a 409. The page shows the
 * error, gives the message back to the input box (nothing the user typed is lost), keeps the
 * input usable, and Approve still resumes the waiting turn to its end.
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { browserMissing, launchChromium } from "../../packages/cli/test/support/browser.ts";
import { offlineModel } from "../http-server/offline-model.ts";
import { startServer } from "../http-server/server.ts";
import { buildChatPage } from "./build-page.ts";

describe.skipIf(browserMissing())("examples/chat-ui: a refused message", () => {
  let browser: Browser;
  let server: Awaited<ReturnType<typeof startServer>>;
  const home = mkdtempSync(join(tmpdir(), "keel-chat-ui-refused-"));

  beforeAll(async () => {
    const outDir = await buildChatPage();
    server = await startServer({ home, provider: offlineModel, port: 0, stepMs: 30, worker: false, staticDir: outDir });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it("a message sent while a deploy waits is refused, given back, and Approve still resumes the turn", async () => {
    const page = await browser.newPage();
    await page.goto(server.url);
    const box = page.getByLabel("Message");
    await box.fill("please deploy v1.4.2");
    await page.getByRole("button", { name: "Send" }).click();
    const tool = page.locator('.tool[data-tool="deploy"]');
    await tool.locator("button", { hasText: "Approve" }).waitFor();
    await page.locator('#status[data-status="ready"]').waitFor();

    await box.fill("and what is live now?");
    await page.getByRole("button", { name: "Send" }).click();
    // The person is told what to do, in words (not a code).
    await page
      .locator("p.error", { hasText: '"deploy" is waiting for your approval: approve or deny it first' })
      .waitFor();
    expect(await box.isEnabled()).toBe(true);
    expect(await box.inputValue()).toBe("and what is live now?");
    expect(await page.locator(".user", { hasText: "and what is live now?" }).count()).toBe(0);
    expect(existsSync(join(home, "deployments.log"))).toBe(false);

    await tool.locator("button", { hasText: "Approve" }).click();
    await page.locator('.tool[data-state="output-available"]').waitFor({ timeout: 15_000 });
    await page.locator('#status[data-status="ready"]').waitFor();
    expect(readFileSync(join(home, "deployments.log"), "utf8")).toMatch(/ v1\.4\.2 by /);
  }, 60_000);
});
