/**
 * Fact extraction from a turn: a model call answering a strict JSON schema, or a
 * deterministic extractor ("my X is Y", "I prefer …", "remember that …", decisions).
 */
import { complete, preview } from "@keel/kernel";
import type { ModelProvider } from "@keel/kernel";
import { z } from "zod";
import { findSecrets } from "./secrets.ts";
import type { MemoryScope } from "./types.ts";

/** One extracted fact before it is stored. */
export interface Fact {
  content: string;
  key?: string;
  category: string;
  importance: number;
  confidence: number;
  scope: MemoryScope;
}

/** The strict schema a model's answer must match. */
export const FactsSchema = z.strictObject({
  facts: z.array(
    z.strictObject({
      content: z.string().min(1).max(500),
      key: z
        .string()
        .regex(/^[a-z0-9_.-]{1,64}$/)
        .nullable()
        .optional(),
      category: z.enum(["profile", "preference", "decision", "note", "project", "event"]),
      importance: z.number().min(0).max(1),
      confidence: z.number().min(0).max(1),
      scope: z.enum(["user", "project", "global"]).optional(),
    }),
  ),
});

const SYSTEM = `You extract durable facts worth remembering from one turn of a conversation between a user and an assistant.
Answer with JSON only, no prose, matching exactly:
{"facts":[{"content":string,"key":string|null,"category":"profile"|"preference"|"decision"|"note"|"project"|"event","importance":0..1,"confidence":0..1,"scope":"user"|"project"|"global"}]}
Rules: at most MAX facts; each a short self-contained statement about the user, their preferences, decisions or projects;
"key" is a stable snake_case id (e.g. "user.favorite_color") when a later fact with the same key should replace this one, else null;
never include passwords, API keys, tokens or other secrets; skip small talk; return {"facts":[]} when nothing is worth keeping.`;

function slug(s: string): string {
  return s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "")
    .slice(0, 48);
}

function clean(s: string): string {
  return s
    .trim()
    .replace(/\s+/g, " ")
    .replace(/[\s,;:]+$/, "")
    .replace(/[.!]+$/, "");
}

function sentences(text: string): string[] {
  return text
    .split(/(?<=[.!?])\s+|\n+/)
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * Deterministic extraction from the user's words.
 * Contract: at most `max` facts; questions and secret-bearing sentences are skipped.
 */
export function extractDeterministic(userText: string, max = 8): Fact[] {
  const out: Fact[] = [];
  const seen = new Set<string>();
  const add = (f: Fact) => {
    const k = f.content.toLowerCase();
    if (!seen.has(k) && f.content.length >= 3 && out.length < max) seen.add(k), out.push(f);
  };
  for (const raw of sentences(userText)) {
    if (out.length >= max) break;
    if (raw.endsWith("?") || findSecrets(raw).length) continue;
    const s = raw.replace(/^(?:also|and|btw|by the way|oh|ok|okay|so|well),?\s+/i, "");
    let m: RegExpExecArray | null;
    if ((m = /\b(?:please\s+)?remember(?:\s+that|:)\s+(.{3,})/i.exec(s))) {
      add({ content: clean(m[1]!), category: "note", importance: 0.8, confidence: 0.9, scope: "user" });
    } else if ((m = /\b(?:my name is|call me)\s+([\p{L}][\p{L}' -]{0,40})/iu.exec(s))) {
      add({
        content: `The user's name is ${clean(m[1]!)}`,
        key: "user.name",
        category: "profile",
        importance: 0.8,
        confidence: 0.9,
        scope: "user",
      });
    } else if ((m = /\bmy\s+([\p{L}\p{N}' -]{2,40}?)\s+(is|are|was)\s+(.{1,200})/iu.exec(s))) {
      const what = clean(m[1]!);
      add({
        content: `The user's ${what} ${m[2]!.toLowerCase() === "was" ? "is" : m[2]!.toLowerCase()} ${clean(m[3]!)}`,
        key: `user.${slug(what)}`,
        category: "profile",
        importance: 0.6,
        confidence: 0.8,
        scope: "user",
      });
    } else if (
      (m =
        /\bI\s+(?:really\s+)?(prefer|like|love|hate|dislike|don't like|do not like|always use|never use|use)\s+(.{2,200})/i.exec(
          s,
        ))
    ) {
      add({
        content: `The user ${m[1]!
          .toLowerCase()
          .replace(/^(?:do not|don't) like$/, "dislikes")
          .replace(/^(prefer|like|love|hate|dislike|use)$/, "$1s")
          .replace(/^always use$/, "always uses")
          .replace(/^never use$/, "never uses")} ${clean(m[2]!)}`,
        category: "preference",
        importance: 0.6,
        confidence: 0.8,
        scope: "user",
      });
    } else if ((m = /\bI\s+(live in|work at|work for|work as|am an?|'m an?)\s+(.{2,120})/i.exec(s))) {
      const rel = m[1]!.toLowerCase().replace(/^'m/, "am");
      const key = rel.startsWith("live")
        ? "user.location"
        : rel.startsWith("work as") || rel.startsWith("am")
          ? "user.role"
          : "user.employer";
      add({
        content: `The user ${rel.replace(/^am/, "is").replace(/^live/, "lives").replace(/^work/, "works")} ${clean(m[2]!)}`,
        key,
        category: "profile",
        importance: 0.6,
        confidence: 0.8,
        scope: "user",
      });
    } else if (
      (m =
        /\b(?:we|i)(?:'ve| have)?\s+(decided|agreed)\s+(?:to\s+|that\s+|on\s+)?(.{3,200})|\b(?:let's go with|we(?:'ll| will) (?:go with|use))\s+(.{2,200})|^decision:\s*(.{3,200})/i.exec(
          s,
        ))
    ) {
      const what = clean(m[2] ?? m[3] ?? m[4] ?? "");
      add({ content: `Decision: ${what}`, category: "decision", importance: 0.7, confidence: 0.8, scope: "project" });
    }
  }
  return out;
}

/**
 * Extraction with a model: one request, the answer parsed against FactsSchema (one retry on
 * a malformed answer). Contract: throws when the model fails twice; secret-bearing facts are dropped.
 */
export async function extractWithModel(
  model: ModelProvider,
  transcript: string,
  max: number,
  signal: AbortSignal,
): Promise<Fact[]> {
  let last: unknown;
  for (let attempt = 0; attempt < 2; attempt++) {
    const answer = await complete(
      model,
      {
        system: SYSTEM.replace("MAX", String(max)),
        messages: [{ role: "user", content: [{ type: "text", text: transcript }] }],
        options: { temperature: 0, maxTokens: 1024 },
      },
      { signal },
    );
    const json = /\{[\s\S]*\}/.exec(answer.text)?.[0];
    try {
      const parsed = FactsSchema.parse(JSON.parse(json ?? ""));
      return parsed.facts
        .filter((f) => !findSecrets(f.content).length)
        .slice(0, max)
        .map((f) => ({
          content: f.content.trim(),
          ...(f.key ? { key: f.key } : {}),
          category: f.category,
          importance: f.importance,
          confidence: f.confidence,
          scope: f.scope ?? "user",
        }));
    } catch (err) {
      last = err;
    }
  }
  throw new Error(
    `the model's answer did not match the facts schema twice: ${last instanceof Error ? preview(last.message, 200) : String(last)}`,
  );
}
