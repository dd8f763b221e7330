/**
 * What `keel --help` and `keel help <command>` print: the overview, and one entry per command
 * in COMMAND_HELP (a new command adds its entry there, and the overview lists it).
 */

/** The help of one command. Contract: every `env` name is a key of ENVIRONMENT. */
export interface CommandHelp {
  /** One line for the overview. */
  summary: string;
  /** Usage lines, each starting with `keel <command>`. */
  usage: string[];
  /** [flags, what they do]. */
  options: Array<[string, string]>;
  /** Two or three command lines, each with a `# what it does` comment. */
  examples: string[];
  /** The environment variables the command reads. */
  env: string[];
  /** Paragraphs after the options. */
  notes?: string[];
}

/** Every environment variable keel reads, and what for. Contract: one line each. */
export const ENVIRONMENT: Record<string, string> = {
  KEEL_HOME: "the home folder: sessions and plugin databases (default ~/.keel; --home and the config's `home` win)",
  KEEL_DATABASE_URL:
    "sqlite (default) or a postgres:// URL: the session log and every plugin store on one shared PostgreSQL (the config's `store` wins)",
  KEEL_DATABASE_SCHEMA: "the PostgreSQL schema holding Keel's tables (default public)",
  KEEL_OFFLINE: "1 = use the offline model (offline.script, else echo) even when a key is set, as --offline",
  ANTHROPIC_API_KEY: "key for anthropic:<model>; a model whose key is missing is left out (offline when none is left)",
  ANTHROPIC_BASE_URL: "another endpoint for anthropic:<model> (a proxy); the config's baseURL wins",
  OPENAI_API_KEY: "key for openai:<model>",
  OPENAI_BASE_URL: "endpoint for openai: and openai-compatible:<model>; the config's baseURL wins",
  KEEL_CONFIG_TIMEOUT_MS: "deadline for loading the config and the plugin packages it names (default 10000)",
  KEEL_EXIT_GRACE_MS:
    "how long background work (memory extraction, jobs) gets after the turn before keel exits (default 5000)",
  KEEL_WORKER_MIN_IDLE_MS:
    "keel worker: how long a session must have been quiet before it is taken (default the lease TTL; a turn whose holder died on this machine is taken at once)",
  KEEL_WORKER_INTERVAL_MS: "keel worker: how often the store is asked for work (default 1000)",
  KEEL_WORKER_MAX_BACKOFF_MS:
    "keel worker: the longest wait between attempts while the store fails with a transient error (default 30000)",
  KEEL_STRICT:
    "1 = strict mode, as --strict: any warning or error a plugin causes (a rejected contribution, a handler that threw) fails the command",
  KEEL_ASK:
    "what a plugin's `ask` decision means, as --ask: ask (the person at the terminal; default on one), deny (default without one) or allow",
  KEEL_SERVE_TOKEN:
    "keel serve: the bearer token(s) callers must send (comma-separated), as --token; required on any host but 127.0.0.1",
  KEEL_STDIN_WAIT_MS: "with an input argument and piped stdin: how long to wait for stdin's first bytes (default 3000)",
};

const CONFIG: [string, string] = [
  "--config PATH",
  'the agent\'s config (default: agent.config.* or package.json "keel", found from here up)',
];
const MODE: [string, string] = [
  "--mode agent|chat",
  "switch the session: agent sends tools (the default), chat sends none; kept in the session's log for its later turns",
];
const HOME: [string, string] = [
  "--home DIR",
  "the home folder for this command (beats KEEL_HOME and the config's home)",
];
const JSON_OUT: [string, string] = [
  "--json",
  "print the session's stored events on stdout, one JSON object per line, with the live text deltas (model.delta) and tool progress (tool.progress) between them (those have no seq)",
];
const ASK: [string, string] = [
  "--ask MODE",
  "when a plugin asks for approval of a tool call: ask (the person at the terminal: y once, a always in this session, n <reason> deny; default on a terminal), deny (default without one) or allow",
];
const MODEL_ENV = ["KEEL_OFFLINE", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"];
const SESSION: Array<[string, string]> = [
  ["-c, --continue", "continue the most recent session of this agent in this home (a new one if there is none)"],
  ["-s, --session ID", "continue that session (`keel sessions list` shows the ids)"],
  ["--wait", "with --session: wait while another process holds the session, instead of exit 1"],
  [
    "--model SPEC",
    "use this model instead of the config's; repeat or comma-separate for a fallback chain (anthropic:claude-sonnet-4-6,openai:gpt-4.1)",
  ],
  ["--offline", "use the offline model even when an API key is set"],
  [
    "--strict",
    "for plugin CI: any warning or error a plugin causes (a rejected contribution, a handler that threw or timed out) makes the exit 1 (KEEL_STRICT_FAILED)",
  ],
];

/** Every command's help, keyed by command. Contract: the overview lists the commands in this order. */
export const COMMAND_HELP: Record<string, CommandHelp> = {
  run: {
    summary: "one turn: the answer on stdout, progress on stderr",
    usage: [
      'keel run [options] "<input>"',
      "keel run [options] -            (the input is stdin)",
      "<command> | keel run [options]  (the input is stdin)",
    ],
    options: [CONFIG, ...SESSION, ["--new", "start a new session (the default)"], MODE, ASK, JSON_OUT, HOME],
    examples: [
      'keel run "what is left in TODO.md?"                    # one turn in a new session',
      'git diff | keel run "review this change"               # stdin is appended as context',
      'keel run -c --model openai:gpt-4.1 "and the tests?"    # continue the last session, another model',
    ],
    env: [
      "KEEL_HOME",
      "KEEL_DATABASE_URL",
      "KEEL_DATABASE_SCHEMA",
      ...MODEL_ENV,
      "KEEL_CONFIG_TIMEOUT_MS",
      "KEEL_EXIT_GRACE_MS",
      "KEEL_STRICT",
      "KEEL_ASK",
      "KEEL_STDIN_WAIT_MS",
    ],
    notes: [
      "Input: the arguments joined by spaces; with no argument (or `-`) and stdin not a terminal, stdin is the input.\n" +
        "With an argument and piped stdin, stdin is appended to the input as context, after a blank line,\n" +
        "between <stdin> and </stdin> lines. When stdin gives nothing within KEEL_STDIN_WAIT_MS, keel goes on\n" +
        'without it and says so (`keel run - "question"` waits for it; `< /dev/null` skips it). An empty input is a usage error.',
    ],
  },
  chat: {
    summary: "interactive turns in one session; a line typed during a turn steers it",
    usage: ["keel chat [options]"],
    options: [CONFIG, ...SESSION, MODE, ASK, JSON_OUT, HOME],
    examples: [
      "keel chat                                  # a new session; /exit or Ctrl-D to leave",
      "keel chat -c                               # pick up the most recent session",
      "keel chat --session 3f2c… --wait           # that session, once its other process lets go",
    ],
    env: [
      "KEEL_HOME",
      "KEEL_DATABASE_URL",
      "KEEL_DATABASE_SCHEMA",
      ...MODEL_ENV,
      "KEEL_CONFIG_TIMEOUT_MS",
      "KEEL_EXIT_GRACE_MS",
      "KEEL_STRICT",
      "KEEL_ASK",
    ],
    notes: [
      "Ctrl-C cancels the running turn (the session goes on); Ctrl-C between turns leaves.",
      "A turn paused for approval (asked, or left paused by another process) is answered with the next lines typed; Ctrl-D leaves it paused.",
    ],
  },
  inspect: {
    summary: "the plugin tree and the phase map (order, timeouts, failure policies)",
    usage: ["keel inspect [--config PATH] [--json]"],
    options: [
      CONFIG,
      ["--json", "the same map as JSON"],
      ["--model SPEC", "show the agent with this model instead of the config's"],
      HOME,
    ],
    examples: [
      "keel inspect                               # which plugin subscribes where, in what order",
      "keel inspect --json | jq '.phases[0]'       # the same as data",
    ],
    env: ["KEEL_HOME", ...MODEL_ENV, "KEEL_CONFIG_TIMEOUT_MS"],
    notes: ["No session is opened: it works on a read-only home."],
  },
  sessions: {
    summary: "stored sessions and their events (read-only)",
    usage: ["keel sessions [list] [--config PATH] [--json]", "keel sessions show ID [--config PATH] [--json]"],
    options: [CONFIG, ["--json", "list: one JSON array; show: one event per line"], HOME],
    examples: [
      "keel sessions                              # this agent's sessions, most recent first",
      "keel sessions show 3f2c… --json            # every stored event of one session",
    ],
    env: ["KEEL_HOME", "KEEL_DATABASE_URL", "KEEL_DATABASE_SCHEMA", "KEEL_CONFIG_TIMEOUT_MS"],
    notes: [
      "Only the config's name, home and store are read: no plugin starts, nothing is written (a read-only home works). With a PostgreSQL store the sessions of every instance are listed.",
    ],
  },
  goal: {
    summary: "work toward a goal without user input, checked by a supervisor model (@keel/plugin-goals)",
    usage: [
      'keel goal "GOAL" [--turns N] [--every N] [--budget USD] [--session ID | -c] [--config PATH]',
      "keel goal status [--json] [--config PATH]",
    ],
    options: [
      CONFIG,
      HOME,
      ["--turns N", "most turns (default 20)"],
      [
        "--budget USD",
        "the run's spend limit in dollars: a request that would pass it is not sent and the run pauses (budget)",
      ],
      [
        "--every N",
        "ask the supervisor (the side model, else the agent's model) every N turns (default 5), and whenever the agent says the goal is complete",
      ],
      ["--session ID, -c", "continue a session instead of starting one"],
      ["--json", "status: the runs as JSON"],
    ],
    examples: [
      'keel goal "make the failing test pass" --turns 10',
      "keel goal status                           # runs, newest first; runs a dead process left are marked orphaned",
    ],
    env: ["KEEL_HOME", "KEEL_OFFLINE"],
    notes: [
      "A run ends achieved (exit 0), at its limit, stopped (Ctrl-C, exit 130; SIGTERM, exit 143), stuck (the same answer three times), paused (an approval is needed, or the supervisor failed three times in a row; a 429 only defers it), or failed. Runs are kept in <KEEL_HOME>/goals.sqlite.",
    ],
  },
  workflows: {
    summary:
      "the workflows the agent learned from repeated successful turns (@keel/plugin-workflows): list, show, review, revoke",
    usage: [
      "keel workflows [list] [--json] [--config PATH] [--home DIR]",
      "keel workflows show|review|revoke ID [--config PATH]",
    ],
    options: [CONFIG, HOME, ["--json", "list: the workflows as JSON"]],
    examples: [
      "keel workflows                      # id, draft or reviewed, namespace, steps, how its offers ended",
      "keel workflows review wf-3f1c0a9b2e77   # offered in every namespace from now on",
      "keel workflows revoke wf-3f1c0a9b2e77   # deleted; its tool sequence is never learned again there",
    ],
    env: ["KEEL_HOME"],
    notes: [
      "A draft is offered only in the namespace whose turns taught it; a reviewed workflow in every namespace. Either way the person approves each run (the durable approval flow). Workflows are kept in <KEEL_HOME>/workflows.sqlite.",
    ],
  },
  studio: {
    summary:
      "the sessions in the browser: turns as timelines, what each plugin contributed to every request, live; and the experiments of keel eval against their baseline",
    usage: ["keel studio [--port N] [--allow-approvals] [--config PATH] [--home DIR]"],
    options: [
      CONFIG,
      HOME,
      ["--port N", "serve on 127.0.0.1:N (default: a free port)"],
      [
        "--allow-approvals",
        "let the page answer pending approvals; the agent is built from the config to resume the turn",
      ],
    ],
    examples: [
      "keel studio                                # prints the URL to open (with its token)",
      "keel studio --allow-approvals --port 4777",
    ],
    env: ["KEEL_HOME", "KEEL_DATABASE_URL", "KEEL_DATABASE_SCHEMA", "KEEL_CONFIG_TIMEOUT_MS"],
    notes: [
      "Loopback only; every request needs the token in the printed URL (the page then sends it in an Authorization header, never a cookie, which every port of 127.0.0.1 would receive). Read-only by default: nothing is written and no plugin starts. Turns run by any process appear as they happen. Ctrl-C stops it.",
      "Each turn shows its tool calls with their arguments and results (as the log holds them: redacted, cut), every approval with why it was asked, who answered, when and why, and what its model requests cost ($, for priced models); the session shows its total.",
      "Experiments (keel eval) are kept beside the sessions; the page lists them (#experiments) and shows each case against the baseline's: what regressed or was fixed, each scorer's verdict, the output before and after, its session and the keel replay command for it.",
    ],
  },
  serve: {
    summary:
      "serve the config's agent to other agents: an MCP server (stdio, or Streamable HTTP) whose tools ask it, list your sessions and answer its approvals; or an A2A endpoint (agent card, message/send, message/stream, tasks/get)",
    usage: [
      "keel serve --mcp [--config PATH] [--home DIR]",
      "keel serve --mcp --http [--port N] [--host H] [--token T] [--config PATH] [--home DIR]",
      "keel serve --a2a [--port N] [--host H] [--token T] [--config PATH] [--home DIR]",
    ],
    options: [
      CONFIG,
      HOME,
      ["--mcp", "an MCP server; on stdio unless --http (stdout carries protocol only, notes go to stderr)"],
      ["--http", "Streamable HTTP at http://HOST:PORT/mcp, printed on stderr"],
      ["--a2a", "an A2A endpoint (JSON-RPC at /; the card at /.well-known/agent-card.json)"],
      ["--port N", "listen on port N (default: a free port)"],
      ["--host H", "listen on H (default 127.0.0.1); any other address needs a token"],
      ["--token T", "callers must send Authorization: Bearer T (16+ characters; comma-separated for several callers)"],
    ],
    examples: [
      "keel serve --mcp                           # for an MCP client that starts it (command: keel, args: [serve, --mcp])",
      "KEEL_SERVE_TOKEN=$(openssl rand -base64 32) keel serve --mcp --http --host 0.0.0.0",
      "keel serve --a2a --port 4800               # loopback, no token",
    ],
    env: ["KEEL_HOME", "KEEL_SERVE_TOKEN", "KEEL_DATABASE_URL", "KEEL_CONFIG_TIMEOUT_MS"],
    notes: [
      "Tools: ask (input, session_id? — the answer and the session_id to continue with), sessions (your own), approve (session_id, decision allow|always|deny, call_id?). A tool call the agent must have approved is asked of the client (MCP elicitation) when it can be; otherwise ask answers that the turn is paused and which calls wait, and approve answers them and returns the resumed turn's answer.",
      "Each caller's sessions are its own: a bearer token's, else (HTTP without tokens) its MCP session's; over stdio, whoever can start the process. Owners are kept in <home>/serve.sqlite. Ctrl-C or SIGTERM stops it and closes the agent.",
      "A2A: one task is one turn; messages in the same contextId continue that Keel session. A tool call that needs approval leaves the task input-required: answer with a message on the same task, the text approve or deny (then a reason), or data parts {approve, callId?, reason?}. Each token (or, without tokens, the local caller) sees only its own conversations and tasks, kept in <home>/serve.sqlite.",
    ],
  },
  replay: {
    summary:
      "re-run a recorded session with today's config and plugins (the model's answers from the recording) and show which request changed and why",
    usage: [
      "keel replay SESSION… [--tools log|live] [--strict] [--json] [--keep] [--config PATH] [--home DIR]",
      "keel replay --last N [--include-evals] [--strict] [--json]",
      "keel replay --since WHEN [--until WHEN] [--last N] [--include-evals] [--strict] [--json]",
    ],
    options: [
      CONFIG,
      HOME,
      ["--tools log|live", "log (default): tools answer with their recorded results; live: they run"],
      ["--strict", "exit 1 when the replay diverged from the recording (a CI check)"],
      ["--json", "the whole report as JSON: every request's sections, context, tools, messages, edits and tokens"],
      ["--keep", "keep the replay's scratch home (the plugins' files) and print where"],
      [
        "--last N",
        "replay the agent's N most recent sessions: a line each and a total (sessions keel eval ran are left out; --include-evals counts them)",
      ],
      [
        "--since/--until WHEN",
        "only sessions with a turn started in the window: an ISO date or time (2026-11-28T09:00Z) or a duration back from now (2h, 7d); with --last N, the most recent N",
      ],
    ],
    examples: [
      "keel replay 3f2a9c1e-…                     # what today's plugins change in this session",
      "keel replay --last 50 --strict             # last week's sessions against a plugin change, in CI",
      "keel replay --since 7d --last 50 --strict  # the same, only sessions of the last 7 days",
    ],
    env: ["KEEL_HOME", "KEEL_DATABASE_URL", "KEEL_DATABASE_SCHEMA"],
  },
  worker: {
    summary:
      "finish the turns stopped processes left, with no user action: claims them across instances through the session leases (@keel/worker)",
    usage: ["keel worker [--once] [--concurrency N] [--json] [--config PATH] [--home DIR]"],
    options: [
      CONFIG,
      HOME,
      [
        "--once",
        "one pass over the work there is, then exit (a cron job); exit 1 when a session could not be continued",
      ],
      ["--concurrency N", "turns continued at once (default 4)"],
      [
        "--json",
        "one JSON line per step (claimed, finished, skipped, failed, handed_back, store_unavailable, store_recovered) and the report",
      ],
    ],
    examples: [
      "keel worker                                # until SIGTERM or Ctrl-C",
      "keel worker --once --json                  # from cron",
    ],
    env: [
      "KEEL_HOME",
      "KEEL_DATABASE_URL",
      "KEEL_DATABASE_SCHEMA",
      "KEEL_EXIT_GRACE_MS",
      "KEEL_WORKER_MIN_IDLE_MS",
      "KEEL_WORKER_INTERVAL_MS",
      "KEEL_WORKER_MAX_BACKOFF_MS",
    ],
    notes: [
      'The agent runs with recovery "auto": a turn a stopped process left goes on from its log (a cut call runs again only when its tool is repeatable; otherwise the model reads that it was interrupted), and a paused turn whose approvals were all answered is resumed. A session is taken once it has been quiet for the lease TTL (KEEL_WORKER_MIN_IDLE_MS), or at once when the process that held it died on this machine. On SIGTERM or Ctrl-C running turns get KEEL_EXIT_GRACE_MS to end, then are handed back unfinished for the next worker; a second signal exits at once.',
      "A store that fails for a moment (PostgreSQL refusing or dropping connections, a terminated backend, SQLITE_BUSY, a timeout) never stops the worker: it says so once, with the last successful poll, waits (doubling from KEEL_WORKER_INTERVAL_MS with jitter, up to KEEL_WORKER_MAX_BACKOFF_MS), tries again, says once when the store is back, and takes up the turns the outage cut. Any other store failure (refused credentials, a database that does not exist) ends it with exit 1. With --once, a store still failing after KEEL_WORKER_MAX_BACKOFF_MS is exit 1.",
    ],
  },
  eval: {
    summary:
      "score the agent on a dataset (JSONL, YAML or an *.eval.ts file): each case in its own session, stored as an experiment; a baseline and thresholds gate CI",
    usage: [
      "keel eval DATASET [--concurrency N] [--name NAME] [--baseline EXP|latest] [--fail-under RATE] [--max-regressions N] [--junit FILE] [--json FILE] [--resume [EXP]] [--tools fixtures|recorded|live] [--config PATH] [--home DIR]",
      "keel eval list [--json] · keel eval show EXP [--json]",
      "keel eval add SESSION… [--to FILE]",
    ],
    options: [
      CONFIG,
      HOME,
      ["--concurrency N", "cases run at once, each in its own session (default 4, or the eval file's)"],
      ["--name NAME", "the experiment's name (default: the dataset and the time)"],
      [
        "--baseline EXP",
        "compare case by case with that experiment (id or name; latest = this agent's most recent completed one sharing a case with the dataset, none yet: no comparison; an unfinished one is refused): regression, fixed, unchanged, new, missing",
      ],
      [
        "--fail-under RATE",
        "exit 3 when the pass rate is below RATE (0.9 or 90%); without it and --max-regressions, every case must pass",
      ],
      ["--max-regressions N", "exit 3 when more than N cases passed in the baseline and do not now"],
      ["--junit FILE", "write JUnit XML: one testcase per case, failures carrying the scorers' reasons"],
      ["--json FILE", "write the report as JSON (experiment, summary, gate, comparison, cases); - for stdout"],
      [
        "--resume [EXP]",
        "continue a stopped run (the same cases required): scored cases are kept, the rest run; default: this agent's last unfinished experiment of the dataset. A call that already ran in a cut case is not run again (its recorded result answers it, or it is refused)",
      ],
      [
        "--tools MODE",
        "what answers a tool call the case's fixtures (tools: { NAME: { result } }) do not: fixtures (default) runs only read-only tools (category info or repeatable) and refuses the rest; recorded answers from the session the case was made of; live runs every tool",
      ],
      ["--to FILE", "keel eval add: the JSONL dataset the sessions are appended to (default evals/cases.jsonl)"],
      [
        "--model SPEC",
        "run the cases on this model instead of the config's (recorded on the experiment): compare models on one dataset",
      ],
      ["--offline", "use the offline model even when an API key is set"],
    ],
    examples: [
      "keel eval evals/cases.jsonl --baseline latest --max-regressions 0 --junit eval.xml   # a CI gate",
      "keel eval evals/agent.eval.ts --concurrency 8       # a dataset with custom scorers (defineEval)",
      "keel eval add 3f2c… 9a1b… --to evals/cases.jsonl    # turn real sessions into cases",
    ],
    env: [
      "KEEL_HOME",
      "KEEL_DATABASE_URL",
      "KEEL_DATABASE_SCHEMA",
      ...MODEL_ENV,
      "KEEL_CONFIG_TIMEOUT_MS",
      "KEEL_EXIT_GRACE_MS",
    ],
    notes: [
      'A case: {"id", "input": text or a list of turns, "expect": {exact, contains, notContains, regex, jsonSchema, toolCalled, limits, judge}, "reference", "metadata"}. Every case is checked before the agent is built; a malformed one is an error at its file, line and field (exit 2) and nothing runs. Each case runs in a new session of the config\'s agent (its turn metadata holds the experiment and case ids) and its result is stored as soon as it is scored, beside the sessions (SQLite or PostgreSQL): Ctrl-C or a kill loses only the cases in flight, and --resume continues. A scorer that throws fails its case with its name, never the run. Exit 0 when the gate passes, 3 when it fails.',
    ],
  },
  db: {
    summary: "bring the PostgreSQL tables of the session log and every configured plugin up to date",
    usage: ["keel db migrate [--config PATH] [--json]"],
    options: [CONFIG, ["--json", "the database, schema and each component's version as JSON"]],
    examples: [
      "KEEL_DATABASE_URL=postgres://keel@db:5432/keel keel db migrate   # before rolling out a new version",
      "keel db migrate --json",
    ],
    env: ["KEEL_DATABASE_URL", "KEEL_DATABASE_SCHEMA", "KEEL_CONFIG_TIMEOUT_MS"],
    notes: [
      "Instances also migrate on start, under one advisory lock, so this is optional; it lets a deploy fail early. A database newer than this Keel is refused and left unchanged. SQLite files migrate themselves when opened.",
    ],
  },
  init: {
    summary: "scaffold an agent project here (or in DIR), or a plugin package with --plugin NAME",
    usage: ["keel init [DIR] [--force]", "keel init --plugin NAME [DIR] [--force]"],
    options: [
      [
        "--plugin NAME",
        "scaffold a plugin package named NAME (an npm name, e.g. @acme/keel-rules) in DIR (default: a folder named after it)",
      ],
      [
        "--force",
        "overwrite files the scaffold would write (without it, existing files are listed and nothing is written)",
      ],
    ],
    examples: [
      "mkdir my-agent && cd my-agent && keel init     # package.json, agent.config.ts, skills/, .gitignore, README",
      "keel init --plugin @acme/keel-house-rules      # a plugin with a test that drives it through the scripted provider",
    ],
    env: [],
    notes: [
      "The agent runs offline at once (an echo model), even before npm install (Keel's packages then come from this keel's installation), and keeps its sessions in ./.keel; the plugin's test runs with npm test.",
    ],
  },
  schema: {
    summary: "print the JSON Schema of agent.config.*",
    usage: ["keel schema"],
    options: [],
    examples: ['keel schema > agent.config.schema.json     # for editors: "$schema" in a JSON config'],
    env: [],
  },
};

/** Exit statuses, as help and the README state them. */
export const EXIT_HELP =
  "exit: 0 success · 1 the turn failed (or the session store refused it) · 2 bad usage or config ·\n" +
  "3 keel eval's gate failed (a case did not pass, --fail-under, --max-regressions) ·\n" +
  "130 interrupted (Ctrl-C cancels the turn; twice: at once) · 141 stdout's reader went away during a turn ·\n" +
  "143 terminated (SIGTERM cancels the turn; twice: at once)\n";

const pad = (s: string, n: number) => s + " ".repeat(Math.max(1, n - [...s].length));

/** `keel --help`: the commands, where to read more, exit statuses. */
export function overviewHelp(): string {
  const names = Object.keys(COMMAND_HELP);
  const width = Math.max(...names.map((n) => n.length)) + 3;
  return `keel — run Keel agents

usage: keel <command> [options]

commands:
${names.map((n) => `  ${pad(n, width)}${COMMAND_HELP[n]!.summary}`).join("\n")}
  ${pad("help", width)}keel help <command>, or keel <command> --help: its options, examples and environment

options: -h, --help · -v, --version

The config is agent.config.{ts,mts,cts,js,mjs,cjs,json} or a "keel" field in package.json,
found in the current folder or a parent (up to the project root), or given with --config.
Without an API key the agent runs offline (scripted or echo model) and says so on stderr.
A session runs in one process at a time: another process on it gets KEEL_SESSION_BUSY
(exit 1) before any model call, or with --wait waits until the session is free.
After the turn, background work gets KEEL_EXIT_GRACE_MS (default 5000) to finish; then keel exits.
${EXIT_HELP}`;
}

/** `keel help <command>`. Contract: undefined for a command not in COMMAND_HELP. */
export function commandHelp(command: string): string | undefined {
  if (!Object.hasOwn(COMMAND_HELP, command)) return undefined;
  const h = COMMAND_HELP[command]!;
  const width = Math.max(0, ...h.options.map(([f]) => f.length), ...h.env.map((e) => e.length)) + 3;
  const parts = [`keel ${command} — ${h.summary}`, `usage:\n${h.usage.map((u) => `  ${u}`).join("\n")}`];
  if (h.options.length)
    parts.push(
      `options:\n${[...h.options, ["-h, --help", "this help"] as [string, string]].map(([f, t]) => `  ${pad(f, width)}${t}`).join("\n")}`,
    );
  for (const n of h.notes ?? []) parts.push(n);
  parts.push(`examples:\n${h.examples.map((e) => `  ${e}`).join("\n")}`);
  parts.push(
    h.env.length
      ? `environment:\n${h.env.map((e) => `  ${pad(e, width)}${ENVIRONMENT[e] ?? ""}`).join("\n")}`
      : "environment: none read",
  );
  return `${parts.join("\n\n")}\n\n${EXIT_HELP}`;
}
