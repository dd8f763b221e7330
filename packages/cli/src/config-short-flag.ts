/**
 * `-c` is `--continue` (as in pi and claude); it used to be the short form of `--config`. A config
 * path after `-c` is refused with a pointer to `--config`, so an old habit is not silently read
 * as the input of a turn in a continued session.
 */
import { KeelError } from "@keel/kernel";

/** A single word ending like a config file: agent.config.ts, ./x/package.json, keel.mjs. */
const CONFIG_LIKE = /^[^\s]+\.(?:[cm]?[jt]s|json)$/u;

/** Contract: throws KEEL_CLI_USAGE (exit 2) when `-c` (or `-c=`, `-cPATH`) is followed by a config-like path; arguments after `--` are left alone. */
export function refuseConfigAfterShortC(argv: readonly string[]): void {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--") return;
    const path = a === "-c" ? argv[i + 1] : /^-c=?./u.test(a) ? a.replace(/^-c=?/u, "") : undefined;
    if (path !== undefined && CONFIG_LIKE.test(path)) {
      throw new KeelError(
        "KEEL_CLI_USAGE",
        `-c is --continue (continue the most recent session); give the config with --config ${path}.`,
        { path: "-c" },
      );
    }
  }
}
