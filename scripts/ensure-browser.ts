// Part of `pnpm test`: the studio's browser tests drive Debian's chromium (playwright-core cannot
// download its own browser here). Installs it with apt-get when it is missing and this user can;
// otherwise says how, and the browser tests skip with that message (they fail instead under CI=1).
import { execFileSync, spawnSync } from "node:child_process";
import { chromiumPath as found } from "../packages/cli/test/support/browser.ts";

if (!found() && process.env.KEEL_SKIP_BROWSER_SETUP !== "1") {
  const root = process.getuid?.() === 0;
  const apt = spawnSync("sh", ["-c", "command -v apt-get"]).status === 0;
  if (root && apt) {
    process.stderr.write("keel tests: installing Debian's chromium for the studio's browser tests (apt-get, once)…\n");
    const install = () =>
      spawnSync("apt-get", ["install", "-y", "--no-install-recommends", "chromium"], {
        stdio: ["ignore", "ignore", "inherit"],
        env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
      }).status === 0;
    if (!install()) {
      try {
        execFileSync("apt-get", ["update"], { stdio: ["ignore", "ignore", "inherit"] });
      } catch {
        // reported below if the install still fails
      }
      install();
    }
  }
  if (!found())
    process.stderr.write(
      `keel tests: chromium is not installed${root ? " and apt-get could not install it" : ""}; the studio's browser tests will be skipped. Install it (sudo apt-get install chromium) to run them.\n`,
    );
}
