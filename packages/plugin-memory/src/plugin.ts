/**
 * `memory()`: the hook package. Classifier (pre_policy), deterministic recall
 * (pre_prompt_context), optional active recall (post_preflight_prompt_context), tools
 * (pre_tool_materialization), the `memory_recall` section (pre_prompt_compile) and the
 * post-turn extraction job (post_turn). Every hook fails open.
 */
import { complete, definePlugin, errorMessage, KeelError, messageText } from "@keel/kernel";
import { codePointLength, tailOf, truncate } from "@keel/text";
import type { ContributionFor, ErrorCode, KeelPlugin, ModelProvider, PhaseName, TurnEventBase } from "@keel/kernel";
import { z } from "zod";
import { classifyTurn } from "./classify.ts";
import type { TurnClass } from "./classify.ts";
import { runExtraction } from "./job.ts";
import { recall } from "./recall.ts";
import type { Recalled } from "./recall.ts";
import { redactingStore } from "./redacting-store.ts";
import { findSecrets } from "./secrets.ts";
import { defaultMemoryDbPath, SqliteMemoryStore } from "./sqlite-store.ts";
import { PostgresMemoryStore } from "./postgres-store.ts";
import { agentDatabase } from "@keel/store-postgres";
import type { AgentStorage } from "@keel/kernel";
import { memoryTools, renderMemory } from "./tools.ts";
import type { MemoryStore } from "./types.ts";

export const PLUGIN_NAME = "@keel/plugin-memory";
const VERSION = "0.1.0";

const isFn = (v: unknown) => typeof v === "function";
const Provider = z.custom<ModelProvider>((p) => typeof (p as ModelProvider | undefined)?.stream === "function", {
  message: "expected a ModelProvider",
});

/** A host function giving a turn's namespace from its metadata. */
export type NamespaceResolver = (
  metadata: Readonly<Record<string, unknown>>,
  turn: { sessionId: string; turnId: string },
) => string;

/** Options of `memory()`. */
export const MemoryOptionsSchema = z.strictObject({
  /** SQLite file; default `memory.sqlite` in the agent's home. Ignored when `store` is given. */
  path: z.string().min(1).optional(),
  /**
   * The database when `path` is not given: a postgres:// URL (tables in KEEL_DATABASE_SCHEMA,
   * else public) or "sqlite". Default: the agent's (PostgreSQL when its session log is there, else SQLite).
   */
  database: z
    .union([z.literal("sqlite"), z.string().regex(/^postgres(ql)?:\/\//i, 'expected a postgres:// URL or "sqlite"')])
    .optional(),
  /** A ready store (e.g. a PostgreSQL implementation); the host owns and closes it. */
  store: z
    .custom<MemoryStore>(
      (s) => isFn((s as MemoryStore | undefined)?.search) && isFn((s as MemoryStore | undefined)?.write),
      { message: "expected a MemoryStore" },
    )
    .optional(),
  /** Namespace when the turn's metadata names none, or a resolver function. */
  namespace: z
    .union([
      z.string().min(1).max(200),
      z.custom<NamespaceResolver>(isFn, { message: "expected a string or a function" }),
    ])
    .default("default"),
  /** The metadata field naming the user (its value becomes the namespace). */
  namespaceKey: z.string().min(1).default("userId"),
  /** Scope that ranks first. */
  primaryScope: z.enum(["user", "project", "global"]).default("user"),
  recall: z
    .strictObject({
      limit: z.number().int().min(1).max(50).default(8),
      maxChars: z.number().int().min(100).max(50_000).default(4000),
      itemChars: z.number().int().min(50).max(10_000).default(500),
    })
    .prefault({}),
  /** Model-planned recall at turn.post_preflight_prompt_context (one side call per turn). */
  activeRecall: z.boolean().default(false),
  activeRecallTimeoutMs: z.number().int().positive().default(10_000),
  /** `auto`: the `model` option, else the agent's side model unless it replays a script; `deterministic`; `model`; `off`. */
  extraction: z.enum(["auto", "model", "deterministic", "off"]).default("auto"),
  maxFactsPerTurn: z.number().int().min(1).max(32).default(8),
  extractionChars: z.number().int().min(200).max(100_000).default(8000),
  /** The model for extraction and active recall (default: the agent's side model). */
  model: Provider.optional(),
  /** Offer the memory tools. */
  tools: z.boolean().default(true),
  /** Show secret-like memories in recall and tools (they are redacted at write time anyway). */
  showSecrets: z.boolean().default(false),
});

/** What `memory()` accepts. */
export type MemoryOptions = z.input<typeof MemoryOptionsSchema>;
type Resolved = z.output<typeof MemoryOptionsSchema>;

/** Access to the plugin's store for hosts (inspection, export, closing). */
export interface MemoryHandle {
  /** The store, opened on first use. Contract: throws KEEL_MEMORY_STORE_FAILED when it cannot be opened. */
  store(): MemoryStore;
  /** Close a store this plugin opened (a given `store` is left to its owner). */
  close(): Promise<void>;
}

/** The plugin `memory()` returns: a KeelPlugin plus a handle on its store. */
export type MemoryPlugin = KeelPlugin<typeof MemoryOptionsSchema> & { readonly memory: MemoryHandle };

interface TurnState {
  namespace: string;
  cls: TurnClass;
  recalled: Recalled[];
  recallRan: boolean;
}

const DOMAIN = "memory";

/** What a durable extraction job records: flags and the namespace, never the turn's text. */
const ExtractPayload = z.object({
  namespace: z.string().min(1),
  write: z.boolean(),
  model: z.boolean(),
  forgetFromInput: z.boolean(),
  forget: z.string().optional(),
});
type ExtractPayload = z.infer<typeof ExtractPayload>;
const MAX_OPEN_TURNS = 256;

function diag(
  level: "info" | "warn",
  code: ErrorCode,
  problem: string,
  phase: PhaseName,
  data?: Record<string, string | number | boolean>,
) {
  return {
    kind: "diagnostic" as const,
    level,
    code,
    message: new KeelError(code, problem, { plugin: PLUGIN_NAME, phase }).message,
    ...(data ? { data } : {}),
  };
}

/**
 * Durable memory as one hook package.
 * Contract: recall and tools never cross the turn's namespace (metadata[namespaceKey], else
 * `namespace`); secrets are redacted or refused before storage and hidden on read; every hook
 * fails open (a diagnostic, never a failed turn).
 */
export function memory(input?: MemoryOptions): MemoryPlugin {
  let opened: MemoryStore | undefined;
  let owned = false;
  let options: Resolved | undefined;
  /** Where the agent the plugin is set up in keeps its data (its home; its database on PostgreSQL). */
  let storage: AgentStorage | undefined;
  const handle: MemoryHandle = {
    store() {
      if (opened) return opened;
      if (!options)
        throw new KeelError("KEEL_MEMORY_STORE_FAILED", "The plugin is not set up yet: add it to an agent first.", {
          plugin: PLUGIN_NAME,
        });
      if (options.store) opened = redactingStore(options.store);
      else {
        const pg = options.path
          ? undefined
          : options.database !== undefined
            ? options.database === "sqlite"
              ? undefined
              : { url: options.database }
            : storage && agentDatabase(storage);
        opened = pg
          ? new PostgresMemoryStore(pg)
          : new SqliteMemoryStore({ path: options.path ?? defaultMemoryDbPath(storage?.home) });
        owned = true;
      }
      return opened;
    },
    async close() {
      if (opened && owned) await opened.close();
      if (owned) opened = undefined;
    },
  };
  const plugin = definePlugin({
    name: PLUGIN_NAME,
    version: VERSION,
    kernel: "^1.0.0",
    description: "Durable memory: SQLite FTS5 store, ranked recall, memory tools, post-turn extraction",
    options: MemoryOptionsSchema,
    input,
    setup(ctx) {
      storage = ctx.storage;
      const o = (options = ctx.options);
      const turns = new Map<string, TurnState>();
      const namespaceOf = (e: TurnEventBase): string => {
        if (typeof o.namespace === "function") {
          const ns = o.namespace(e.metadata, { sessionId: e.sessionId, turnId: e.turnId });
          if (typeof ns !== "string" || !ns)
            throw new Error(`the namespace resolver returned ${JSON.stringify(ns)}, expected a non-empty string`);
          return ns;
        }
        const v = e.metadata[o.namespaceKey];
        return (typeof v === "string" && v) || (typeof v === "number" && String(v)) || o.namespace;
      };
      const stateOf = (e: TurnEventBase): TurnState => {
        let s = turns.get(e.turnId);
        if (!s) {
          s = { namespace: namespaceOf(e), cls: classifyTurn(e.input), recalled: [], recallRan: false };
          turns.set(e.turnId, s);
          // Turns that never reach post_turn (extraction off, a crash) must not pile up.
          if (turns.size > MAX_OPEN_TURNS) turns.delete(turns.keys().next().value!);
        }
        return s;
      };
      const canWrite = (e: TurnEventBase, s: TurnState) => e.policies.get(DOMAIN, "write") !== false && s.cls.write;
      const wantsRecall = (e: TurnEventBase, s: TurnState) =>
        e.policies.has(DOMAIN, "recall") ? e.policies.get(DOMAIN, "recall") !== false : s.cls.recall;
      const recallCfg = {
        limit: o.recall.limit,
        maxChars: o.recall.maxChars,
        itemChars: o.recall.itemChars,
        primaryScope: o.primaryScope,
        showSecrets: o.showSecrets,
      };
      const contextOf = (items: Recalled[], id: string): ContributionFor<"turn.pre_prompt_context"> => ({
        kind: "prompt_context",
        id,
        domain: DOMAIN,
        priority: 50,
        content: `Memories from earlier sessions (may be outdated; the user's words in this conversation win):\n${items.map((r) => renderMemory(r.memory, o.showSecrets, o.recall.itemChars)).join("\n")}`,
        sourceRefs: items.map((r) => `memory:${r.memory.id}`),
      });
      const deterministic = async (e: TurnEventBase, s: TurnState, id: string) => {
        const store = handle.store();
        const items = await recall(store, { namespace: s.namespace, query: e.input, ...recallCfg });
        s.recalled = items;
        s.recallRan = true;
        if (!items.length) {
          await store.logMiss({ namespace: s.namespace, query: e.input, sessionId: e.sessionId, turnId: e.turnId });
          return [];
        }
        return [contextOf(items, id)];
      };

      // 1. Classifier. If it fails, the fallback forbids writes (we could not hear "don't remember this").
      ctx.on(
        "turn.pre_policy",
        (e) => {
          turns.delete(e.turnId);
          const s = stateOf(e);
          return [
            { kind: "policy", domain: DOMAIN, key: "namespace", value: s.namespace },
            { kind: "policy", domain: DOMAIN, key: "recall", value: s.cls.recall },
            { kind: "policy", domain: DOMAIN, key: "write", value: s.cls.write },
            ...(s.cls.forget ? [{ kind: "policy" as const, domain: DOMAIN, key: "forget", value: s.cls.forget }] : []),
          ];
        },
        {
          id: "memory.classify",
          await: "deadline",
          timeoutMs: 1000,
          failure: "fallback",
          fallback: [{ kind: "policy", domain: DOMAIN, key: "write", value: false }],
        },
      );

      // 2. Deterministic recall (skipped when active recall owns this turn).
      if (!o.activeRecall) {
        ctx.on(
          "turn.pre_prompt_context",
          async (e) => {
            try {
              const s = stateOf(e);
              if (!wantsRecall(e, s)) return;
              return await deterministic(e, s, "memory.recall");
            } catch (err) {
              return diag("warn", "KEEL_MEMORY_RECALL_FAILED", errorMessage(err), "turn.pre_prompt_context");
            }
          },
          { id: "memory.recall", await: "deadline", timeoutMs: 2000 },
        );
      } else {
        // 3. Active recall: the model plans queries under a deadline; deterministic recall on any failure.
        ctx.on(
          "turn.post_preflight_prompt_context",
          async (e, hook) => {
            let s: TurnState;
            try {
              s = stateOf(e);
              if (!wantsRecall(e, s)) return;
            } catch (err) {
              return diag("warn", "KEEL_MEMORY_RECALL_FAILED", errorMessage(err), "turn.post_preflight_prompt_context");
            }
            const model = o.model ?? hook.model;
            let fallbackNote: ContributionFor<"turn.post_preflight_prompt_context"> | undefined;
            if (model) {
              try {
                const items = await activeRecall(model, e, s, o.activeRecallTimeoutMs, hook.signal);
                s.recalled = items;
                s.recallRan = true;
                if (items.length) return [contextOf(items, "memory.recall")];
                await handle
                  .store()
                  .logMiss({ namespace: s.namespace, query: e.input, sessionId: e.sessionId, turnId: e.turnId });
                return;
              } catch (err) {
                fallbackNote = diag(
                  "info",
                  "KEEL_MEMORY_MODEL_FALLBACK",
                  `Active recall failed (${errorMessage(err)}); deterministic recall was used.`,
                  "turn.post_preflight_prompt_context",
                );
              }
            }
            try {
              return [...(await deterministic(e, s, "memory.recall")), ...(fallbackNote ? [fallbackNote] : [])];
            } catch (err) {
              return diag("warn", "KEEL_MEMORY_RECALL_FAILED", errorMessage(err), "turn.post_preflight_prompt_context");
            }
          },
          { id: "memory.active_recall", await: "deadline", timeoutMs: o.activeRecallTimeoutMs + 2000 },
        );
      }

      async function activeRecall(
        model: ModelProvider,
        e: TurnEventBase,
        s: TurnState,
        timeoutMs: number,
        signal: AbortSignal,
      ): Promise<Recalled[]> {
        const ctrl = new AbortController();
        const onAbort = () => ctrl.abort(signal.reason);
        signal.addEventListener("abort", onAbort, { once: true });
        const timer = setTimeout(() => ctrl.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        try {
          const recent = e.history
            .slice(-4)
            .map((m) => `${m.role}: ${truncate(messageText(m), 500)}`)
            .join("\n");
          const answer = await Promise.race([
            complete(
              model,
              {
                system:
                  'Plan memory searches for the user\'s latest message. Answer JSON only: {"queries":[string, ...]} with 1 to 3 short keyword queries.',
                messages: [
                  { role: "user", content: [{ type: "text", text: tailOf(`${recent}\nuser: ${e.input}`, 4000) }] },
                ],
                options: { temperature: 0, maxTokens: 200 },
              },
              { signal: ctrl.signal },
            ),
            new Promise<never>((_, reject) =>
              ctrl.signal.addEventListener("abort", () => reject(ctrl.signal.reason), { once: true }),
            ),
          ]);
          const parsed = z
            .strictObject({ queries: z.array(z.string().min(1).max(300)).min(1).max(3) })
            .parse(JSON.parse(/\{[\s\S]*\}/.exec(answer.text)?.[0] ?? ""));
          const best = new Map<number, Recalled>();
          for (const q of [e.input, ...parsed.queries]) {
            for (const r of await recall(handle.store(), { namespace: s.namespace, query: q, ...recallCfg })) {
              const cur = best.get(r.memory.id);
              if (!cur || cur.score < r.score) best.set(r.memory.id, r);
            }
          }
          const out: Recalled[] = [];
          let chars = 0;
          for (const r of [...best.values()].sort((a, b) => b.score - a.score)) {
            const n = codePointLength(r.text);
            if (out.length >= o.recall.limit || chars + n > o.recall.maxChars) continue;
            chars += n;
            out.push(r);
          }
          return out;
        } finally {
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
        }
      }

      // 4. Tools, confined to the turn's namespace.
      if (o.tools) {
        ctx.on(
          "turn.pre_tool_materialization",
          (e) => {
            try {
              const s = stateOf(e);
              return {
                kind: "tool_bundle",
                bundleId: "memory",
                domain: DOMAIN,
                tools: memoryTools({
                  store: handle.store(),
                  namespace: s.namespace,
                  canWrite: canWrite(e, s),
                  showSecrets: o.showSecrets,
                  sessionId: e.sessionId,
                  turnId: e.turnId,
                }),
              };
            } catch (err) {
              return diag(
                "warn",
                "KEEL_MEMORY_STORE_FAILED",
                `The memory tools are off for this turn: ${errorMessage(err)}`,
                "turn.pre_tool_materialization",
              );
            }
          },
          { id: "memory.tools", await: "deadline", timeoutMs: 1000 },
        );
      }

      // 5. The prompt contract.
      ctx.on(
        "turn.pre_prompt_compile",
        (e) => {
          const s = turns.get(e.turnId);
          const lines = [
            "Long-term memory holds facts, preferences and decisions from earlier sessions with this user.",
          ];
          if (s?.recalled.length)
            lines.push(
              `Recalled for this message: ${s.recalled.map((r) => `#${r.memory.id}${r.memory.key ? ` (${r.memory.key})` : ""}`).join(", ")} — see the memory context entry. Treat them as possibly outdated; what the user says now wins.`,
            );
          else if (s?.recallRan) lines.push("Nothing relevant was recalled for this message.");
          if (o.tools && e.tools.includes("memory_search"))
            lines.push(
              "Use memory_search / memory_get when earlier sessions may matter; memory_remember for durable facts the user wants kept (with a stable key when it may change later); memory_forget when the user asks to forget.",
            );
          if (e.policies.get(DOMAIN, "write") === false || (s && !s.cls.write))
            lines.push("The user asked not to remember this turn: do not store anything from it.");
          lines.push("Never store or repeat secrets (passwords, API keys, tokens).");
          return {
            kind: "prompt_section",
            id: "memory.contract",
            sectionId: "memory_recall",
            title: "Memory",
            domain: DOMAIN,
            priority: 10,
            content: lines.join("\n"),
          };
        },
        { id: "memory.contract", await: "deadline", timeoutMs: 1000 },
      );

      // 6. Post-turn extraction: a durable background job, idempotent per turn id. Its payload
      // holds references and flags only; the runner reads the turn back from the session log,
      // so it re-runs the same after a restart and sees what was said, not what a plugin planted.
      if (o.extraction !== "off") {
        ctx.registerJob("memory.extract", async (payload, job) => {
          const p = ExtractPayload.parse(payload);
          const turn = await job.turn();
          if (!turn)
            throw new KeelError("KEEL_MEMORY_EXTRACT_FAILED", `Turn ${String(job.turnId)} is not in the session log.`, {
              plugin: PLUGIN_NAME,
              phase: "turn.post_turn",
            });
          const model = p.model ? (o.model ?? job.model) : undefined;
          const userText =
            turn.messages
              .filter((m) => m.role === "user")
              .map(messageText)
              .join("\n") || turn.input;
          const forget = p.forget ?? (p.forgetFromInput ? classifyTurn(turn.input).forget : undefined);
          try {
            return await runExtraction(
              {
                store: handle.store(),
                namespace: p.namespace,
                sessionId: job.sessionId,
                turnId: turn.turnId,
                userText,
                assistantText: turn.finalText,
                write: p.write,
                ...(forget ? { forget } : {}),
                ...(model ? { model } : {}),
                maxFacts: o.maxFactsPerTurn,
                maxChars: o.extractionChars,
              },
              job.signal,
            );
          } catch (err) {
            throw new KeelError(
              "KEEL_MEMORY_EXTRACT_FAILED",
              `Turn ${turn.turnId}: ${errorMessage(err)}`,
              { plugin: PLUGIN_NAME, phase: "turn.post_turn" },
              { cause: err },
            );
          }
        });
        ctx.on(
          "turn.post_turn",
          (e, hook) => {
            let s: TurnState;
            try {
              s = stateOf(e);
            } catch (err) {
              turns.delete(e.turnId);
              return diag(
                "warn",
                "KEEL_MEMORY_EXTRACT_FAILED",
                `No extraction for this turn: ${errorMessage(err)}`,
                "turn.post_turn",
              );
            }
            turns.delete(e.turnId);
            const write = canWrite(e, s);
            const policyForget = e.policies.get(DOMAIN, "forget");
            const forget = typeof policyForget === "string" ? policyForget : s.cls.forget;
            if (!write && !forget) return;
            const candidate =
              o.model ??
              (o.extraction === "model" || (o.extraction === "auto" && !hook.model?.id.startsWith("scripted:"))
                ? hook.model
                : undefined);
            const model = o.extraction !== "deterministic" && candidate !== undefined;
            // A forget request from the user's words is re-derived from the log; only a policy's (short, secret-free) value is kept.
            const keepForget =
              typeof policyForget === "string" && policyForget.length <= 200 && !findSecrets(policyForget).length
                ? { forget: policyForget }
                : {};
            const payload: ExtractPayload = {
              namespace: s.namespace,
              write,
              model,
              forgetFromInput: typeof policyForget !== "string" && !!s.cls.forget,
              ...keepForget,
            };
            return {
              kind: "background_job",
              idempotencyKey: `memory.extract:${e.turnId}`,
              name: "memory.extract",
              durable: true,
              payload,
              timeoutMs: 180_000,
              // MECHANICS: three attempts in all, across restarts; the per-turn mark makes a re-run safe.
              attempts: 3,
              retryDelayMs: 500,
            };
          },
          { id: "memory.extract", await: "background" },
        );
      }
    },
  });
  return Object.assign(plugin, { memory: handle });
}
