/**
 * Derive docs/phases.md and docs/errors.md from the kernel's tables (PHASES, ERROR_CODES).
 * `node scripts/gen-docs.ts` writes them; test/docs.test.ts fails when they are stale.
 */
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_TIMEOUTS, ERROR_CODES, PHASE_NAMES, PHASES } from "../packages/kernel/src/index.ts";

export function phasesDoc(): string {
  const rows = PHASE_NAMES.map((name) => {
    const p = PHASES[name];
    return `| \`${name}\` | ${p.scope} | ${p.kind} | ${p.accepts.map((k) => `\`${k}\``).join(", ")} | ${p.failure} | ${p.runs} |`;
  });
  return [
    "# Phases",
    "",
    "Generated from `PHASES` in `packages/kernel/src/phases.ts` by `node scripts/gen-docs.ts`; do not edit by hand.",
    "",
    "| phase | scope | kind | accepts | default failure | runs |",
    "|---|---|---|---|---|---|",
    ...rows,
    "",
    "Kinds: `collect` — handlers start in resolved order (a handler with `after`/`before` edges waits for those",
    "plugins' handlers), and their contributions are merged in subscription order once all have settled.",
    "`waterfall` — handlers run one at a time and each sees what the previous ones contributed.",
    "",
    `Default handler timeouts by await policy: ${Object.entries(DEFAULT_TIMEOUTS).map(([k, v]) => `${k} ${v} ms`).join(", ")}.`,
    "",
  ].join("\n");
}

export function errorsDoc(): string {
  return [
    "# Error codes",
    "",
    "Generated from `ERROR_CODES` in `packages/kernel/src/errors.ts` by `node scripts/gen-docs.ts`; do not edit by hand.",
    "Every `KeelError` message is `CODE (plugin, phase, …): the specific problem. What to do.`",
    "",
    "| code | what to do |",
    "|---|---|",
    ...Object.entries(ERROR_CODES).map(([code, text]) => `| \`${code}\` | ${text.replaceAll("|", "\\|")} |`),
    "",
  ].join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const docs = join(dirname(fileURLToPath(import.meta.url)), "..", "docs");
  writeFileSync(join(docs, "phases.md"), phasesDoc());
  writeFileSync(join(docs, "errors.md"), errorsDoc());
  console.log("wrote docs/phases.md and docs/errors.md");
}
