/** The post-turn job: honour a forget request, then extract facts once per turn id. */
import type { ModelProvider } from "@keel/kernel";
import { errorMessage } from "@keel/kernel";
import { headOf, tailOf } from "@keel/text";
import { stem } from "@keel/text/retrieval";
import { extractDeterministic, extractWithModel } from "./extract.ts";
import type { Fact } from "./extract.ts";
import { recall } from "./recall.ts";
import { findSecrets } from "./secrets.ts";
import { queryTerms } from "./text.ts";
import type { MemoryInput, MemoryStore } from "./types.ts";

/** What one extraction job works on. */
export interface ExtractionInput {
  store: MemoryStore;
  namespace: string;
  sessionId: string;
  turnId: string;
  /** The user's words in this turn. */
  userText: string;
  /** The assistant's final text (context for a model extractor only). */
  assistantText: string;
  write: boolean;
  forget?: string;
  /** The model to use, or undefined for the deterministic extractor. */
  model?: ModelProvider;
  maxFacts: number;
  maxChars: number;
}

/** What a job did. */
export interface ExtractionOutcome {
  status: "stored" | "already_extracted" | "writes_off";
  via: "model" | "deterministic" | "none";
  stored: number[];
  forgotten: number[];
  /** Set when the model failed and the deterministic extractor was used. */
  modelError?: string;
}

/** Forget active memories that contain every content word of `what` (soft delete). */
async function forgetMatching(store: MemoryStore, namespace: string, what: string): Promise<number[]> {
  const want = queryTerms(what).map((w) => stem(w));
  if (!want.length) return [];
  const hits = await recall(store, {
    namespace,
    query: what,
    limit: 20,
    maxChars: Infinity,
    itemChars: Infinity,
    showSecrets: true,
  });
  const out: number[] = [];
  for (const h of hits) {
    const have = new Set(queryTerms(h.memory.content, 200).map((w) => stem(w)));
    if (want.every((w) => have.has(w)) && (await store.forget(namespace, h.memory.id, "the user asked to forget it")))
      out.push(h.memory.id);
  }
  return out;
}

/**
 * Run one post-turn extraction.
 * Contract: idempotent per turn id (facts and the extraction mark commit together, so a
 * retry after a failure or a success never duplicates); secret-bearing facts are never stored.
 */
export async function runExtraction(x: ExtractionInput, signal: AbortSignal): Promise<ExtractionOutcome> {
  const forgotten = x.forget ? await forgetMatching(x.store, x.namespace, x.forget) : [];
  if (!x.write) return { status: "writes_off", via: "none", stored: [], forgotten };
  if (await x.store.isExtracted(x.turnId)) return { status: "already_extracted", via: "none", stored: [], forgotten };
  const user = tailOf(x.userText, x.maxChars);
  let facts: Fact[] | undefined;
  let via: ExtractionOutcome["via"] = "deterministic";
  let modelError: string | undefined;
  if (x.model && user.trim()) {
    const transcript = headOf(`User: ${user}\n\nAssistant: ${x.assistantText}`, x.maxChars);
    try {
      facts = await extractWithModel(x.model, transcript, x.maxFacts, signal);
      via = "model";
    } catch (err) {
      if (signal.aborted) throw err;
      modelError = errorMessage(err);
    }
  }
  facts ??= extractDeterministic(user, x.maxFacts);
  const inputs: MemoryInput[] = facts
    .filter((f) => !findSecrets(f.content).length)
    .slice(0, x.maxFacts)
    .map((f) => ({
      namespace: x.namespace,
      content: f.content,
      scope: f.scope,
      category: f.category,
      importance: f.importance,
      confidence: f.confidence,
      ...(f.key ? { key: f.key } : {}),
      source: { sessionId: x.sessionId, turnId: x.turnId, via: via === "model" ? "model_extractor" : "extractor" },
    }));
  const written = await x.store.writeExtraction(x.turnId, x.namespace, inputs);
  return {
    status: "stored",
    via,
    stored: written.filter((w) => !w.duplicate).map((w) => w.memory.id),
    forgotten,
    ...(modelError ? { modelError } : {}),
  };
}
