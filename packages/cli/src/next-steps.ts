/** What a newcomer can try after the first `keel run` in a home (printed once per home, on stderr). */

/** How the command was invoked, to repeat it. */
export interface NextStepsInput {
  /** The home the run wrote to. */
  home: string;
  /** `--config` and `--home` as given, repeated in the suggestions (empty when not given). */
  flags: string[];
  env: NodeJS.ProcessEnv;
}

/**
 * The lines printed after the first turn in a fresh home: where the session was stored, then
 * `keel chat -c`, `keel run -c`, `keel init`, `keel help` and the docs, each with the flags the
 * run was given. Inside a package script (`pnpm start`) the command is spelled `pnpm keel`.
 * Contract: ends with a newline; for stderr.
 */
export function nextSteps(input: NextStepsInput): string {
  const runner = input.env.npm_lifecycle_event
    ? /pnpm/.test(input.env.npm_execpath ?? "")
      ? "pnpm keel"
      : "npx keel"
    : "keel";
  const same = input.flags.length ? ` ${input.flags.map(shellWord).join(" ")}` : "";
  const steps: Array<[string, string]> = [
    ["talk on in this session", `${runner} chat -c${same}`],
    ["one more turn in it", `${runner} run -c${same} "…"`],
    ["pipe in context", `git diff | ${runner} run${same} "review this"`],
    ["your own agent", `${runner} init`],
    ["options and examples", `${runner} help run`],
  ];
  const width = Math.max(...steps.map(([label]) => label.length)) + 2;
  return [
    `keel: this was the first session in ${input.home} (KEEL_HOME or --home choose another). To go on (-c continues the most recent session):`,
    ...steps.map(([label, cmd]) => `  ${`${label}:`.padEnd(width)}${cmd}`),
    "  docs: the @keel/cli README (CLI conventions, exit codes) and docs/plugins.md (writing a plugin)",
    "",
  ].join("\n");
}

/** `word` as one shell word. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/u.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
