/**
 * `skills()`: the Keel plugin. Catalog refresh and the `skill_read` tool at
 * turn.pre_tool_materialization; the routed pick and the skills listing at
 * turn.pre_prompt_compile; credit, streaks and drafts at turn.post_turn.
 */
import { join, resolve } from "node:path";
import { definePlugin, KeelError } from "@keel/kernel";
import { defaultKeelHome } from "@keel/safe-path";
import { truncate } from "@keel/text";
import { redact } from "@keel/secrets";
import type { AgentStorage, ContributionFor, KeelPlugin, TurnVerdict } from "@keel/kernel";
import type { Skill, SkillDiagnostic } from "./catalog.ts";
import { normalizeSkillName, SkillCatalog, visibleIn } from "./catalog.ts";
import type { Outcome } from "./credit.ts";
import { creditOf } from "./credit.ts";
import { removeDraft, reviewDraft, writeDraft } from "./drafter.ts";
import type { DraftOutcome } from "./drafter.ts";
import type { SkillsOptionsInput, SkillsOptionsParsed } from "./options.ts";
import { SkillsOptions } from "./options.ts";
import { MemoryPosteriorStore } from "./posterior.ts";
import type { Counts } from "./posterior.ts";
import type { RoutePick } from "./router.ts";
import { ContextualRouter } from "./router.ts";
import { skillReadTool } from "./skill-read.ts";
import { sanitizeSignature, taskSignature } from "./signature.ts";
import type { StoredPick, Streak } from "./store.ts";
import { SkillsStore } from "./store.ts";
import type { SkillsStorage } from "./store.ts";
import { PostgresSkillsStore } from "./postgres-store.ts";
import { agentDatabase } from "@keel/store-postgres";

/** The plugin's name. */
export const PLUGIN_NAME = "@keel/plugin-skills";
/** The plugin's version. */
export const PLUGIN_VERSION = "0.1.0";

const FORCE = /@@skill=([A-Za-z0-9][A-Za-z0-9._-]{0,63})/;

/** A skill as `listSkills()` reports it. */
export interface SkillInfo {
  name: string;
  description: string;
  dir: string;
  file: string;
  auto: boolean;
  /** For a draft: the namespace that produced it and whether a person reviewed it. */
  draft?: { namespace: string | undefined; reviewed: boolean };
  /** The context-free arm of the skill (successes, failures credited so far). */
  arm: Counts;
}

/** Which turn feedback is about: its id, or session and turn ids. */
export type TurnRef = string | { sessionId: string; turnId: string };

/** What `recordFeedback` did. Contract: `applied` false says why in `reason`. */
export type FeedbackResult = { applied: true; skill: string } | { applied: false; reason: string };

/** The host API on the plugin object. */
export interface SkillsApi {
  /** Credit a turn's pick with a user's thumbs up (success) or down (failure; also resets its signature's streak). */
  recordFeedback(turn: TurnRef, feedback: "up" | "down"): Promise<FeedbackResult>;
  /** Revoke a draft: delete `<home>/skills/auto/<signature>/` and never draft that signature again. */
  revokeDraft(signature: string): Promise<{ removed: boolean }>;
  /** Mark a draft reviewed (`needs_review: false` in its manifest): from then on every namespace sees it. */
  reviewDraft(signature: string): { reviewed: boolean };
  /** The loaded skills (rescanned), in catalog order. */
  listSkills(): SkillInfo[];
  /** Diagnostics of the last catalog scan (skipped skills, with file and line). */
  diagnostics(): readonly SkillDiagnostic[];
  /** Posterior ranking of the skills for a request (no sampling). */
  rank(input: string): Array<{ skill: string; probability: number }>;
  /** Drafts written by this process, most recent last. */
  drafts(): readonly DraftOutcome[];
  /** Close the database. */
  close(): void;
}

/** What `skills()` returns: a Keel plugin that also carries the host API. */
export type SkillsPlugin = KeelPlugin<typeof SkillsOptions> & SkillsApi;

type Diag = ContributionFor<"turn.pre_tool_materialization"> & { kind: "diagnostic" };

/** The plugin's state: catalog, router, store. Contract: created once per plugin object. */
class SkillsRuntime {
  readonly options: SkillsOptionsParsed;
  readonly home: string;
  readonly autoDir: string;
  readonly catalog: SkillCatalog;
  readonly store: SkillsStorage | undefined;
  readonly router: ContextualRouter;
  private readonly storeError: string | undefined;
  private readonly picks = new Map<string, StoredPick & { candidates: string[] }>();
  private pendingDiags: SkillDiagnostic[] = [];
  private readonly draftLog: DraftOutcome[] = [];
  private scanned = false;
  private storeErrorReported = false;

  constructor(options: SkillsOptionsParsed, storage: AgentStorage) {
    this.options = options;
    this.home = resolve(options.home ?? storage.home);
    const skillsDir = join(this.home, "skills");
    this.autoDir = join(skillsDir, "auto");
    const roots = [
      ...options.dirs.map((d) => ({ dir: resolve(d) })),
      ...(options.includeHomeSkills ? [{ dir: skillsDir }] : []),
    ];
    this.catalog = new SkillCatalog(roots, { autoDir: this.autoDir });
    let store: SkillsStorage | undefined;
    try {
      // An explicit `db` is a SQLite file; otherwise the shared database when one is configured.
      const pg = options.db === undefined ? agentDatabase(storage) : undefined;
      store = pg ? new PostgresSkillsStore(pg) : new SkillsStore(options.db ?? join(this.home, "skills.sqlite"));
    } catch (err) {
      this.storeError = `cannot open ${options.db ?? join(this.home, "skills.sqlite")}: ${(err as Error).message}`;
    }
    this.store = store;
    this.router = new ContextualRouter({
      store: store ?? new MemoryPosteriorStore(),
      seed: options.seed,
      tuning: options.router,
    });
  }

  /** Rescan; when the catalog changed, hand the skills to the router and queue its diagnostics. */
  refresh(): void {
    const changed = this.catalog.refresh();
    if (changed || !this.scanned) {
      this.router.setSkills(this.catalog.skills);
      this.pendingDiags = [...this.catalog.diagnostics];
    }
    this.scanned = true;
  }

  takeDiagnostics(): Diag[] {
    const out: Diag[] = this.pendingDiags.map((d) => ({
      kind: "diagnostic",
      level: "warn",
      code: d.code,
      message: `${d.file}${d.line !== undefined ? `:${d.line}` : ""}: ${d.message}.${d.loaded ? "" : " The skill was skipped."}`,
      data: { file: d.file, ...(d.line !== undefined ? { line: d.line } : {}) },
    }));
    this.pendingDiags = [];
    if (this.storeError && !this.storeErrorReported) {
      this.storeErrorReported = true;
      out.push({
        kind: "diagnostic",
        level: "error",
        code: "KEEL_SKILL_STORE_FAILED",
        message: `${this.storeError}; learning is kept in memory only and auto-drafting is off.`,
      });
    }
    return out;
  }

  /** The turn's namespace: metadata[namespaceKey], else the configured one. */
  namespaceOf(metadata: unknown): string {
    const v =
      metadata && typeof metadata === "object"
        ? (metadata as Record<string, unknown>)[this.options.namespaceKey]
        : undefined;
    return (typeof v === "string" && v) || (typeof v === "number" && String(v)) || this.options.namespace;
  }

  /** Pick for a turn and remember it. Contract: the router sees the input with secrets redacted; a draft the namespace may not see is never picked. */
  async pick(
    sessionId: string,
    turnId: string,
    rawInput: string,
    namespace = this.options.namespace,
  ): Promise<{ pick: RoutePick | undefined; unknownForced?: string; storeError?: string }> {
    const input = redact(rawInput);
    let storeError: string | undefined;
    try {
      await this.router.prepare(input);
    } catch (err) {
      storeError = `reading the posteriors failed: ${(err as Error).message}; this turn was routed on what this process last read`;
    }
    const written = FORCE.exec(input)?.[1];
    // Names load normalised (KEEL_SKILL_NAME_NORMALIZED), so "@@skill=PDF-Filler" finds "pdf-filler".
    const forced =
      written === undefined || this.catalog.get(written) ? written : normalizeSkillName(written) || written;
    const target = forced !== undefined ? this.catalog.get(forced) : undefined;
    const known = target !== undefined && visibleIn(target, namespace);
    const routed = this.router.pick(input, known ? { force: forced } : { draw: turnId });
    const chosen = routed ? this.catalog.get(routed.skill) : undefined;
    const pick = routed && (!chosen || visibleIn(chosen, namespace)) ? routed : undefined;
    if (pick) {
      const stored = {
        sessionId,
        turnId,
        skill: pick.skill,
        terms: pick.terms,
        candidates: pick.candidates,
        forced: pick.forced,
        signature: taskSignature(input),
        input,
      };
      this.picks.set(turnId, stored);
      if (this.picks.size > 200) this.picks.delete(this.picks.keys().next().value!);
      try {
        await this.store?.savePick(stored);
      } catch {
        /* feedback from another process will not find this pick; the turn goes on */
      }
    }
    return {
      pick,
      ...(written !== undefined && !known ? { unknownForced: written } : {}),
      ...(storeError ? { storeError } : {}),
    };
  }

  async findPick(turn: TurnRef): Promise<StoredPick | undefined> {
    const turnId = typeof turn === "string" ? turn : turn.turnId;
    const sessionId = typeof turn === "string" ? undefined : turn.sessionId;
    const local = this.picks.get(turnId);
    if (local && (sessionId === undefined || local.sessionId === sessionId)) return local;
    return this.store?.getPick(turnId, sessionId);
  }

  async credit(pick: StoredPick | undefined, outcome: Outcome): Promise<void> {
    if (!pick || outcome === "neutral") return;
    if (!this.catalog.get(pick.skill)) return;
    await this.router.update(pick, outcome === "success" ? 1 : 0);
  }

  /** The skills listing of a turn. Contract: an unreviewed draft is listed only in the namespace that produced it. */
  section(pick: RoutePick | undefined, namespace = this.options.namespace, input = ""): string | undefined {
    const visible = this.catalog.skills.filter((s) => visibleIn(s, namespace));
    // Most relevant to this turn first (the router's posterior ranking), so the cap drops the least relevant.
    const order = new Map(this.router.rank(redact(input)).map((r, i) => [r.skill, i]));
    const skills = visible
      .map((s, i) => ({ s, at: order.get(s.name) ?? order.size + i }))
      .sort((a, b) => a.at - b.at)
      .map((x) => x.s);
    if (!skills.length) return undefined;
    const advice =
      pick && this.options.suggest
        ? `\nThe "${pick.skill}" skill may help with this request: read it with skill_read and use it only if it is relevant.`
        : "";
    const head =
      "Skills you can read with the skill_read tool (name: description), most relevant to this request first. Read a skill before following it.\n";
    const budget = this.options.maxPromptChars - head.length - advice.length - 140;
    const lines: string[] = [];
    let used = 0;
    for (const s of skills) {
      const desc = truncate(s.description, this.options.maxDescriptionChars);
      const line = `- ${s.name}${s.auto && !s.draft?.reviewed ? " [draft, needs review]" : ""}: ${desc}`;
      if (used + line.length + 1 > budget) break;
      lines.push(line);
      used += line.length + 1;
    }
    const omitted = skills.length - lines.length;
    return `${head}${lines.join("\n")}${omitted ? `\n(${omitted} more skills are not listed; call skill_read with a few words of the task instead of a name to find the closest ones.)` : ""}${advice}`;
  }

  /** Record a draft's outcome (listed by `drafts()`). */
  logDraft(outcome: DraftOutcome): void {
    this.draftLog.push(outcome);
  }

  api(): SkillsApi {
    return {
      recordFeedback: async (turn, feedback) => {
        if (feedback !== "up" && feedback !== "down")
          return { applied: false, reason: `feedback must be "up" or "down", got ${JSON.stringify(feedback)}` };
        const pick = await this.findPick(turn);
        if (!pick) return { applied: false, reason: `no routed pick is recorded for turn ${JSON.stringify(turn)}` };
        if (!this.scanned) this.refresh();
        if (!this.catalog.get(pick.skill))
          return { applied: false, reason: `skill "${pick.skill}" is no longer in the catalog` };
        await this.credit(pick, feedback === "up" ? "success" : "failure");
        if (feedback === "down" && pick.signature) await this.store?.resetStreak(pick.signature);
        return { applied: true, skill: pick.skill };
      },
      revokeDraft: async (signature) => {
        const safe = sanitizeSignature(signature);
        await this.store?.revoke(signature);
        if (safe && safe !== signature) await this.store?.revoke(safe);
        const removed = removeDraft(this.autoDir, signature);
        this.refresh();
        return { removed };
      },
      reviewDraft: (signature) => {
        const reviewed = reviewDraft(this.autoDir, signature);
        this.refresh();
        return { reviewed };
      },
      listSkills: () => {
        this.refresh();
        const arms = this.router.store.arms();
        return this.catalog.skills.map((s: Skill) => ({
          name: s.name,
          description: s.description,
          dir: s.dir,
          file: s.file,
          auto: s.auto,
          ...(s.draft ? { draft: { ...s.draft } } : {}),
          arm: arms.get(s.name) ?? { successes: 0, failures: 0 },
        }));
      },
      diagnostics: () => {
        if (!this.scanned) this.refresh();
        return this.catalog.diagnostics;
      },
      rank: (input) => {
        if (!this.scanned) this.refresh();
        return this.router.rank(input);
      },
      drafts: () => this.draftLog,
      close: () => this.store?.close(),
    };
  }
}

/** Parse options outside the kernel (host API used before the agent was built). */
function parseOptions(input: SkillsOptionsInput | undefined): SkillsOptionsParsed {
  const r = SkillsOptions.safeParse(input ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  throw new KeelError("KEEL_PLUGIN_OPTIONS_INVALID", `${issue.path.join(".") || "(root)"}: ${issue.message}.`, {
    plugin: PLUGIN_NAME,
    path: issue.path.join("."),
  });
}

/**
 * The skills plugin: a SKILL.md catalog, a contextual Thompson-sampling router that learns
 * from how turns end, and auto-drafted skills.
 * Contract: handlers never throw for expected faults (malformed skills, unknown forced
 * skill, a broken database); they return diagnostics instead.
 */
export function skills(input?: SkillsOptionsInput): SkillsPlugin {
  let runtime: SkillsRuntime | undefined;
  // Set up in an agent, the runtime keeps its data where that agent does; the host API used before that, in KEEL_HOME.
  const get = (parsed?: SkillsOptionsParsed, storage?: AgentStorage) =>
    (runtime ??= new SkillsRuntime(
      parsed ?? parseOptions(input),
      storage ?? { home: defaultKeelHome(), database: { kind: "sqlite" } },
    ));
  const plugin = definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description: "SKILL.md catalogs routed by a contextual Thompson-sampling bandit that learns what helps",
    options: SkillsOptions,
    input,
    setup(ctx) {
      const rt = get(ctx.options, ctx.storage);
      ctx.on("turn.pre_tool_materialization", (event) => {
        rt.refresh();
        const out: ContributionFor<"turn.pre_tool_materialization">[] = rt.takeDiagnostics();
        const namespace = rt.namespaceOf(event.metadata);
        if (rt.catalog.skills.some((s) => visibleIn(s, namespace)))
          out.push({
            kind: "tool_bundle",
            bundleId: "skills",
            domain: "skills",
            tools: [skillReadTool(() => rt.catalog, namespace)],
          });
        return out;
      });

      ctx.on("turn.pre_prompt_compile", async (event) => {
        const out: ContributionFor<"turn.pre_prompt_compile">[] = [];
        const namespace = rt.namespaceOf(event.metadata);
        const { pick, unknownForced, storeError } = await rt.pick(
          event.sessionId,
          event.turnId,
          event.input,
          namespace,
        );
        if (storeError)
          out.push({ kind: "diagnostic", level: "warn", code: "KEEL_SKILL_STORE_FAILED", message: `${storeError}.` });
        if (unknownForced)
          out.push({
            kind: "diagnostic",
            level: "warn",
            code: "KEEL_SKILL_UNKNOWN",
            message: `@@skill=${unknownForced} names no loaded skill; the router picked instead. Use one of the names listed by listSkills().`,
          });
        const content = rt.section(pick, namespace, event.input);
        if (content)
          out.push({
            kind: "prompt_section",
            id: "skills",
            sectionId: "skills",
            title: "Skills",
            domain: "skills",
            priority: 400,
            content,
            maxChars: 8000,
          });
        return out;
      });

      ctx.on("turn.post_turn", async (event, hook) => {
        const out: ContributionFor<"turn.post_turn">[] = [];
        const outcome = creditOf(event.verdict as TurnVerdict, rt.options.credit);
        let pick: StoredPick | undefined;
        try {
          pick = await rt.findPick({ sessionId: event.sessionId, turnId: event.turnId });
          await rt.credit(pick, outcome);
        } catch (err) {
          out.push({
            kind: "diagnostic",
            level: "error",
            code: "KEEL_SKILL_STORE_FAILED",
            message: `crediting "${pick?.skill}" failed: ${(err as Error).message}; the posterior was not updated.`,
          });
        }
        const signature = taskSignature(event.input);
        if (!rt.options.autoDraft.enabled || !signature || outcome === "neutral" || !rt.store) return out;
        let streak: Streak;
        try {
          streak = await rt.store.bumpStreak(
            signature,
            outcome === "success",
            { input: event.input, answer: event.finalText, ...(pick ? { skill: pick.skill } : {}) },
            rt.namespaceOf(event.metadata),
          );
        } catch (err) {
          out.push({
            kind: "diagnostic",
            level: "error",
            code: "KEEL_SKILL_STORE_FAILED",
            message: `recording the streak of "${signature}" failed: ${(err as Error).message}.`,
          });
          return out;
        }
        if (
          streak.count >= rt.options.autoDraft.threshold &&
          !(await Promise.resolve()
            .then(() => rt.store!.isRevoked(signature))
            .catch(() => true))
        ) {
          const model = rt.options.model ?? hook.model;
          out.push({
            kind: "background_job",
            idempotencyKey: `skills-draft:${sanitizeSignature(signature)}`,
            name: "skills.draft",
            run: async (signal: AbortSignal) => {
              const result = await writeDraft({
                autoDir: rt.autoDir,
                streak,
                isRevoked: (s) => rt.store!.isRevoked(s),
                model,
                signal,
              });
              rt.logDraft(result);
              if (result.status === "failed")
                throw new KeelError("KEEL_SKILL_DRAFT_FAILED", `signature "${signature}": ${result.message}.`, {
                  plugin: PLUGIN_NAME,
                  phase: "turn.post_turn",
                });
              return result;
            },
          });
        }
        return out;
      });
    },
  });
  return Object.assign(
    plugin,
    lazyApi(() => get().api()),
  );
}

/** The API object whose methods create the runtime on first use. */
function lazyApi(api: () => SkillsApi): SkillsApi {
  let cached: SkillsApi | undefined;
  const a = () => (cached ??= api());
  return {
    recordFeedback: (t, f) => a().recordFeedback(t, f),
    revokeDraft: (s) => a().revokeDraft(s),
    reviewDraft: (s) => a().reviewDraft(s),
    listSkills: () => a().listSkills(),
    diagnostics: () => a().diagnostics(),
    rank: (i) => a().rank(i),
    drafts: () => a().drafts(),
    close: () => cached?.close(),
  };
}

export default skills;
