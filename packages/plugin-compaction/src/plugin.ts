/**
 * The compaction plugin: TACO at tool.post_result, context pressure at round.pre_request,
 * calibration and subgoal extraction at round.post_response / turn.post_turn, and the
 * retrieval tool at turn.pre_tool_materialization.
 */
import { createHash } from "node:crypto";
import { join } from "node:path";
import type { ContributionInputOf, HookContext, Message, ModelProvider, PhaseEvent } from "@keel/kernel";
import { applyMessageEdits, definePlugin, KeelError } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import type { CompactState } from "./compact.ts";
import { compactHistory } from "./compact.ts";
import { DIGEST_PREFIX, diffEdits, isCompacted, isSummary, messageKeys, plainText } from "./messages.ts";
import type { CompactionInput, ResolvedOptions } from "./options.ts";
import { CompactionOptions } from "./options.ts";
import { retrieveTool } from "./retrieve.ts";
import { pruneTurn } from "./prune.ts";
import { prunEdits, prunTool } from "./prun.ts";
import { RawStore } from "./store.ts";
import type { RawStorage } from "./store.ts";
import { PostgresRawStore } from "./postgres-store.ts";
import { redact } from "@keel/secrets";
import { agentDatabase } from "@keel/store-postgres";
import type { Extraction } from "./subgoals.ts";
import { ask, digestOutput } from "./summarize.ts";
import { extractionPrompt, heuristicExtraction, parseExtraction, SubgoalRegistry } from "./subgoals.ts";

export const PLUGIN_NAME = "@keel/plugin-compaction";
export const PLUGIN_VERSION = "0.1.0";

/** Per-session state. */
interface SessionState extends CompactState {
  calibration: number;
  /** Unscaled estimate of the last request sent. */
  lastEstimate: number;
  registry: SubgoalRegistry;
  pending: Promise<void> | undefined;
  /** context_too_long signals already answered (turnId#round). */
  answered: Set<string>;
  storeWarned: boolean;
  /** The history as last seen (after this plugin's edits), for extraction after the response. */
  lastMessages: readonly Message[];
  /** Category of each tool call seen this process (intra-turn pruning keeps empty results of others). */
  categories: Map<string, string>;
  /** Texts of the summaries this plugin wrote or found in the store (a user's message may start like one; it stays pinned). */
  summaries: Set<string>;
}

type Diagnostic = ContributionInputOf<"diagnostic">;

/** Contract: the kernel's o200k counter, shared process-wide (counts cached per message). */
const counter = () => defaultTokenCounter();

function rawId(kind: string, sessionId: string, callId: string): string {
  return `${kind[0]}${createHash("sha256").update(`${sessionId}\0${callId}\0${kind}`).digest("hex").slice(0, 12)}`;
}

/**
 * Where the store records that this plugin wrote a summary: the digest of its text as the
 * session log keeps it (redacted), so a later process on the same session knows it as ours.
 */
function summaryKey(sessionId: string, text: string): { id: string; digest: string } {
  const digest = createHash("sha256").update(redact(text)).digest("hex");
  return { id: rawId("summary", sessionId, digest), digest };
}

/**
 * Build the compaction plugin.
 * Contract: options are validated by the kernel against CompactionOptions; every change it
 * makes is a `message_edit` or `tool_result_rewrite` plus a diagnostic with structured data.
 */
export function compaction(input?: CompactionInput) {
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description: "TACO tool-output compression, context-pressure compaction and a subgoal registry.",
    options: CompactionOptions,
    input,
    setup(ctx) {
      const o: ResolvedOptions = ctx.options;
      // An explicit path is a SQLite file; otherwise the shared database when one is configured.
      const pg = o.path === undefined ? agentDatabase(ctx.storage) : undefined;
      const store: RawStorage = pg
        ? new PostgresRawStore(pg)
        : new RawStore(o.path ?? join(ctx.storage.home, "compaction.sqlite"));
      const sessions = new Map<string, SessionState>();
      const state = (id: string): SessionState => {
        let s = sessions.get(id);
        if (!s) {
          s = {
            round: 0,
            lastHard: undefined,
            exhausted: false,
            calibration: 1,
            lastEstimate: 0,
            registry: new SubgoalRegistry(),
            pending: undefined,
            answered: new Set(),
            storeWarned: false,
            lastMessages: [],
            categories: new Map(),
            summaries: new Set(),
          };
          sessions.set(id, s);
        }
        return s;
      };
      const modelOf = (hook: HookContext): ModelProvider | undefined =>
        o.model === false ? undefined : (o.model ?? hook.model);
      const storeDiagnostic = (s: SessionState, phase: string): Diagnostic[] => {
        if (!store.degraded || s.storeWarned) return [];
        s.storeWarned = true;
        return [
          {
            kind: "diagnostic",
            level: "warn",
            code: "KEEL_COMPACTION_STORE_FAILED",
            message: new KeelError("KEEL_COMPACTION_STORE_FAILED", store.lastError ?? "the store failed", {
              plugin: PLUGIN_NAME,
              phase,
            }).message,
          },
        ];
      };
      const subgoalsOn = o.strategy === "subgoal" || o.strategy === "subgoal_mig";

      // The retrieval tool.
      if (o.retrieveTool) {
        const tool = retrieveTool(o.retrieveTool, store);
        ctx.on("turn.pre_tool_materialization", () => ({
          kind: "tool_bundle",
          bundleId: "compaction",
          domain: "compaction",
          tools: [tool],
        }));
      }

      // TACO.
      if (o.taco.enabled) {
        ctx.on(
          "tool.post_result",
          async (e, hook) => {
            const { call, result } = e;
            const text = plainText(result);
            if (!compressible(e, o) || result.content.some((b) => b.type !== "text") || isCompacted(result))
              return undefined;
            const rawTokens = text.length / 4 > o.taco.threshold / 4 ? counter().countText(text) : 0;
            if (rawTokens <= o.taco.threshold) return undefined;
            if (e.approvedByUser) {
              return {
                kind: "diagnostic",
                level: "info",
                code: "compaction.taco.skipped",
                message: `${call.name} output (${rawTokens} tokens) left as it is: the user approved this call.`,
                data: { toolCallId: call.id, tool: call.name, rawTokens, reason: "approved_by_user" },
              };
            }
            const s = state(e.sessionId);
            const id = rawId("taco", e.sessionId, call.id);
            store.put({
              id,
              sessionId: e.sessionId,
              toolCallId: call.id,
              toolName: call.name,
              kind: "taco",
              text,
              tokens: rawTokens,
              createdAt: Date.now(),
            });
            const out: Diagnostic[] = storeDiagnostic(s, "tool.post_result");
            const produced = await digestOutput({
              text,
              toolName: call.name,
              args: call.args,
              target: o.taco.target,
              model: modelOf(hook),
              timeoutMs: o.taco.timeoutMs,
              signal: hook.signal,
              count: (t) => counter().countText(t),
            });
            const lines = text.split("\n").length;
            const where = o.retrieveTool
              ? `full output: ${o.retrieveTool}(id="${id}", startLine, endLine), ${lines} lines`
              : `stored as ${id}`;
            const header = `${DIGEST_PREFIX}: ${call.name}, ${rawTokens} → ~${counter().countText(produced.text)} tokens (${produced.method}); ${where}]`;
            const content = `${header}\n${produced.text}`;
            const tokens = counter().countText(content);
            if (produced.fallback && produced.fallback !== "no model") {
              out.push({
                kind: "diagnostic",
                level: "warn",
                code: "KEEL_COMPACTION_MODEL_FAILED",
                message: new KeelError(
                  "KEEL_COMPACTION_MODEL_FAILED",
                  `digest of ${call.name} output: ${produced.fallback}.`,
                  { plugin: PLUGIN_NAME, phase: "tool.post_result", tool: call.name },
                ).message,
              });
            }
            out.push({
              kind: "diagnostic",
              level: "info",
              code: "compaction.taco",
              message: `${call.name} output compressed ${rawTokens} → ${tokens} tokens (${produced.method}).`,
              data: {
                toolCallId: call.id,
                tool: call.name,
                rawTokens,
                tokens,
                method: produced.method,
                ...(produced.fallback ? { fallback: produced.fallback } : {}),
                id,
              },
            });
            return [
              {
                kind: "tool_result_rewrite",
                content,
                reason: `taco: ${rawTokens} → ${tokens} tokens (${produced.method}), raw kept as ${id}`,
              },
              ...out,
            ];
          },
          { stage: "post", timeoutMs: o.taco.timeoutMs + 5_000 },
        );
      }

      // The model's own pruning requests, then intra-turn pruning: before context pressure looks.
      if (o.prun) {
        const tool = prunTool(o.prun, (id) => sessions.get(id)?.lastMessages ?? []);
        ctx.on(
          "turn.pre_tool_materialization",
          () => ({ kind: "tool_bundle", bundleId: "compaction-prun", domain: "compaction", tools: [tool] }),
          { id: "prun-tool" },
        );
      }
      if (o.prune.enabled) {
        ctx.on(
          "tool.post_result",
          (e) => {
            const s = state(e.sessionId);
            if (s.categories.size > 10_000) s.categories.clear();
            s.categories.set(e.call.id, e.call.category);
            return undefined;
          },
          { id: "prune-categories" },
        );
      }
      if (o.prun || o.prune.enabled) {
        ctx.on(
          "round.pre_request",
          (e) => {
            if (e.retry) return undefined;
            const s = state(e.sessionId);
            const out: Array<ContributionInputOf<"message_edit"> | Diagnostic> = [];
            let messages = e.messages;
            if (o.prun) {
              const edits = prunEdits(messages, o.prun);
              if (edits.length) {
                out.push({
                  kind: "message_edit",
                  reason: `prun: the model dropped ${edits.length} stale tool output(s)`,
                  edits,
                });
                messages = applyMessageEdits(messages, edits);
              }
            }
            if (o.prune.enabled && e.round >= o.prune.fromRound) {
              const c = counter();
              let start = messages.findLastIndex((m) => m.role === "user" && plainText(m) === e.input);
              if (start < 0) start = messages.findLastIndex((m) => m.role === "user");
              const keep = new Set([o.prun, o.retrieveTool].filter((n): n is string => typeof n === "string"));
              const r =
                start < 0
                  ? undefined
                  : pruneTurn(messages, start, {
                      ...o.prune,
                      keep,
                      informational: (id) => s.categories.get(id) === "info",
                      countText: (t) => (c.loaded ? c.countText(t) : Math.ceil(t.length / 4)),
                    });
              if (r) {
                const edits = diffEdits(messages, r.messages);
                const n = r.report;
                const what = [
                  n.failed.length ? `${n.failed.length} failed` : "",
                  n.empty.length ? `${n.empty.length} empty` : "",
                  n.duplicate.length ? `${n.duplicate.length} repeated` : "",
                ]
                  .filter(Boolean)
                  .join(", ");
                const summary = `${what ? `removed ${what} tool-call branch(es)` : ""}${what && n.thinkingStripped ? "; " : ""}${n.thinkingStripped ? `stripped reasoning from ${n.thinkingStripped} older assistant message(s)` : ""}`;
                if (edits.length) out.push({ kind: "message_edit", reason: `intra-turn pruning: ${summary}`, edits });
                out.push({
                  kind: "diagnostic",
                  level: "info",
                  code: "compaction.pruned",
                  message: `Round ${e.round}: ${summary}.`,
                  data: { round: e.round, ...n },
                });
              }
            }
            return out.length ? out : undefined;
          },
          // Before the context-pressure handler (same stage, lower priority runs first).
          { id: "prune", stage: "post", priority: -1 },
        );
      }

      // Context pressure.
      ctx.on(
        "round.pre_request",
        async (e, hook) => {
          const s = state(e.sessionId);
          const exact = counter().loaded;
          const window = o.window ?? e.contextWindow;
          if (!e.retry) s.round++;
          s.lastMessages = e.messages;
          if (subgoalsOn) s.registry.observe(e.messages);
          if (!window) return undefined;
          const lowBound = e.tokenEstimate * Math.max(1, s.calibration);
          // Without the tokenizer loaded, the kernel gives a proven upper bound (the request's UTF-8
          // bytes: no token is shorter than a byte): a request under the soft threshold by it is surely below.
          const bound = e.tokenCount.exact
            ? undefined
            : (e.tokenCount.bound ?? e.tokenEstimate * 12) * Math.max(1, s.calibration);
          if (!e.retry && (exact ? lowBound < o.soft * window * 0.8 : bound !== undefined && bound < o.soft * window)) {
            s.lastEstimate = e.tokenEstimate;
            return undefined;
          }
          const c = counter();
          const overhead = e.tokenCount.system + e.tokenCount.tools;
          const key = `${e.turnId}#${e.round}`;
          const force = e.retry?.reason === "context_too_long" && !s.answered.has(key);
          if (e.retry && !force) return undefined;
          if (force) s.answered.add(key);
          const estimate = overhead + c.countMessages(e.messages);
          if (!force && estimate * Math.max(1, s.calibration) < o.soft * window) {
            s.lastEstimate = estimate;
            return undefined;
          }
          if (subgoalsOn && s.pending && o.subgoals.waitMs > 0)
            await Promise.race([s.pending, new Promise((r) => setTimeout(r, o.subgoals.waitMs).unref?.())]);
          const pinned = new Set<number>();
          const first = e.messages.findIndex((m) => m.role === "user");
          if (first >= 0) pinned.add(first);
          e.messages.forEach((m, i) => {
            if (m.role === "user" && plainText(m) === e.input) pinned.add(i);
          });
          // Everything the person said in this turn stays: its input and any message steered into it
          // (not this plugin's own summaries: pinned, they would pile up instead of being merged; known
          // by the text it wrote, not by the prefix, which a person may paste or type).
          const inputAt = e.messages.findLastIndex((m) => m.role === "user" && plainText(m) === e.input);
          // One this plugin wrote in an earlier process of this turn (resumed after an approval) is in the store.
          if (inputAt >= 0) {
            for (const m of e.messages.slice(inputAt + 1)) {
              if (!isSummary(m) || s.summaries.has(plainText(m))) continue;
              const k = summaryKey(e.sessionId, plainText(m));
              // A store that cannot answer leaves the message pinned (the safe side: nothing the person said is lost).
              const rec = await Promise.resolve()
                .then(() => store.get(k.id, e.sessionId))
                .catch(() => undefined);
              if (rec?.kind === "summary" && rec.toolCallId === k.digest) s.summaries.add(plainText(m));
            }
          }
          const ours = (m: Message) => isSummary(m) && s.summaries.has(plainText(m));
          if (inputAt >= 0)
            e.messages.forEach((m, i) => void (i > inputAt && m.role === "user" && !ours(m) && pinned.add(i)));
          const goalMsg = e.messages[first];
          if (subgoalsOn)
            s.registry.capActive(e.messages, (m) => c.countMessage(m), o.subgoals.maxActiveShare * window);
          const result = await compactHistory({
            messages: e.messages,
            overhead,
            window,
            calibration: Math.max(1, s.calibration),
            pinned,
            force,
            state: s,
            registry: s.registry,
            options: o,
            countText: (t) => c.countText(t),
            countMessage: (m) => c.countMessage(m),
            stash: (m, kind) => {
              const id = rawId(kind, e.sessionId, m.toolCallId);
              store.put({
                id,
                sessionId: e.sessionId,
                toolCallId: m.toolCallId,
                toolName: m.toolName,
                kind,
                text: plainText(m),
                tokens: c.countMessage(m),
                createdAt: Date.now(),
              });
              return id;
            },
            model: modelOf(hook),
            signal: hook.signal,
            goal: goalMsg ? plainText(goalMsg) : e.input,
          });
          if (!result) {
            s.lastEstimate = estimate;
            return force
              ? {
                  kind: "diagnostic",
                  level: "warn",
                  code: "KEEL_COMPACTION_EXHAUSTED",
                  message: new KeelError(
                    "KEEL_COMPACTION_EXHAUSTED",
                    "the provider said the context is too long but nothing was left to compact",
                    { plugin: PLUGIN_NAME, phase: "round.pre_request" },
                  ).message,
                }
              : undefined;
          }
          const r = result.report;
          s.lastMessages = result.messages;
          if (r.summary) {
            for (const m of result.messages) {
              if (!isSummary(m) || e.messages.includes(m)) continue;
              const text = plainText(m);
              s.summaries.add(text);
              const k = summaryKey(e.sessionId, text);
              // Only the digest is kept: the summary itself is in the session log.
              store.put({
                id: k.id,
                sessionId: e.sessionId,
                toolCallId: k.digest,
                toolName: "summary",
                kind: "summary",
                text: "",
                tokens: 0,
                createdAt: Date.now(),
              });
            }
          }
          s.lastEstimate = Math.round(r.tokensAfter / Math.max(1, s.calibration));
          const out: Array<ContributionInputOf<"message_edit"> | Diagnostic> = [
            ...storeDiagnostic(s, "round.pre_request"),
          ];
          const edits = diffEdits(e.messages, result.messages);
          const what = [
            r.masked.length ? `masked ${r.masked.length} tool outputs` : "",
            r.truncated ? `dropped ${r.truncated} messages` : "",
            r.summary ? `summarised ${r.summary.messages} messages (${r.summary.method})` : "",
            r.orphansDropped.length ? `stripped ${r.orphansDropped.length} orphaned results` : "",
          ]
            .filter(Boolean)
            .join(", ");
          if (edits.length)
            out.push({
              kind: "message_edit",
              reason: `compaction ${r.strategy}${r.forced ? " (context_too_long)" : ""}: ${r.tokensBefore} → ${r.tokensAfter} tokens; ${what}`,
              edits,
            });
          const data = { ...r, subgoals: subgoalsOn ? s.registry.spans(result.messages) : [] };
          out.push({
            kind: "diagnostic",
            level: "info",
            code: "compaction.applied",
            message: `${r.strategy}${r.forced ? " after context_too_long" : ""}: ${r.tokensBefore} → ${r.tokensAfter} of ${window} tokens${what ? `; ${what}` : ""}${r.hardSkipped ? `; hard stage skipped (${r.hardSkipped})` : ""}.`,
            data: JSON.parse(JSON.stringify(data)),
          });
          if (r.summary?.fallback && r.summary.fallback !== "no model") {
            out.push({
              kind: "diagnostic",
              level: "warn",
              code: "KEEL_COMPACTION_MODEL_FAILED",
              message: new KeelError("KEEL_COMPACTION_MODEL_FAILED", `turn summary: ${r.summary.fallback}.`, {
                plugin: PLUGIN_NAME,
                phase: "round.pre_request",
              }).message,
            });
          }
          if (r.hardSkipped === "not_smaller" || r.hardSkipped === "nothing_to_summarise") {
            out.push({
              kind: "diagnostic",
              level: "warn",
              code: "KEEL_COMPACTION_EXHAUSTED",
              message: new KeelError(
                "KEEL_COMPACTION_EXHAUSTED",
                `hard compaction at ${r.tokensAfter} of ${window} tokens: ${r.hardSkipped.replaceAll("_", " ")}`,
                { plugin: PLUGIN_NAME, phase: "round.pre_request" },
              ).message,
            });
          }
          return out;
        },
        { stage: "post", timeoutMs: o.summaryTimeoutMs + o.subgoals.waitMs + 5_000 },
      );

      // Calibration and subgoal extraction.
      ctx.on("round.post_response", (e, hook) => {
        const s = state(e.sessionId);
        const u = e.usage;
        const reported = (u.inputTokens ?? 0) + (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0);
        if (reported > 0 && s.lastEstimate >= 200) {
          const sample = Math.min(2, Math.max(0.5, reported / s.lastEstimate));
          s.calibration = s.calibration * (1 - o.calibrationAlpha) + sample * o.calibrationAlpha;
        }
        if (subgoalsOn && e.round % o.subgoals.every === 0) extract(s, [...s.lastMessages, e.response], hook);
        return undefined;
      });
      if (subgoalsOn) {
        ctx.on("turn.post_turn", (e, hook) => {
          extract(state(e.sessionId), [...e.history, ...e.messages], hook);
          return undefined;
        });
      }
      ctx.on("session.end", async (e) => {
        sessions.delete(e.sessionId);
        if (!sessions.size) await store.close();
        return undefined;
      });

      function extract(s: SessionState, messages: readonly Message[], hook: HookContext): void {
        const recent = messages.slice(-o.subgoals.window);
        const claimFrom: string[] = [];
        const lastAssistant = recent.findLastIndex((m) => m.role === "assistant");
        if (lastAssistant >= 0) {
          const at = messages.length - recent.length + lastAssistant;
          const keys = messageKeys(messages);
          for (let i = at; i < messages.length; i++) {
            claimFrom.push(keys[i]!);
            // Results of its calls may arrive before the extraction settles.
            for (const b of messages[i]!.content) if (b.type === "tool_call") claimFrom.push(`r:${b.id}`);
          }
        }
        const model = o.subgoals.extractor === "model" ? modelOf(hook) : undefined;
        const run = async (): Promise<void> => {
          let x: Extraction;
          if (model) {
            try {
              const p = extractionPrompt(recent, s.registry.active);
              x = parseExtraction(
                await ask(model, p.system, p.user, { maxTokens: 120, timeoutMs: o.subgoals.timeoutMs }),
                !!s.registry.active,
              );
            } catch {
              x = heuristicExtraction(recent, s.registry.active);
            }
          } else x = heuristicExtraction(recent, s.registry.active);
          s.registry.apply(x, claimFrom);
        };
        const prev = s.pending ?? Promise.resolve();
        const p: Promise<void> = prev
          .then(run)
          .catch(() => undefined)
          .finally(() => {
            if (s.pending === p) s.pending = undefined;
          });
        s.pending = p;
      }
    },
  });
}

/** True when TACO may compress this tool's output. */
export function compressible(e: PhaseEvent<"tool.post_result">, o: ResolvedOptions): boolean {
  const { name, category } = e.call;
  if (name === o.retrieveTool || o.taco.exclude.includes(name)) return false;
  if ((category === "mcp" || name.startsWith("mcp__")) && !o.taco.includeMcp) return false;
  return o.taco.tools.includes(name) || o.taco.categories.includes(category);
}
