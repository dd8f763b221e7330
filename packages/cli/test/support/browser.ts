/** Debian's chromium driven by playwright-core (its own browser download cannot work here). */
import { spawnSync } from "node:child_process";
import { chromium, type Browser } from "playwright-core";

/** The chromium binary on PATH, or undefined. */
export function chromiumPath(): string | undefined {
  for (const name of ["chromium", "chromium-browser"]) {
    const r = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return undefined;
}

/** Why browser tests cannot run, or undefined when they can. Under CI=1 a missing browser is a failure, not a skip. */
export function browserMissing(): string | undefined {
  if (chromiumPath()) return undefined;
  const why =
    "chromium is not installed (scripts/ensure-browser.ts installs it with apt-get when run as root; or: sudo apt-get install chromium)";
  if (process.env.CI) throw new Error(`Browser tests cannot be skipped under CI: ${why}.`);
  console.warn(`Skipping the studio's browser tests: ${why}.`);
  return why;
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath()!,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}
