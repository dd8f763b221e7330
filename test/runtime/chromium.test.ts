/**
 * The smallest whole agent (agent-entry.ts) runs a full tool turn in a page in Chromium, and the
 * host's scenarios off Node (host-entry.ts: a child session, an approval, a durable job,
 * steering, storage, `store: "sqlite"` refused) run there too: the
 * esbuild bundle (browser platform, no Node module, no polyfill) served with a tiny page from
 * 127.0.0.1, runOnce called in the page with page.evaluate. Debian's chromium through
 * playwright-core, as the other browser tests (scripts/ensure-browser.ts installs it).
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { browserMissing, launchChromium } from "../../packages/cli/test/support/browser.ts";
import { bundle, placesInBundle } from "./support/bundle.ts";
import { HOST_ENTRY, HOST_SCENARIOS } from "./support/host-scenarios.ts";
import { AGENT_ENTRY, expectFullToolTurn } from "./support/outcome.ts";
import { type PageSite, servePage } from "./support/page.ts";

const missing = browserMissing();

describe.skipIf(missing)("the smallest agent in a page in Chromium", () => {
  let site: PageSite | undefined;
  let browser: Browser | undefined;
  let agentJs = "";
  const pageErrors: string[] = [];
  // Opened once; a failure to bundle or load is thrown by the test (vitest would call it skipped).
  let opened: Promise<Page>;

  async function open(): Promise<Page> {
    // runOnce() is the smallest agent's turn; runOnce(name) the host's scenario of that name.
    agentJs = await bundle(
      `import { runOnce as once } from ${JSON.stringify(AGENT_ENTRY)};
import { runScenario } from ${JSON.stringify(HOST_ENTRY)};
export const runOnce = (name) => (name ? runScenario(name) : once());
`,
      import.meta.dirname,
      "page-glue.ts",
    );
    site = await servePage(agentJs);
    browser = await launchChromium();
    const page = await browser.newPage();
    page.on("pageerror", (e) => pageErrors.push(e.stack ?? e.message));
    page.on("console", (m) => {
      if (m.type() === "error") pageErrors.push(m.text());
    });
    await page.goto(site.url);
    await page.locator("body[data-ready]").waitFor({ state: "attached" });
    const loadError = await page.evaluate(() => (globalThis as { loadError?: string }).loadError);
    if (loadError !== undefined)
      throw new Error(
        `The page could not load the agent's bundle: ${loadError}${placesInBundle(agentJs, loadError, "agent.js")}`,
      );
    return page;
  }

  beforeAll(async () => {
    opened = open();
    await opened.catch(() => undefined);
  });
  afterAll(async () => {
    await browser?.close();
    await site?.close();
  });

  it("runs a whole tool turn: the tool ran, the plugin's section was in the prompt, the answer has the result", async () => {
    const page = await opened;
    const outcome = await page
      .evaluate(() => (globalThis as unknown as { runOnce: () => Promise<unknown> }).runOnce())
      .catch((err: Error) => {
        throw new Error(
          `runOnce failed in the page: ${err.message}${placesInBundle(agentJs, err.message, "agent.js")}`,
        );
      });
    expectFullToolTurn(outcome);
    // The page is a plain browser context: no Node globals were there to lean on.
    expect(await page.evaluate(() => typeof (globalThis as { process?: unknown }).process)).toBe("undefined");
    expect(pageErrors).toEqual([]);
  });

  for (const scenario of HOST_SCENARIOS)
    it(`the host: ${scenario.title}`, async () => {
      const page = await opened;
      scenario.check(
        await page.evaluate(
          (name) => (globalThis as unknown as { runOnce: (name: string) => Promise<unknown> }).runOnce(name),
          scenario.name,
        ),
      );
      expect(pageErrors).toEqual([]);
    });
});
