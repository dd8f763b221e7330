/**
 * `keel replay SESSION`: re-run a recorded session with today's config and plugins, the model's
 * answers served from the recording, and say which request changed and why.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KeelEvent, SessionStore } from "@keel/kernel";
import { KeelError } from "@keel/kernel";
import { evalMark, replaySession } from "@keel/eval";
import type { ReplayOptions, ReplayReport, RequestChange } from "@keel/eval";
import { codePointLength, countOf, headOf } from "@keel/text";
import { buildAgent } from "./build-agent.ts";
import type { LoadedConfig } from "./load-config.ts";

/** What `keel replay` was given. */
export interface ReplayCommand {
  /** The sessions to replay; with `last`, the most recent sessions of the config's agent instead. */
  sessionIds: string[];
  last?: number;
  /** With `last`: count the sessions keel eval ran too (left out by default). */
  includeEvals?: boolean;
  /** Only sessions with a turn started in this window (ms since the epoch, both ends included); with `last`, the most recent of them. */
  window?: TimeWindow;
  tools: "log" | "live";
  json: boolean;
  strict: boolean;
  /** Keep the replay's scratch home (its plugin files) and say where. */
  keep?: boolean;
}

/** A time window: from `since` to `until` (ms since the epoch); an absent end is open. */
export interface TimeWindow {
  since?: number;
  until?: number;
}

/** Sessions a window replays at most without --last (the most recent first). */
const WINDOW_MAX = 1_000;

/**
 * `--since` / `--until` as a window: each an ISO date or time (`2026-11-28`, `2026-11-28T09:00Z`)
 * or a duration back from `now` (`90s`, `30m`, `2h`, `7d`, `2w`). Contract: undefined when
 * neither is given; throws KEEL_CLI_USAGE for another value, or a window that ends before it starts.
 */
export function timeWindow(since: string | undefined, until: string | undefined, now: number): TimeWindow | undefined {
  if (since === undefined && until === undefined) return undefined;
  const at = (flag: string, v: string): number => {
    const d = /^(\d+(?:\.\d+)?)(s|m|h|d|w)$/.exec(v.trim());
    if (d) return now - Number(d[1]) * { s: 1e3, m: 6e4, h: 36e5, d: 864e5, w: 6048e5 }[d[2] as "s"];
    const t = /^\d{4}-\d{2}-\d{2}/.test(v.trim()) ? Date.parse(v.trim()) : Number.NaN;
    if (Number.isNaN(t))
      throw new KeelError(
        "KEEL_CLI_USAGE",
        `${flag} takes an ISO date or time (2026-11-28, 2026-11-28T09:00Z) or a duration back from now (30m, 2h, 7d), not "${headOf(v, 40)}".`,
      );
    return t;
  };
  const w: TimeWindow = {
    ...(since !== undefined ? { since: at("--since", since) } : {}),
    ...(until !== undefined ? { until: at("--until", until) } : {}),
  };
  if (w.since !== undefined && w.until !== undefined && w.since > w.until)
    throw new KeelError(
      "KEEL_CLI_USAGE",
      `--since (${new Date(w.since).toISOString()}) is after --until (${new Date(w.until).toISOString()}).`,
    );
  return w;
}

/** The window in words, for a note. */
function windowText(w: TimeWindow): string {
  const iso = (t: number) => new Date(t).toISOString();
  if (w.since !== undefined && w.until !== undefined) return `between ${iso(w.since)} and ${iso(w.until)}`;
  return w.since !== undefined ? `since ${iso(w.since)}` : `until ${iso(w.until!)}`;
}

/** Whether a log has a turn that started in the window. */
function startedIn(events: readonly KeelEvent[], w: TimeWindow): boolean {
  return events.some(
    (e) =>
      e.type === "turn.started" &&
      (w.since === undefined || e.ts >= w.since) &&
      (w.until === undefined || e.ts <= w.until),
  );
}

/**
 * Replay sessions. Contract: reads the recorded store only; each replay runs in a scratch home
 * with a scratch store; one session prints its whole report, several a line each and a total;
 * returns 0, or 1 when `strict` and a replay diverged.
 */
export async function replayCommand(
  cmd: ReplayCommand,
  recorded: { store: SessionStore | undefined; where: string; agentName: string | undefined },
  loaded: LoadedConfig,
  io: { out(s: string): void; err(s: string): void; env: NodeJS.ProcessEnv },
): Promise<number> {
  const { logs, children } = await recordedLogs(cmd, recorded);
  const reports: ReplayReport[] = [];
  for (const [i, events] of logs.entries()) {
    reports.push(
      await replayLog(events, loaded, {
        tools: cmd.tools,
        env: io.env,
        ...(children[i] ? { children: children[i] } : {}),
        ...(cmd.keep ? { keep: (home: string) => io.err(`keel: the replay's home is kept at ${home}\n`) } : {}),
      }),
    );
    if (!cmd.json && (logs.length > 1 || cmd.last !== undefined || cmd.window)) io.out(summaryLine(reports.at(-1)!));
  }
  const batch = cmd.last !== undefined || cmd.window !== undefined;
  if (batch && cmd.window && !logs.length)
    io.err(
      `keel: no session${recorded.agentName ? ` of agent "${recorded.agentName}"` : ""} had a turn started ${windowText(cmd.window)}.\n`,
    );
  if (cmd.json) io.out(`${JSON.stringify(logs.length === 1 && !batch ? reports[0] : reports, null, 2)}\n`);
  else if (logs.length === 1 && !batch) io.out(formatReplay(reports[0]!));
  else {
    const same = reports.filter((r) => r.identical).length;
    io.out(`${same} of ${countOf(reports.length, "session")} replayed identically.\n`);
  }
  return cmd.strict && reports.some((r) => !r.identical) ? 1 : 0;
}

/**
 * Replay one recorded log with the config's agent in a scratch home (removed after, unless
 * `keep` is given: it is told where the home is). Contract: as replaySession; `keel studio` uses it too.
 */
export async function replayLog(
  events: KeelEvent[],
  loaded: LoadedConfig,
  options: {
    tools: "log" | "live";
    env: NodeJS.ProcessEnv;
    keep?: (home: string) => void;
    /** The logs of the child sessions the recording started (a delegated task replayed with live tools). */
    children?: ReplayOptions["children"];
  },
): Promise<ReplayReport> {
  const home = mkdtempSync(join(tmpdir(), "keel-replay-"));
  try {
    return await replaySession({
      events,
      tools: options.tools,
      ...(options.children ? { children: options.children } : {}),
      build: async (rig) =>
        (await buildAgent(loaded, { env: options.env, home, store: rig.store, rig, note: () => {} })).agent,
    });
  } finally {
    if (options.keep) options.keep(home);
    else rmSync(home, { recursive: true, force: true });
  }
}

function summaryLine(r: ReplayReport): string {
  if (r.identical) return `${r.sessionId}  identical (${r.requests.length} requests)\n`;
  const first = r.firstDivergence !== undefined ? r.requests[r.firstDivergence] : undefined;
  const why = first
    ? [
        ...first.sections.map((s) => `section ${s.sectionId} ${s.change} by ${s.plugins.join(", ")}`),
        ...first.context.map((c) => `context ${c.id} ${c.change}`),
        ...(first.tools.added.length || first.tools.removed.length ? ["tools"] : []),
        ...(!first.messages.same ? ["messages"] : []),
      ].join("; ")
    : r.toolChanges.length
      ? `${countOf(r.toolChanges.length, "tool call")} decided differently`
      : "a turn ended differently";
  return `${r.sessionId}  DIVERGED at request #${(r.firstDivergence ?? 0) + 1}: ${why || "the request"}\n`;
}

/**
 * The recorded logs, and with `--tools live` the logs of the child sessions each one's calls
 * started (and theirs), so a delegated task that runs again is served its own answers.
 */
async function recordedLogs(
  cmd: ReplayCommand,
  recorded: { store: SessionStore | undefined; where: string; agentName: string | undefined },
): Promise<{ logs: KeelEvent[][]; children: Array<Record<string, KeelEvent[]> | undefined> }> {
  const { store } = recorded;
  if (!store || cmd.tools !== "live") return { logs: await sessionLogs(cmd, recorded), children: [] };
  try {
    const logs = await sessionLogs(cmd, recorded);
    const children: Array<Record<string, KeelEvent[]>> = [];
    for (const log of logs) {
      const found: Record<string, KeelEvent[]> = {};
      const next = [log];
      while (next.length)
        for (const e of next.shift()!)
          if (e.type === "child.started" && !found[e.childSessionId]) {
            found[e.childSessionId] = await store.events(e.childSessionId);
            next.push(found[e.childSessionId]!);
          }
      children.push(found);
    }
    return { logs, children };
  } finally {
    await store.close();
  }
}

async function sessionLogs(
  cmd: ReplayCommand,
  recorded: { store: SessionStore | undefined; where: string; agentName: string | undefined },
): Promise<KeelEvent[][]> {
  const { store, where } = recorded;
  if (!store) {
    if (cmd.last || cmd.window) return [];
    throw new KeelError(
      "KEEL_SESSION_NOT_FOUND",
      `No session "${cmd.sessionIds[0]}" to replay in ${where} (the file does not exist).`,
    );
  }
  try {
    if (cmd.last || cmd.window)
      return await lastSessions(
        store,
        recorded.agentName,
        cmd.last ?? WINDOW_MAX,
        cmd.includeEvals === true,
        cmd.window,
      );
    const out: KeelEvent[][] = [];
    for (const id of cmd.sessionIds) {
      const info = await store.getSession(id);
      if (!info)
        throw new KeelError(
          "KEEL_SESSION_NOT_FOUND",
          `No session "${id}" to replay in ${where}: it was deleted since it was recorded, or it is in another home or database (keel sessions lists what is there).`,
        );
      out.push(await store.events(id));
    }
    return out;
  } finally {
    // With --tools live, recordedLogs reads the child sessions next and closes the store.
    if (cmd.tools !== "live") await store.close();
  }
}

/**
 * The logs of the agent's `last` most recent top-level sessions. A task's child session carries
 * its parent agent's name but runs with the task profile's instructions and tools: it is
 * replayed within its parent (its call answered from the log), never on its own with the
 * parent's config, which would report it diverged. A session that ran no turn (a chat opened
 * and closed) has nothing to replay: passed over, not a failed batch. A session keel eval ran
 * (its turns carry the experiment and case) is not the agent's traffic: passed over unless asked for.
 */
async function lastSessions(
  store: SessionStore,
  agent: string | undefined,
  last: number,
  includeEvals: boolean,
  window?: TimeWindow,
): Promise<KeelEvent[][]> {
  for (let limit = last; ; limit *= 4) {
    const listed = await store.listSessions({ ...(agent ? { agent } : {}), limit });
    const out: KeelEvent[][] = [];
    for (const s of listed) {
      // Most recently updated first: one last updated before the window started no turn in it, nor do the rest.
      if (window?.since !== undefined && s.updatedAt < window.since) return out;
      const events = await store.events(s.id);
      if (window && !startedIn(events, window)) continue;
      const created = events[0];
      if (created?.type === "session.created" && created.parent) continue;
      if (!events.some((e) => e.type === "turn.started")) continue;
      if (!includeEvals && evalMark(events)) continue;
      out.push(events);
      if (out.length === last) return out;
    }
    if (listed.length < limit) return out;
  }
}

function requestLine(r: RequestChange): string[] {
  const head = `  #${r.index + 1} round ${r.round}`;
  if (r.only) return [`${head}  only in the ${r.only === "recorded" ? "recording" : "replay"}`];
  const routed = r.route ? `  routed ${r.route.recorded ?? "(default)"} → ${r.route.replayed ?? "(default)"}` : "";
  if (r.same)
    return [`${head}  same${r.compared === "manifest" ? " (manifest: recorded before digests)" : ""}${routed}`];
  const lines = [`${head}  CHANGED${routed}`];
  for (const s of r.sections)
    lines.push(
      `     section ${s.sectionId} ${s.change} (by ${s.plugins.join(", ") || "?"}, ${s.chars[0]} → ${s.chars[1]} chars)`,
    );
  for (const c of r.context) lines.push(`     context ${c.id} ${c.change} (${c.domain}, by ${c.plugin})`);
  if (r.tools.added.length) lines.push(`     tools added: ${r.tools.added.join(", ")}`);
  if (r.tools.removed.length) lines.push(`     tools removed: ${r.tools.removed.join(", ")}`);
  if (!r.systemSame && !r.sections.length && !r.context.length) lines.push("     system prompt changed");
  if (!r.messages.same) lines.push(`     messages changed (${r.messages.recorded} → ${r.messages.replayed})`);
  if (!r.optionsSame) lines.push("     request options changed");
  const edits = (e: RequestChange["edits"]["recorded"]) =>
    e.map((x) => `${x.plugin} "${headOf(x.reason, 60)}" ${x.before}→${x.after}`).join("; ") || "none";
  if (JSON.stringify(r.edits.recorded) !== JSON.stringify(r.edits.replayed))
    lines.push(`     history edits: recorded ${edits(r.edits.recorded)}; replayed ${edits(r.edits.replayed)}`);
  lines.push(`     tokens ${r.tokens.recorded} → ${r.tokens.replayed}`);
  return lines;
}

/** The report as text. Contract: names the first request that differs and what the model would have been asked. */
export function formatReplay(r: ReplayReport): string {
  const out = [
    `keel replay ${r.sessionId} (tools ${r.tools === "log" ? "from the log" : "run live"}): ${countOf(r.requests.length, "request")}, ${countOf(r.turns.length, "turn")}`,
    "Requests:",
    ...r.requests.flatMap(requestLine),
    "Turns:",
    ...r.turns.map(
      (t, i) =>
        `  ${i + 1} "${headOf(t.input, 50)}": ${t.recorded.status}${t.recorded.reason ? ` (${t.recorded.reason})` : ""} → ${t.replayed.status}${t.replayed.reason ? ` (${t.replayed.reason})` : ""}${t.same ? "" : `  DIFFERS${t.recorded.text !== t.replayed.text ? `: answer "${headOf(t.replayed.text, 80)}"` : ""}`}`,
    ),
  ];
  if (r.toolChanges.length)
    out.push("Tool calls:", ...r.toolChanges.map((c) => `  ${c.callId} ${c.name}: ${c.recorded} → ${c.replayed}`));
  for (const n of r.notes) out.push(`Note: ${n}`);
  for (const p of r.pluginProblems)
    out.push(
      `Plugin ${p.plugin} ${p.status} in ${p.phase}${p.error ? `: ${headOf(p.error, 160)}` : ""} (not in the recording)`,
    );
  if (r.firstDivergence !== undefined) {
    out.push(`First divergence: request #${r.firstDivergence + 1}.`);
    if (r.asked) {
      const system = r.systemDiff
        ? [
            `  system prompt changed (${r.systemDiff.recordedChars} → ${r.systemDiff.replayedChars} chars; - recorded, + today):`,
            ...r.systemDiff.lines.map((l) => `    ${l}`),
          ]
        : [`  system (${codePointLength(r.asked.system)} chars): ${headOf(r.asked.system.replace(/\s+/g, " "), 300)}`];
      out.push(
        "The model would have been asked:",
        ...system,
        `  tools: ${r.asked.tools.join(", ") || "(none)"}`,
        ...r.asked.lastMessages.map((m) => `  ${m.role}: ${headOf(m.text.replace(/\s+/g, " "), 200)}`),
      );
    }
    out.push(
      "The requests after it were answered from the recording, so they show the plugins' effect, not a new model's.",
    );
  }
  out.push(r.identical ? "Result: identical." : "Result: diverged (keel replay --strict exits 1 on this).");
  return `${out.join("\n")}\n`;
}
