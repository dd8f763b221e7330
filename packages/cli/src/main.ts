/**
 * The `keel` command. Exit codes: 0 success, 1 the turn failed, 2 bad usage or config, 3 the eval gate failed,
 * 130 interrupted (SIGINT), 141 stdout's reader went away, 143 terminated (SIGTERM).
 */
import { parseArgs } from "node:util";
import { createInterface } from "node:readline";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import {
  KeelError,
  PHASES,
  isPhaseName,
  defaultKeelHome,
  errorMessage,
  guardProcess,
  isKeelError,
} from "@keel/agent/node";
import { MemorySessionStore } from "@keel/testkit";
import { SqliteSessionStore, defaultSessionDbPath } from "@keel/store-sqlite";
import { countOf, didYouMean, headOf } from "@keel/text";
import type { Agent, AgentStorage, KeelConfig, KeelPlugin, Session, SessionStore } from "@keel/agent";
import { chooseDatabase, postgresSessionStore } from "./database.ts";
import type { Database } from "./database.ts";
import { resolvePlugins } from "./plugins.ts";
import { buildAgent, validateConfig } from "./build-agent.ts";
import { formatInspect, inspectJson } from "./inspect.ts";
import { configDir, loadConfig } from "./load-config.ts";
import type { LoadedConfig } from "./load-config.ts";
import { closeWithin, EXIT_INTERRUPTED, EXIT_TERMINATED, exitNow, onSignal, ownSignals, stopSignal } from "./exit.ts";
import { renderer, terminalColumns, wrap } from "./render.ts";
import { onReaderGone, statusAfterOutput } from "./stdio.ts";
import type { CliEnv } from "./stdio.ts";
import { checkHome } from "./home.ts";
import { thrownText } from "./guard.ts";
import { COMMAND_HELP, commandHelp, overviewHelp } from "./help.ts";
import { strictCollector, strictFromEnv } from "./strict.ts";
import { cliVersion } from "./version.ts";
import { readRunInput, stdinWaitMs } from "./read-input.ts";
import { modelsFromFlags } from "./model-flag.ts";
import { refuseConfigAfterShortC } from "./config-short-flag.ts";
import { nextSteps } from "./next-steps.ts";
import type { PhaseInfo } from "./render.ts";
import { askInterface, askMode, policyAnswerer, settle, terminalAnswerer } from "./approvals.ts";
import type { Answerer } from "./approvals.ts";

export { processIo } from "./stdio.ts";

/** Exit statuses. Contract: stable across versions. */
export const EXIT = {
  ok: 0,
  turnFailed: 1,
  usage: 2,
  /** `keel eval`: the run finished but its gate failed (a case did not pass, --fail-under, --max-regressions). */
  gateFailed: 3,
  interrupted: EXIT_INTERRUPTED,
  terminated: EXIT_TERMINATED,
} as const;
export { exitWhenDone } from "./exit.ts";

export type { CliEnv } from "./stdio.ts";

/** Run the command line `argv` (without node and the script). Contract: returns the exit status, never throws. */
export async function main(argv: readonly string[], io: CliEnv): Promise<number> {
  try {
    return statusAfterOutput(io, await dispatch(argv, io));
  } catch (err) {
    io.err(`${isKeelError(err) ? err.message : `keel: ${thrownText(err)}`}\n`);
    return isKeelError(err) &&
      ![
        "KEEL_PROVIDER_ERROR",
        "KEEL_STORE_FAILED",
        "KEEL_SESSION_BUSY",
        "KEEL_STORE_READ_ONLY",
        "KEEL_STORE_CORRUPT",
      ].includes(err.code)
      ? EXIT.usage
      : EXIT.turnFailed;
  }
}

function usage(problem: string): KeelError {
  return new KeelError("KEEL_CLI_USAGE", problem);
}

const CLI_OPTIONS = {
  config: { type: "string" },
  continue: { type: "boolean", short: "c" },
  session: { type: "string", short: "s" },
  new: { type: "boolean" },
  json: { type: "boolean" },
  offline: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean", short: "v" },
  strict: { type: "boolean" },
  home: { type: "string" },
  wait: { type: "boolean" },
  plugin: { type: "string" },
  force: { type: "boolean" },
  model: { type: "string", multiple: true },
  ask: { type: "string" },
  port: { type: "string" },
  turns: { type: "string" },
  every: { type: "string" },
  budget: { type: "string" },
  "allow-approvals": { type: "boolean" },
  mode: { type: "string" },
  once: { type: "boolean" },
  concurrency: { type: "string" },
  tools: { type: "string" },
  keep: { type: "boolean" },
  last: { type: "string" },
  "include-evals": { type: "boolean" },
  since: { type: "string" },
  until: { type: "string" },
  name: { type: "string" },
  baseline: { type: "string" },
  "fail-under": { type: "string" },
  "max-regressions": { type: "string" },
  junit: { type: "string" },
  "json-file": { type: "string" },
  resume: { type: "boolean" },
  to: { type: "string" },
  mcp: { type: "boolean" },
  a2a: { type: "boolean" },
  http: { type: "boolean" },
  host: { type: "string" },
  token: { type: "string" },
} as const;

const EVAL_ONLY = ["name", "baseline", "fail-under", "max-regressions", "junit", "resume", "to"] as const;

/**
 * `keel eval DATASET --json FILE` writes the report to FILE, where every other command's --json
 * is a switch: the word after it becomes --json-file's value (and `--resume=EXP` the positional
 * `--resume EXP`), before parsing. `keel eval list|show --json` keep the switch.
 */
function evalArgv(argv: readonly string[]): readonly string[] {
  // The positionals, skipping the values of options that take one (`--config x eval …`).
  const options = CLI_OPTIONS as Record<string, { type: string; short?: string }>;
  const words: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith("-") || a === "-") words.push(a);
    else if (!a.includes("=")) {
      const spec = a.startsWith("--")
        ? options[a.slice(2)]
        : Object.values(options).find((o) => a.length === 2 && o.short === a[1]);
      if (spec?.type === "string") i++;
    }
  }
  if (words[0] !== "eval" || ["list", "show", "add"].includes(words[1] ?? "")) return argv;
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a.startsWith("--json=")) out.push("--json-file", a.slice(7));
    else if (a === "--json" && argv[i + 1] !== undefined && (!argv[i + 1]!.startsWith("-") || argv[i + 1] === "-"))
      out.push("--json-file", argv[++i]!);
    else if (a.startsWith("--resume=")) out.push("--resume", a.slice(9));
    else out.push(a);
  }
  return out;
}

async function dispatch(argv: readonly string[], io: CliEnv): Promise<number> {
  refuseConfigAfterShortC(argv);
  let parsed: ReturnType<
    typeof parseArgs<{ args: string[]; allowPositionals: true; strict: true; options: typeof CLI_OPTIONS }>
  >;
  try {
    parsed = parseArgs({ args: [...evalArgv(argv)], allowPositionals: true, strict: true, options: CLI_OPTIONS });
  } catch (err) {
    throw usage(errorMessage(err));
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.version) {
    io.out(`${cliVersion()}\n`);
    return EXIT.ok;
  }
  if (command === "help" || (values.help && command)) {
    const topic = command === "help" ? rest[0] : command;
    if (topic === undefined) return (io.out(overviewHelp()), EXIT.ok);
    const text = commandHelp(topic);
    if (text === undefined) throw usage(`No help for "${topic}": it is not a command (keel --help lists them).`);
    io.out(text);
    return EXIT.ok;
  }
  if (values.help || !command) {
    // `keel` alone is a usage error: the overview goes to stderr, stdout stays empty.
    (values.help ? io.out : io.err)(overviewHelp());
    return values.help ? EXIT.ok : EXIT.usage;
  }
  if (values.session && values.new) throw usage("--session and --new exclude each other.");
  if (values.continue && (values.session || values.new))
    throw usage(`--continue picks the most recent session; it excludes ${values.session ? "--session" : "--new"}.`);
  if (values.wait && !values.session)
    throw usage("--wait waits for a session held by another process: give it --session ID.");
  // --home is a path from here (the config's `home` is from the config's folder); what was typed is repeated in hints.
  const typed = [
    ...(values.config ? ["--config", values.config] : []),
    ...(values.home ? ["--home", values.home] : []),
  ];
  if (values.mode !== undefined && command !== "run" && command !== "chat")
    throw usage("--mode is an option of keel run and keel chat.");
  if (values.mode !== undefined && values.mode !== "agent" && values.mode !== "chat")
    throw usage(`--mode takes agent (tools) or chat (no tools), not "${headOf(values.mode, 40)}".`);
  if ((values.turns !== undefined || values.every !== undefined || values.budget !== undefined) && command !== "goal")
    throw usage(
      `${values.turns !== undefined ? "--turns" : values.every !== undefined ? "--every" : "--budget"} is an option of keel goal.`,
    );
  if (values.once && command !== "worker") throw usage("--once is an option of keel worker.");
  if (values.concurrency !== undefined && command !== "worker" && command !== "eval")
    throw usage("--concurrency is an option of keel worker and keel eval.");
  for (const flag of EVAL_ONLY)
    if (values[flag] !== undefined && command !== "eval") throw usage(`--${flag} is an option of keel eval.`);
  const replayFlag =
    values.tools !== undefined && command !== "eval"
      ? "--tools"
      : values.keep
        ? "--keep"
        : values.last
          ? "--last"
          : values["include-evals"]
            ? "--include-evals"
            : values.since !== undefined
              ? "--since"
              : values.until !== undefined
                ? "--until"
                : undefined;
  if (replayFlag && command !== "replay")
    throw usage(`${replayFlag} is an option of keel replay${replayFlag === "--tools" ? " and keel eval" : ""}.`);
  if (values.port !== undefined && command !== "studio" && command !== "serve")
    throw usage("--port is an option of keel studio and keel serve.");
  if (values["allow-approvals"] && command !== "studio") throw usage("--allow-approvals is an option of keel studio.");
  for (const flag of ["mcp", "a2a", "http", "host", "token"] as const)
    if (values[flag] !== undefined && command !== "serve") throw usage(`--${flag} is an option of keel serve.`);
  const flags: Flags = {
    ...values,
    mode: values.mode as Flags["mode"],
    ...(values["allow-approvals"] ? { allowApprovals: true } : {}),
    ...(values.home ? { home: resolve(io.cwd, values.home) } : {}),
    ...(values.model ? { model: modelsFromFlags(values.model) } : {}),
    typed,
  };
  switch (command) {
    case "run": {
      // With --ask ask (or KEEL_ASK=ask) and the input as arguments, stdin is where the answers come from, not context.
      const answersOnStdin = rest.length > 0 && (values.ask ?? io.env.KEEL_ASK) === "ask";
      const input = await readRunInput({
        words: rest,
        stdin: io.stdin,
        stdinIsTTY: answersOnStdin || (io.stdin as { isTTY?: boolean }).isTTY === true,
        waitMs: stdinWaitMs(io.env),
        note: (l) => io.err(`${l}\n`),
      });
      if (!input)
        throw usage(
          'keel run needs the input, e.g. keel run "summarise the logs", or on stdin: echo "summarise the logs" | keel run.',
        );
      return withAgent(io, flags, (agent, _filepath, built) => runOnce(agent, input, io, flags, built));
    }
    case "chat":
      return withAgent(io, flags, (agent, _filepath, built) => chat(agent, io, flags, built));
    case "inspect":
      if (rest.length) throw usage(`keel inspect takes no arguments (got "${rest.join(" ")}").`);
      // No session is opened: an in-memory store, so inspecting works on a read-only home too.
      return withAgent(io, { ...flags, quiet: true, viewOnly: true }, async (agent, filepath) => {
        io.out(values.json ? inspectJson(agent, filepath) : formatInspect(agent, filepath));
        return EXIT.ok;
      });
    case "sessions":
      return sessions(rest, io, flags);
    case "goal": {
      const { goalCommand } = await import("./goal.ts");
      if (rest[0] === "status")
        return withAgent(io, { ...flags, quiet: true }, (_agent, _f, built) =>
          goalCommand.status(io, built.home, !!values.json),
        );
      const goal = rest.join(" ").trim();
      if (!goal)
        throw usage(
          'keel goal needs the goal, e.g. keel goal "make the tests pass" --turns 20 (keel goal status lists runs).',
        );
      const whole = (flag: string, v: string | undefined, d: number) => {
        if (v === undefined) return d;
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw usage(`${flag} takes a whole number ≥ 1, not "${headOf(v, 20)}".`);
        return n;
      };
      const budget = values.budget === undefined ? undefined : Number(values.budget);
      if (budget !== undefined && !(budget > 0 && Number.isFinite(budget)))
        throw usage(`--budget takes the run's budget in dollars (a number > 0), not "${headOf(values.budget!, 20)}".`);
      const limits = {
        turns: whole("--turns", values.turns, 20),
        every: whole("--every", values.every, 5),
        ...(budget !== undefined ? { budget } : {}),
      };
      return withAgent(io, flags, async (agent, _f, built) => {
        const r = renderer(io, { json: !!flags.json, phaseInfo: phaseInfo(agent), columns: terminalColumns() });
        const off = agent.subscribe(r.listener);
        try {
          const session = await openSession(agent, flags, io, built);
          return await goalCommand.run(agent, session, goal, limits, io, built.home);
        } finally {
          off();
        }
      });
    }
    case "worker": {
      if (rest.length) throw usage(`keel worker takes no arguments (got "${rest.join(" ")}").`);
      const n = values.concurrency === undefined ? undefined : Number(values.concurrency);
      if (n !== undefined && !(Number.isInteger(n) && n >= 1))
        throw usage(`--concurrency takes a whole number ≥ 1, not "${headOf(values.concurrency!, 20)}".`);
      const { workerCommand } = await import("./worker.ts");
      return withAgent(io, { ...flags, recovery: "auto" }, (agent, _f, built) =>
        workerCommand(
          agent,
          io,
          {
            ...(values.once ? { once: true } : {}),
            ...(values.json ? { json: true } : {}),
            ...(n ? { concurrency: n } : {}),
          },
          built.home,
        ),
      );
    }
    case "eval":
      return evalDispatch(rest, io, flags, values);
    case "replay": {
      const last = values.last === undefined ? undefined : Number(values.last);
      if (last !== undefined && !(Number.isInteger(last) && last >= 1))
        throw usage(`--last takes a whole number ≥ 1, not "${headOf(values.last!, 20)}".`);
      const { timeWindow } = await import("./replay.ts");
      const window = timeWindow(values.since, values.until, Date.now());
      const batch = last !== undefined || window !== undefined;
      if (batch ? rest.length > 0 : rest.length === 0)
        throw usage(
          "keel replay takes session ids (keel sessions lists them) or --last N / --since / --until (the most recent sessions, in a time window), not both.",
        );
      const tools = values.tools ?? "log";
      if (tools !== "log" && tools !== "live")
        throw usage(`--tools takes log (recorded results) or live (run the tools), not "${headOf(tools, 40)}".`);
      guardCli(undefined, io);
      const loaded = await loadConfig({ cwd: io.cwd, ...(flags.config ? { configPath: flags.config } : {}) });
      const { replayCommand } = await import("./replay.ts");
      return replayCommand(
        {
          sessionIds: rest,
          ...(last ? { last } : {}),
          ...(values["include-evals"] ? { includeEvals: true } : {}),
          ...(window ? { window } : {}),
          tools,
          json: !!values.json,
          strict: !!values.strict,
          ...(values.keep ? { keep: true } : {}),
        },
        await viewStore(io, flags),
        loaded,
        io,
      );
    }
    case "db":
      return db(rest, io, flags);
    case "workflows": {
      const { workflowsCommand } = await import("./workflows.ts");
      return withAgent(io, { ...flags, quiet: true, viewOnly: true }, (_agent, _f, built) =>
        workflowsCommand(rest, io, built.home, !!values.json),
      );
    }
    case "studio":
      if (rest.length) throw usage(`keel studio takes no arguments (got "${rest.join(" ")}").`);
      return studio(io, flags);
    case "serve": {
      const { serveCommand } = await import("./serve.ts");
      return serveCommand(rest, values, io, (fn) => withAgent(io, flags, (agent, _f, built) => fn(agent, built.home)));
    }
    case "init": {
      if (rest.length > 1) throw usage(`keel init takes at most one folder (got "${rest.join(" ")}").`);
      const { init, initSummary } = await import("./init.ts");
      const r = init({
        cwd: io.cwd,
        ...(rest[0] ? { dir: rest[0] } : {}),
        ...(values.plugin !== undefined ? { plugin: values.plugin } : {}),
        ...(values.force ? { force: true } : {}),
      });
      io.out(initSummary(r, io.cwd, values.plugin !== undefined));
      return EXIT.ok;
    }
    case "schema": {
      const { configJsonSchema } = await import("./config-schema.ts");
      io.out(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
      return EXIT.ok;
    }
    default:
      throw usage(`Unknown command "${command}".${didYouMean(command, [...Object.keys(COMMAND_HELP), "help"])}`);
  }
}

type Flags = {
  turns?: string;
  every?: string;
  mode?: "agent" | "chat";
  recovery?: "auto";
  once?: boolean;
  concurrency?: string;
  port?: string;
  allowApprovals?: boolean;
  ask?: string;
  strict?: boolean;
  config?: string;
  session?: string;
  new?: boolean;
  continue?: boolean;
  json?: boolean;
  offline?: boolean;
  home?: string;
  quiet?: boolean;
  wait?: boolean;
  viewOnly?: boolean;
  model?: string[] | undefined;
  typed?: string[];
};

/** Where the agent runs, for what is said around a turn. */
type Built = { home: string; freshHome: boolean };

async function withAgent(
  io: CliEnv,
  flags: Flags,
  fn: (agent: Agent, filepath: string, built: Built) => Promise<number>,
  plugins?: readonly KeelPlugin[],
): Promise<number> {
  // Guarded from the start: a plugin's setup may leave a timer that throws before the agent exists.
  const faultsBefore = guardCli(undefined, io);
  // One listener of Ctrl-C and SIGTERM from here to the exit; the turn and closing say what they do.
  ownSignals(io.err);
  const loaded = await loadConfig({ cwd: io.cwd, ...(flags.config ? { configPath: flags.config } : {}) });
  const built = await buildAgent(loaded, {
    env: io.env,
    shareHome: true,
    ...(flags.offline ? { offline: true } : {}),
    ...(flags.model ? { model: flags.model } : {}),
    ...(flags.home ? { home: flags.home } : {}),
    note: (l) => !flags.quiet && io.err(`${l}\n`),
    ...(flags.viewOnly ? { store: new MemorySessionStore() } : {}),
    ...(flags.recovery ? { recovery: flags.recovery } : {}),
    ...(plugins ? { plugins } : {}),
  });
  guardCli(built.agent, io);
  const strict = strictFromEnv(flags.strict, io.env) && !flags.viewOnly ? strictCollector(built.agent) : undefined;
  let code: number;
  try {
    code = await fn(built.agent, loaded.filepath, built);
  } finally {
    await closeWithin(built.agent, io.env, io.err);
    reportUnfinishedJobs(built.agent, io);
    for (const f of built.agent.observerFailures) io.err(`keel: ${f.message}\n`);
    strict?.dispose();
  }
  const strictFailure = strict?.failure();
  if (strictFailure) {
    io.err(wrap(`keel: ${strictFailure.message}`, terminalColumns()));
    if (code === EXIT.ok) code = EXIT.turnFailed;
  }
  // A fault outside the turn (e.g. during the close grace) still makes the exit non-zero.
  return cliGuard.faults > faultsBefore && code === EXIT.ok ? EXIT.turnFailed : code;
}

/**
 * The CLI owns its process: an error escaping plugin or tool code (a timer, a floating
 * promise) is recorded, closes the open turn, is printed as KEEL_PROCESS_FAULT naming the
 * plugin and makes the exit non-zero, instead of a raw stack trace. Installed once per
 * process and kept to the end (a plugin timer may fire after the agent closed).
 */
const cliGuard: { agent?: Agent | undefined; io?: CliEnv; faults: number; installed: boolean } = {
  faults: 0,
  installed: false,
};

function guardCli(agent: Agent | undefined, io: CliEnv): number {
  cliGuard.agent = agent;
  cliGuard.io = io;
  if (!cliGuard.installed) {
    cliGuard.installed = true;
    guardProcess(() => cliGuard.agent, {
      onFault: (f) => {
        cliGuard.faults++;
        if (cliGuard.faults <= 5) cliGuard.io?.err(`keel: ${f.error.message}\n`);
        else if (cliGuard.faults === 6)
          cliGuard.io?.err("keel: KEEL_PROCESS_FAULT: more faults followed; only the first 5 are shown.\n");
        process.exitCode = EXIT.turnFailed;
      },
    });
  }
  return cliGuard.faults;
}

/** Say on stderr which durable jobs were left pending (and how they resume) or given up on. */
function reportUnfinishedJobs(agent: Agent, io: CliEnv): void {
  for (const j of agent.unfinishedJobs) {
    if (j.status === "pending")
      io.err(
        `keel: KEEL_JOB_PENDING: background job ${j.name} (${j.plugin}, ${j.idempotencyKey}) was cut short after ${countOf(j.attempts, "attempt")} and is recorded as pending; it re-runs at the next keel start with this home, or now with: keel run --session ${j.sessionId} "<input>"\n`,
      );
    else
      io.err(
        `keel: KEEL_JOB_FAILED: background job ${j.name} (${j.plugin}, ${j.idempotencyKey}) failed after ${countOf(j.attempts, "attempt")} and will not run again: ${j.error ?? "unknown error"}\n`,
      );
  }
}

/** Open the session the flags name, switched to --mode when given (durable), saying so when it is in chat mode. */
async function openSession(agent: Agent, flags: Flags, io: CliEnv, built: Built): Promise<Session> {
  const session = await openNamedSession(agent, flags, io, built);
  if (flags.mode) await session.setMode(flags.mode);
  if (session.mode === "chat")
    io.err(
      `keel: chat mode — no tools are sent in this session${flags.mode ? "" : " (its last --mode)"}; --mode agent switches it back\n`,
    );
  return session;
}

/**
 * The agent's most recent session a person had (`-c`): a session keel eval ran (its first turn's
 * metadata holds the experiment and case) is passed over. Contract: undefined when there is none.
 */
async function lastOwnSession(agent: Agent): Promise<string | undefined> {
  for (const s of await agent.sessions(50)) {
    const first = (await agent.store.events(s.id)).find((e) => e.type === "turn.started");
    const m = first?.type === "turn.started" ? (first.metadata as Record<string, unknown> | undefined) : undefined;
    if (typeof m?.experiment === "string" && typeof m.case === "string") continue;
    return s.id;
  }
  return undefined;
}

async function openNamedSession(agent: Agent, flags: Flags, io: CliEnv, built: Built): Promise<Session> {
  if (flags.continue) {
    const last = await lastOwnSession(agent);
    if (last) return agent.session(last);
    io.err(`keel: no earlier session of agent "${agent.name}" in ${built.home}; starting a new one (--continue)\n`);
    return agent.session();
  }
  if (!flags.session) return agent.session();
  if (!flags.wait) return agent.session(flags.session);
  return agent.session(flags.session, {
    waitMs: Number.POSITIVE_INFINITY,
    onWait: (h) =>
      io.err(`keel: session ${flags.session} is in use by process ${h.pid} on ${h.host}; waiting for it (--wait)…\n`),
  });
}

/** For the slow-phase line: when the phase runs and which plugins subscribe to it. */
function phaseInfo(agent: Agent): (phase: string) => PhaseInfo | undefined {
  const map = new Map(
    agent.inspect().map((row) => [row.phase as string, [...new Set(row.subscriptions.map((s) => s.plugin))]]),
  );
  return (phase) => (isPhaseName(phase) ? { runs: PHASES[phase].runs, plugins: map.get(phase) ?? [] } : undefined);
}

async function runOnce(agent: Agent, input: string, io: CliEnv, flags: Flags, built: Built): Promise<number> {
  const r = renderer(io, { json: !!flags.json, phaseInfo: phaseInfo(agent), columns: terminalColumns() });
  const off = agent.subscribe(r.listener);
  const session = await openSession(agent, flags, io, built).catch((err: unknown) => {
    off();
    throw err;
  });
  // Ctrl-C cancels the turn (exit 130 once it has ended); a second signal exits at once.
  // SIGTERM (docker stop, systemd, a CI timeout) cancels the turn the same way: recorded interrupted, exit 143.
  let interrupted = false;
  let terminated = false;
  const ask = answererFor(io, flags);
  const offSignals = onSignal((signal) => {
    if (interrupted || terminated)
      exitNow(
        signal,
        `\nkeel: ${signal === "SIGTERM" ? "terminated" : interrupted ? "interrupted twice" : "interrupted"}; exiting now\n`,
      );
    if (signal === "SIGTERM") terminated = true;
    else interrupted = true;
    io.err(
      signal === "SIGTERM"
        ? "\nkeel: terminated (SIGTERM); cancelling the turn\n"
        : "\nkeel: cancelling the turn (Ctrl-C again to exit at once)\n",
    );
    session.cancel();
    // A turn paused for approval is not running (cancel does nothing to it): the question is
    // given up instead, the turn stays paused (durable) and keel ends as for a cancelled turn.
    ask.close();
  });
  const offGone = onReaderGone(io, () => session.cancel());
  try {
    // A turn an earlier process left paused for approval is answered (and finished) first.
    if (session.pendingApprovals().length) {
      io.err(`keel: session ${session.id} has a turn paused for approval; answering it first\n`);
      await settle(session, undefined, ask.answer, io.err);
    }
    let result = await session.run(input);
    result = (await settle(session, result, ask.answer, io.err)) ?? result;
    if (!flags.json) io.out("\n");
    await session.flush?.();
    if (!flags.json)
      io.err(
        `keel: ${result.verdict.status} (${result.verdict.reason}) · ${countOf(result.rounds, "round")} · ${countOf(result.toolCalls, "tool call")} · session ${session.id}\n`,
      );
    // A budget stop says what was spent, the limit and what to do (the verdict's detail).
    if (result.verdict.status === "stopped" && result.verdict.reason === "budget" && result.verdict.detail)
      io.err(`keel: ${result.verdict.detail}\n`);
    if (!flags.json && built.freshHome && result.verdict.status === "completed")
      io.err(nextSteps({ home: built.home, flags: flags.typed ?? [], env: io.env }));
    if (terminated) return EXIT.terminated;
    if (interrupted) return EXIT.interrupted;
    return result.verdict.status === "completed" ? EXIT.ok : EXIT.turnFailed;
  } catch (err) {
    if (isKeelError(err, "KEEL_APPROVAL_PENDING")) {
      io.err(
        `keel: the turn stays paused for approval (nothing is lost); answer it with: keel chat --session ${session.id}\n`,
      );
      return terminated ? EXIT.terminated : EXIT.interrupted;
    }
    throw err;
  } finally {
    ask.close();
    offSignals();
    offGone();
    r.dispose();
    off();
  }
}

/** How this command answers approvals: the person at the terminal, or `--ask` / KEEL_ASK. */
function answererFor(
  io: CliEnv,
  flags: Flags,
  lines?: () => Promise<string | undefined>,
): { answer: Answerer; close(): void } {
  const tty = (io.stdin as { isTTY?: boolean }).isTTY === true && process.stderr.isTTY === true;
  const mode = askMode(flags.ask, io.env, tty);
  if (mode !== "ask")
    return {
      answer: policyAnswerer(
        mode,
        flags.ask !== undefined ? "--ask" : io.env.KEEL_ASK ? "KEEL_ASK" : "the default (--ask deny)",
      ),
      close: () => {},
    };
  if (lines) return { answer: terminalAnswerer(lines, io.err), close: () => {} };
  let rl: ReturnType<typeof askInterface> | undefined;
  let next: ((l: string | undefined) => void) | undefined;
  // Once closed (a signal), every question gets no answer: the turn stays paused.
  let closed = false;
  const read = () =>
    new Promise<string | undefined>((resolve) => {
      if (closed) return resolve(undefined);
      if (!rl) {
        rl = askInterface(io.stdin, (io.stdin as { isTTY?: boolean }).isTTY === true);
        rl.on("line", (l) => next?.(l));
        rl.on("close", () => next?.(undefined));
        // Ctrl-C while asked: the turn stays paused (durable) and the command ends.
        rl.on("SIGINT", () => next?.(undefined));
      }
      next = (l) => {
        next = undefined;
        resolve(l);
      };
      io.err("  > ");
    });
  return {
    answer: terminalAnswerer(read, io.err),
    close: () => {
      closed = true;
      rl?.close();
      next?.(undefined);
    },
  };
}

async function chat(agent: Agent, io: CliEnv, flags: Flags, built: Built): Promise<number> {
  const r = renderer(io, { json: !!flags.json, phaseInfo: phaseInfo(agent), columns: terminalColumns() });
  const off = agent.subscribe(r.listener);
  const session = await openSession(agent, flags, io, built).catch((err: unknown) => {
    off();
    throw err;
  });
  io.err(
    `keel chat · session ${session.id} · type /exit to leave, /mode chat|agent to switch tools off or on; Ctrl-C cancels the running turn\n`,
  );
  // On a terminal readline edits lines and turns Ctrl-C into its own SIGINT event; piped, the process gets the signal.
  const tty = (io.stdin as { isTTY?: boolean }).isTTY === true;
  const rl = createInterface({
    input: io.stdin,
    terminal: tty,
    ...(tty ? { output: process.stderr, prompt: "> " } : {}),
  });
  let running: Promise<unknown> | undefined;
  let failed = false;
  // While a turn waits for approval, the next lines typed are the answers.
  const waiters: Array<(line: string | undefined) => void> = [];
  const onSigint = () => {
    // Asked for approval (the turn is paused, there is nothing to cancel): no answer, the turn
    // stays paused (durable) and the chat goes on.
    if (waiters.length) for (const w of waiters.splice(0)) w(undefined);
    else if (running) {
      session.cancel();
      io.err("\nkeel: turn cancelled (the session goes on)\n");
    } else rl.close();
  };
  rl.on("SIGINT", onSigint);
  let terminated = false;
  const onSigterm = () => {
    if (terminated) process.exit(EXIT.terminated);
    terminated = true;
    io.err("\nkeel: terminated (SIGTERM); ending the chat\n");
    session.cancel();
    rl.close();
  };
  const offSignals = onSignal((signal) => (signal === "SIGTERM" ? onSigterm() : onSigint()));
  const offGone = onReaderGone(io, () => {
    failed = true;
    session.cancel();
    rl.close();
  });
  rl.on("close", () => {
    for (const w of waiters.splice(0)) w(undefined);
  });
  const ask = answererFor(
    io,
    flags,
    () =>
      new Promise<string | undefined>((r) => {
        waiters.push(r);
        if (tty) rl.setPrompt("  > "), rl.prompt();
      }),
  );
  const go = (turn: () => Promise<unknown>) => {
    running = turn()
      .then(
        (res) => {
          const r = res as Awaited<ReturnType<Session["run"]>> | undefined;
          io.out("\n");
          if (r && r.verdict.status !== "completed") io.err(`keel: ${r.verdict.status} (${r.verdict.reason})\n`);
        },
        (err: unknown) => {
          if (isKeelError(err, "KEEL_APPROVAL_PENDING"))
            return void io.err(
              `keel: the turn stays paused for approval (nothing is lost); keel chat --session ${session.id} asks again\n`,
            );
          failed = true;
          io.err(`${errorMessage(err)}\n`);
        },
      )
      .finally(() => {
        running = undefined;
        if (tty) rl.setPrompt("> "), rl.prompt();
      });
  };
  const start = (text: string) => go(async () => settle(session, await session.run(text), ask.answer, io.err));
  if (session.pendingApprovals().length) {
    io.err(`keel: this session has a turn paused for approval; answering it first\n`);
    go(() => settle(session, undefined, ask.answer, io.err));
  } else if (tty) rl.prompt();
  try {
    for await (const raw of rl) {
      if (waiters.length) {
        waiters.shift()!(raw);
        continue;
      }
      const line = raw.trim();
      if (!line) continue;
      if (line === "/exit" || line === "/quit") break;
      const mode = /^\/mode(?:\s+(\S+))?$/.exec(line);
      if (mode) {
        if (running) io.err("  (a turn is running: switch with /mode after it ends)\n");
        else if (mode[1] !== "agent" && mode[1] !== "chat")
          io.err(`  (this session is in ${session.mode} mode; /mode chat sends no tools, /mode agent sends them)\n`);
        else {
          await session.setMode(mode[1]);
          io.err(
            `  (${mode[1]} mode: ${mode[1] === "chat" ? "no tools are sent" : "tools are sent"} from the next turn on, in any later run of this session too)\n`,
          );
        }
        continue;
      }
      if (running) {
        await session.steer(line);
        io.err(`  (queued as steering: ${headOf(line, 60)})\n`);
      } else start(line);
    }
    while (running) await running;
  } finally {
    offSignals();
    offGone();
    rl.close();
    r.dispose();
    off();
  }
  return terminated ? EXIT.terminated : failed ? EXIT.turnFailed : EXIT.ok;
}

/**
 * The config alone (no agent is built, so no plugin opens or writes its database), or an
 * empty one when there is none and --config was not given.
 */
async function readConfigOnly(io: CliEnv, flags: Flags): Promise<{ config: KeelConfig; loaded?: LoadedConfig }> {
  try {
    const loaded = await loadConfig({ cwd: io.cwd, ...(flags.config ? { configPath: flags.config } : {}) });
    return { config: validateConfig(loaded), loaded };
  } catch (err) {
    if (!(isKeelError(err) && err.code === "KEEL_CONFIG_NOT_FOUND" && !flags.config)) throw err;
    return { config: {} };
  }
}

/**
 * Where the configured agent keeps its data, read from the config's name, home and store only
 * (no plugin starts). `exists` is false when its SQLite file does not exist yet.
 */
async function viewWhere(
  io: CliEnv,
  flags: Flags,
): Promise<{
  storage: AgentStorage;
  where: string;
  exists: boolean;
  agentName: string | undefined;
  loaded: LoadedConfig | undefined;
  database: Database;
}> {
  const { config, loaded } = await readConfigOnly(io, flags);
  const agentName = loaded ? (config.name ?? "agent") : undefined;
  const configured = flags.home ?? config.home;
  const home =
    loaded && configured !== undefined
      ? resolve(configDir(loaded.filepath), configured)
      : (flags.home ?? defaultKeelHome(io.env));
  const database = chooseDatabase(config, io.env, loaded?.filepath);
  if (database.kind === "postgres") {
    const { url, schema } = database;
    const storage: AgentStorage = { home, database: { kind: "postgres", url, ...(schema ? { schema } : {}) } };
    return { storage, where: database.shown, exists: true, agentName, loaded, database };
  }
  checkHome(home, flags.home ? "--home" : io.env.KEEL_HOME ? "KEEL_HOME" : "the default home");
  const where = defaultSessionDbPath(home);
  const storage: AgentStorage = { home, database: { kind: "sqlite" } };
  return { storage, where, exists: existsSync(where), agentName, loaded, database };
}

/**
 * The configured session store, opened for viewing (`keel sessions`, `keel studio`, `keel
 * replay`): a read-only home can be viewed. `store` is undefined when the SQLite file does not exist yet.
 */
async function viewStore(
  io: CliEnv,
  flags: Flags,
): Promise<{
  store: SessionStore | undefined;
  where: string;
  agentName: string | undefined;
  storage: AgentStorage;
  loaded: LoadedConfig | undefined;
}> {
  const { storage, where, exists, agentName, loaded, database } = await viewWhere(io, flags);
  // Read-only: viewing never writes, never waits for a writer's lease, and works on a read-only home.
  const store =
    database.kind === "postgres"
      ? postgresSessionStore(database)
      : exists
        ? new SqliteSessionStore({ path: where, readOnly: true })
        : undefined;
  return { store, where, agentName, storage, loaded };
}

/** The studio's replay of a session with the config's agent (keel replay), when there is a config. */
async function studioReplayer(
  store: SessionStore,
  io: CliEnv,
  flags: Flags,
): Promise<import("./studio/server.ts").Replayer | undefined> {
  const { loaded } = await readConfigOnly(io, flags);
  if (!loaded) return undefined;
  const { replayLog } = await import("./replay.ts");
  return async (sessionId) => replayLog(await store.events(sessionId), loaded, { tools: "log", env: io.env });
}

/** Where the configured agent keeps its data, for viewing experiments (`keel eval list|show`); `storage` is undefined when the SQLite file does not exist yet. */
async function viewStorage(
  io: CliEnv,
  flags: Flags,
): Promise<{ storage: AgentStorage | undefined; where: string; agentName: string | undefined }> {
  const { storage, where, exists, agentName } = await viewWhere(io, flags);
  return { storage: exists ? storage : undefined, where, agentName };
}

async function sessions(rest: string[], io: CliEnv, flags: Flags): Promise<number> {
  const [sub = "list", id, ...extra] = rest;
  if (extra.length || (sub === "show" && !id) || (sub !== "list" && sub !== "show"))
    throw usage("keel sessions [list | show ID].");
  const { store, where, agentName } = await viewStore(io, flags);
  if (!store) {
    if (sub === "show")
      throw new KeelError("KEEL_SESSION_NOT_FOUND", `No session "${id}" in ${where} (the file does not exist).`);
    if (flags.json) io.out("[]\n");
    else io.err(`keel: no sessions in ${where}\n`);
    return EXIT.ok;
  }
  try {
    if (sub === "list") {
      const list = await store.listSessions({ ...(agentName ? { agent: agentName } : {}), limit: 100 });
      if (flags.json) io.out(`${JSON.stringify(list)}\n`);
      else if (!list.length) io.err(`keel: no sessions in ${where}\n`);
      else
        for (const s of list)
          io.out(`${s.id}  ${s.agent}  ${new Date(s.updatedAt).toISOString()}  ${countOf(s.eventCount, "event")}\n`);
      return EXIT.ok;
    }
    const info = await store.getSession(id!);
    if (!info) throw new KeelError("KEEL_SESSION_NOT_FOUND", `No session "${id}" in ${where}.`);
    const events = await store.events(id!);
    if (flags.json) for (const e of events) io.out(`${JSON.stringify(e)}\n`);
    else
      for (const e of events)
        io.out(`${String(e.seq).padStart(4)} ${new Date(e.ts).toISOString()} ${e.type}${summary(e)}\n`);
    return EXIT.ok;
  } finally {
    await store.close();
  }
}

/**
 * `keel studio`: the session store in the browser, until Ctrl-C. Read-only unless
 * --allow-approvals: then the agent is built from the config so that pending approvals can be
 * answered (and the turn resumed) from the page.
 */
async function studio(io: CliEnv, flags: Flags): Promise<number> {
  const port = flags.port === undefined ? 0 : Number(flags.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw usage(`--port takes a port number, 0 to 65535 (got "${flags.port}").`);
  const { startStudio } = await import("./studio/server.ts");
  ownSignals(io.err);
  const serve = async (
    store: SessionStore,
    where: string,
    agentName: string | undefined,
    storage: AgentStorage,
    answer?: import("./studio/server.ts").ApprovalAnswerer,
  ): Promise<number> => {
    // Experiments live beside the sessions; the studio only reads them (a SQLite file is opened read-only).
    const { openExperimentStore } = await import("@keel/eval");
    const experiments = await openExperimentStore(storage, { readOnly: true });
    try {
      return await serveWith(store, where, agentName, experiments, answer, await studioReplayer(store, io, flags));
    } finally {
      await experiments.close();
    }
  };
  const serveWith = async (
    store: SessionStore,
    where: string,
    agentName: string | undefined,
    experiments: import("@keel/eval").ExperimentStore,
    answer?: import("./studio/server.ts").ApprovalAnswerer,
    replay?: import("./studio/server.ts").Replayer,
  ): Promise<number> => {
    const s = await startStudio({
      store,
      where,
      ...(agentName ? { agent: agentName } : {}),
      port,
      ...(answer ? { answer } : {}),
      ...(replay ? { replay } : {}),
      experiments,
    });
    // Listening for Ctrl-C before the URL is printed: whoever reads the URL may stop us at once.
    // The first signal stops the server; another while it closes exits at once.
    const { stopped, off: offSignals } = stopSignal();
    io.out(`${s.url}\n`);
    io.err(
      `keel: studio on ${where} (${answer ? "approvals can be answered from the page" : "read-only"}); Ctrl-C stops it\n`,
    );
    const signal = await stopped;
    try {
      await s.close();
    } finally {
      offSignals();
    }
    return signal === "SIGINT" ? EXIT.ok : EXIT.terminated;
  };
  if (flags.allowApprovals) {
    return withAgent(io, flags, async (agent) => {
      const { sessionAnswerer } = await import("./studio/answer.ts");
      return serve(
        agent.store,
        "the agent's session store",
        agent.name,
        agent.storage,
        sessionAnswerer(agent, (line) => io.err(`${line}\n`)),
      );
    });
  }
  const { store, where, agentName, storage } = await viewStore(io, flags);
  if (!store)
    throw new KeelError(
      "KEEL_SESSION_NOT_FOUND",
      `No sessions in ${where} yet (the file does not exist): run a turn first, e.g. keel run "hello".`,
    );
  try {
    return await serve(store, where, agentName, storage);
  } finally {
    await store.close();
  }
}

/** `keel eval`: run a dataset (the dataset is read and checked before the agent is built), or list, show, add. */
async function evalDispatch(
  rest: string[],
  io: CliEnv,
  flags: Flags,
  values: { [K in (typeof EVAL_ONLY)[number] | "json-file" | "concurrency" | "tools"]?: string | boolean | undefined },
): Promise<number> {
  const ev = await import("./eval.ts");
  const [sub, ...args] = rest;
  if (sub === "list" || sub === "show") {
    if (sub === "list" ? args.length : args.length !== 1) throw usage("keel eval list | keel eval show EXPERIMENT.");
    const { storage, agentName, where } = await viewStorage(io, flags);
    if (!storage) {
      if (sub === "show")
        throw new KeelError(
          "KEEL_EVAL_EXPERIMENT_NOT_FOUND",
          `No experiment "${args[0]}" in ${where} (the file does not exist).`,
        );
      return flags.json ? (io.out("[]\n"), EXIT.ok) : (io.err(`keel eval: no experiments in ${where}\n`), EXIT.ok);
    }
    const { openExperimentStore } = await import("@keel/eval");
    const store = await openExperimentStore(storage, { readOnly: true });
    try {
      if (sub === "list") await ev.listExperiments(store, io, agentName, !!flags.json);
      else await ev.showExperiment(store, io, args[0]!, !!flags.json);
      return EXIT.ok;
    } finally {
      await store.close();
    }
  }
  if (sub === "add") {
    if (!args.length)
      throw usage("keel eval add SESSION… [--to FILE]: name at least one session (keel sessions list shows them).");
    const { store, where } = await viewStore(io, flags);
    if (!store)
      throw new KeelError("KEEL_SESSION_NOT_FOUND", `No session "${args[0]}" in ${where} (the file does not exist).`);
    try {
      return await ev.addCommand(store, io, args, values.to as string | undefined);
    } finally {
      await store.close();
    }
  }
  if (flags.json && values["json-file"] === undefined)
    throw usage("keel eval DATASET --json takes the FILE to write the report to (- for stdout).");
  if (!sub)
    throw usage(
      "keel eval needs a dataset (cases.jsonl, cases.yaml) or an eval file (*.eval.ts); keel help eval shows more.",
    );
  if (values.to !== undefined) throw usage("--to is an option of keel eval add.");
  const resumeRef = values.resume ? args[0] : undefined;
  if (args.length > (values.resume ? 1 : 0))
    throw usage(`keel eval takes one dataset (got "${rest.join(" ")}"); --resume takes the experiment after it.`);
  const evalFlags = {
    concurrency: values.concurrency as string | undefined,
    name: values.name as string | undefined,
    baseline: values.baseline as string | undefined,
    failUnder: values["fail-under"] as string | undefined,
    maxRegressions: values["max-regressions"] as string | undefined,
    junit: values.junit as string | undefined,
    jsonFile: values["json-file"] as string | undefined,
    resume: values.resume as boolean | undefined,
    tools: values.tools as string | undefined,
  };
  ev.gateFlags(evalFlags);
  // Every case is checked before the agent is built: a malformed one never reaches a model.
  const target = await ev.loadEvalTarget(sub, io.cwd);
  // The eval's tool seam: fixtures, recordings, and no call run twice on --resume.
  const tools = (await import("@keel/eval")).evalTools();
  return withAgent(
    io,
    flags,
    (agent, filepath) => ev.evalCommand(agent, io, target, evalFlags, resumeRef, filepath, tools),
    [tools.plugin],
  );
}

/** `keel db migrate`: bring every configured store's tables on PostgreSQL up to date. */
async function db(rest: readonly string[], io: CliEnv, flags: Flags): Promise<number> {
  const [sub, ...extra] = rest;
  if (sub !== "migrate" || extra.length) throw usage("keel db migrate [--config PATH] [--json].");
  const { config, loaded } = await readConfigOnly(io, flags);
  // Importing the plugins registers their tables; none is set up and nothing else is opened.
  if (loaded) await resolvePlugins(config.plugins ?? [], loaded.filepath, loaded.importModule);
  // The experiments of keel eval live beside the sessions: importing @keel/eval registers their tables.
  await import("@keel/eval");
  const database = chooseDatabase(config, io.env, loaded?.filepath);
  if (database.kind !== "postgres")
    throw usage(
      'keel db migrate works on PostgreSQL: set `store: "postgres://…"` in the config or KEEL_DATABASE_URL. SQLite databases migrate themselves when they are opened.',
    );
  const pgStore = await import("@keel/store-postgres");
  const done = await pgStore.migrateAll({ url: database.url, ...(database.schema ? { schema: database.schema } : {}) });
  await pgStore.endSharedPools();
  if (flags.json)
    io.out(`${JSON.stringify({ database: database.shown, schema: database.schema ?? "public", components: done })}\n`);
  else
    for (const c of done)
      io.out(
        `${c.component.padEnd(12)} version ${c.version}${c.applied ? ` (${c.applied} step${c.applied === 1 ? "" : "s"} applied)` : " (up to date)"}\n`,
      );
  return EXIT.ok;
}

function summary(e: { type: string } & Record<string, unknown>): string {
  if (e.type === "message.appended") {
    const m = e.message as { role: string; content: Array<{ type: string; text?: string; name?: string }> };
    return ` ${m.role}: ${headOf(m.content.map((b) => (b.type === "text" ? b.text : b.type === "tool_call" ? `[call ${b.name}]` : `[${b.type}]`)).join(" "), 120)}`;
  }
  if (e.type === "turn.started") return ` "${headOf(String(e.input), 80)}"`;
  if (e.type.startsWith("turn."))
    return ` ${(e.verdict as { status: string; reason: string } | undefined)?.reason ?? ""}`;
  if (e.type === "tool.completed") return ` ${String(e.name)} ${String(e.status)}`;
  return "";
}
