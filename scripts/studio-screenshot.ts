// Regenerates docs/studio.png, the README's picture of `keel studio`: a real turn of the
// full-stack example (offline), one request expanded. Needs chromium (apt-get install chromium).
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const repo = join(import.meta.dirname, "..");
const keel = join(repo, "packages", "cli", "bin", "keel.js");
const home = mkdtempSync(join(tmpdir(), "keel-shot-"));
const config = join(repo, "examples", "full-stack", "agent.config.ts");
const env = { ...process.env, KEEL_OFFLINE: "1" };
try {
  const run = spawnSync(process.execPath, [keel, "run", "--config", config, "--home", home, "Remember that release day is Thursday, then tell me what is left in TODO.md"], { env, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`keel run failed: ${run.stderr}`);
  const studio = spawn(process.execPath, [keel, "studio", "--config", config, "--home", home], { env, stdio: ["ignore", "pipe", "inherit"] });
  const url = await new Promise<string>((resolve) => {
    let out = "";
    studio.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /^(http:\S+)\n/m.exec(out);
      if (m) resolve(m[1]!);
    });
  });
  const which = spawnSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).stdout.trim();
  const browser = await chromium.launch({ executablePath: which, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
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
    studio.kill("SIGINT");
  }
} finally {
  rmSync(home, { recursive: true, force: true });
}
