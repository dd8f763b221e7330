/** The CLI's own version, read from its package.json (the same file from src/ and dist/). */
import { readFileSync } from "node:fs";

/** Contract: the `version` field of @keel/cli's package.json; "unknown" when it cannot be read. */
export function cliVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version?: unknown };
    return typeof pkg.version === "string" ? pkg.version : "unknown";
  } catch {
    return "unknown";
  }
}
