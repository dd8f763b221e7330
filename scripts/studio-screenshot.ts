// Regenerates docs/studio.png, the picture of `keel studio` in docs/config.md: a real turn of the
// full-stack example (offline), one request expanded. Needs chromium (apt-get install chromium).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launchChromium } from "../packages/cli/test/support/browser.ts";
import { startStudioProcess } from "../packages/cli/test/support/studio.ts";

const repo = join(import.meta.dirname, "..");
const keel = join(repo, "packages", "cli", "bin", "keel.js");
const home = mkdtempSync(join(tmpdir(), "keel-shot-"));
const config = join(repo, "examples", "full-stack", "agent.config.ts");
const env = { ...process.env, KEEL_OFFLINE: "1" };
try {
  const run = spawnSync(
    process.execPath,
    [
      keel,
      "run",
      "--config",
      config,
      "--home",
      home,
      "Remember that release day is Thursday, then tell me what is left in TODO.md",
    ],
    { env, encoding: "utf8" },
  );
  if (run.status !== 0) throw new Error(`keel run failed: ${run.stderr}`);
  const studio = await startStudioProcess(["--config", config, "--home", home], { cwd: repo, env });
  const url = studio.url;
  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1440, height: 1180 }, deviceScaleFactor: 1 });
    await page.goto(url);
    await page.locator("details.turn[open]").waitFor();
    await page.locator("details.request > summary").first().click();
    await page.locator('details.request[open] [data-table="sections"]').waitFor();
    await page.screenshot({ path: join(repo, "docs", "studio.png") });
    console.log("wrote docs/studio.png");
  } finally {
    await browser.close();
    studio.stop();
  }
} finally {
  rmSync(home, { recursive: true, force: true });
}
