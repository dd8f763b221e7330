/**
 * @keel/plugin-user-model — Wayland's StyleDetector and UserModelBackend (steps 1–2). Each user
 * turn is observed first (turn.pre_policy): the message, redacted, gives signals about the
 * detail the person wants, their tone and the words they keep using, folded into a profile of
 * the turn's namespace. Once a profile has enough turns it shapes a small prompt section. The
 * person can see and reset their profile through two tools; the host through the store.
 */
import { join } from "node:path";
import { z } from "zod";
import { definePlugin, defineTool, errorMessage } from "@keel/kernel";
import { codePointSlice, toWellFormed } from "@keel/text";
import { redact } from "@keel/secrets";
import { detectStyle } from "./style.ts";
import { UserModelStore } from "./store.ts";
import type { UserProfile } from "./store.ts";

export { detectStyle } from "./style.ts";
export type { StyleSignals } from "./style.ts";
export { UserModelStore } from "./store.ts";
export type { UserProfile } from "./store.ts";

export const PLUGIN_NAME = "@keel/plugin-user-model";
export const PLUGIN_VERSION = "0.1.0";

/** Options of userModel(). Contract: all optional. */
export interface UserModelOptions {
  /** Default `<KEEL_HOME>/user-model.sqlite`. */
  path?: string;
  /** Namespace when the turn's metadata names none (as @keel/plugin-memory). Default "default". */
  namespace?: string;
  /** The metadata field naming the user. Default "userId". */
  namespaceKey?: string;
  /** Turns observed before the profile shapes the prompt. Default 3. */
  minTurns?: number;
  /** Offer `user_profile` and `user_profile_reset` to the model, for the person to see or reset it. Default true. */
  tools?: boolean;
}

const Options = z.strictObject({
  path: z.string().min(1).optional(),
  namespace: z.string().min(1).max(200).default("default"),
  namespaceKey: z.string().min(1).default("userId"),
  minTurns: z.number().int().min(1).default(3),
  tools: z.boolean().default(true),
});

/** The few lines a profile puts in the prompt, or "" when it says nothing yet. */
export function describeProfile(p: UserProfile, minTurns = 3): string {
  if (p.turns < minTurns) return "";
  const lines: string[] = [];
  if (p.detail <= -0.3 || (p.detail < 0.3 && p.words > 0 && p.words < 12)) lines.push("Prefers brief, direct answers.");
  else if (p.detail >= 0.3) lines.push("Prefers detailed answers with explanations.");
  if (p.tone <= -0.3) lines.push("Writes casually; a relaxed tone suits them.");
  else if (p.tone >= 0.3) lines.push("Writes formally; keep a formal tone.");
  const terms = Object.entries(p.terms)
    .filter(([, n]) => n >= 2)
    .slice(0, 10)
    .map(([t]) => t);
  if (terms.length) lines.push(`Often talks about: ${terms.join(", ")}.`);
  return lines.join("\n");
}

/** The plugin. Contract: observation never fails a turn; no secret reaches the store (messages are redacted first). */
export function userModel(options: UserModelOptions = {}) {
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description:
      "Learns a person's preferred detail, tone and vocabulary per namespace, and shapes a small prompt section.",
    options: Options,
    input: options as z.input<typeof Options>,
    setup(ctx) {
      const o = ctx.options as z.output<typeof Options>;
      const store = new UserModelStore(o.path ?? join(ctx.storage.home, "user-model.sqlite"));
      const open = new Set<string>();
      const namespaceOf = (metadata: Readonly<Record<string, unknown>>) => {
        const v = metadata[o.namespaceKey];
        return typeof v === "string" && v && v.length <= 200 ? v : o.namespace;
      };
      /** The namespace of each running turn, for the tools (the model never picks it). */
      const turns = new Map<string, string>();

      ctx.on("session.start", (e) => void open.add(e.sessionId));
      ctx.on("turn.pre_policy", (e) => {
        const ns = namespaceOf(e.metadata);
        turns.set(e.turnId, ns);
        if (e.trigger !== "user" || !e.input.trim()) return undefined;
        try {
          store.observe(ns, detectStyle(codePointSlice(redact(toWellFormed(e.input)), 0, 20_000)));
          return undefined;
        } catch (err) {
          return {
            kind: "diagnostic",
            level: "warn",
            code: "USER_MODEL_FAILED",
            message: `The user model could not record this turn: ${errorMessage(err)}. The turn goes on without it.`,
          };
        }
      });
      ctx.on("turn.pre_prompt_compile", (e) => {
        const text = describeProfile(store.profile(namespaceOf(e.metadata)), o.minTurns);
        return text
          ? {
              kind: "prompt_section",
              id: "user-model:profile",
              sectionId: "user_profile",
              domain: "user_model",
              title: "About this user (learned from their messages)",
              content: text,
              maxChars: 600,
            }
          : undefined;
      });
      if (o.tools) {
        const show = defineTool({
          name: "user_profile",
          description:
            "Show what has been learned about the user's style (detail, tone, recurring words). Use it when the user asks what you know about how they write.",
          input: z.strictObject({}),
          category: "info",
          execute: (_a, tc) => {
            const p = store.profile(turns.get(tc.turnId) ?? o.namespace);
            return p.turns
              ? JSON.stringify({
                  turnsObserved: p.turns,
                  averageWords: p.words,
                  detail: p.detail,
                  tone: p.tone,
                  recurringWords: Object.entries(p.terms)
                    .filter(([, n]) => n >= 2)
                    .slice(0, 20)
                    .map(([t]) => t),
                  promptSection: describeProfile(p, o.minTurns) || "(none yet)",
                })
              : "Nothing has been learned about this user yet.";
          },
        });
        const reset = defineTool({
          name: "user_profile_reset",
          description: "Forget everything learned about the user's style. Use it only when the user asks for it.",
          input: z.strictObject({}),
          category: "edit",
          execute: (_a, tc) =>
            store.reset(turns.get(tc.turnId) ?? o.namespace)
              ? "The learned profile was deleted."
              : "There was no learned profile.",
        });
        ctx.on("turn.pre_tool_materialization", () => ({
          kind: "tool_bundle",
          bundleId: "user-model",
          domain: "user_model",
          tools: [show, reset],
        }));
      }
      ctx.on("turn.post_turn", (e) => void turns.delete(e.turnId));
      ctx.on("session.end", (e) => {
        open.delete(e.sessionId);
        if (!open.size) store.close();
        return undefined;
      });
    },
  });
}

export default userModel;
