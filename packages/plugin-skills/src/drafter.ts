/**
 * Auto-drafting: a SKILL.md + manifest.json for a task signature that kept succeeding,
 * written atomically (a temp folder renamed into place) under `<skills>/auto/<signature>/`.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { complete } from "@keel/kernel";
import { redact } from "@keel/secrets";
import type { ModelProvider } from "@keel/kernel";
import type { Streak } from "./store.ts";
import { draftDir, sanitizeSignature } from "./signature.ts";

/** What `writeDraft` did. */
export type DraftOutcome =
  | { status: "drafted"; dir: string; source: "model" | "template" }
  | { status: "skipped"; reason: "revoked" | "exists" | "unsafe_signature" }
  | { status: "failed"; message: string };

/**
 * The manifest written beside a draft.
 * Contract: `needs_review` is true and `score` null until a person reviews it (see
 * `reviewDraft`); until then the draft is listed and readable only in `namespace`.
 */
export interface DraftManifest {
  auto_drafted: true;
  signature: string;
  /** The namespace whose turns produced the draft. */
  namespace: string;
  evidence_count: number;
  needs_review: boolean;
  /** ISO time of the review, once reviewed. */
  reviewed_at?: string;
  score: null;
  created_at: string;
  source: "model" | "template";
  skills_used: string[];
}

/** The deterministic body used when no model is available or it fails. */
export function templateBody(streak: Streak): string {
  const examples = streak.examples
    .map(
      (e, i) =>
        `### Example ${i + 1}\n\nRequest:\n\n> ${e.input.replace(/\n/g, "\n> ")}\n\nWhat worked:\n\n> ${(e.answer || "(no final text)").replace(/\n/g, "\n> ")}`,
    )
    .join("\n\n");
  return `# ${streak.signature}\n\nDrafted automatically after ${streak.count} consecutive successful turns on requests like these. Review, edit and keep it, or revoke it.\n\n## When to use\n\nRequests about: ${streak.signature.split("-").join(", ")}.\n\n## Examples\n\n${examples}\n`;
}

/** Ask the model for a body; undefined on any failure. */
export async function modelBody(
  model: ModelProvider,
  streak: Streak,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const examples = streak.examples
    .map((e, i) => `Example ${i + 1}\nRequest: ${e.input}\nAnswer that worked: ${e.answer}`)
    .join("\n\n");
  try {
    const answer = await complete(
      model,
      {
        system:
          "You write Agent Skills: concise Markdown instructions (no YAML frontmatter) that tell an assistant how to handle a recurring kind of request. Use sections: When to use, Steps, Pitfalls.",
        messages: [
          {
            role: "user",
            content: [
              {
                type: "text",
                text: `Write the body of a skill for requests with the signature "${streak.signature}", from these successful turns:\n\n${examples}`,
              },
            ],
          },
        ],
        options: { maxTokens: 1200 },
      },
      signal ? { signal } : {},
    );
    const text = answer.text.replace(/^---[\s\S]*?\n---\s*/, "").trim();
    return text.length >= 20 ? text : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Write a draft for a streak.
 * Contract: never writes outside `autoDir/<sanitised signature>`; never overwrites an
 * existing draft; a revoked signature is skipped; the folder appears whole or not at all;
 * SKILL.md and manifest.json are redacted by @keel/secrets (a model body that repeats an
 * input's key is written without it); the manifest records the streak's namespace.
 */
export async function writeDraft(options: {
  autoDir: string;
  streak: Streak;
  isRevoked: (signature: string) => boolean | Promise<boolean>;
  model?: ModelProvider | undefined;
  signal?: AbortSignal;
}): Promise<DraftOutcome> {
  const { autoDir, streak } = options;
  const dir = draftDir(autoDir, streak.signature);
  if (!dir) return { status: "skipped", reason: "unsafe_signature" };
  if ((await options.isRevoked(streak.signature)) || (await options.isRevoked(sanitizeSignature(streak.signature))))
    return { status: "skipped", reason: "revoked" };
  if (existsSync(dir)) return { status: "skipped", reason: "exists" };
  const fromModel = options.model ? await modelBody(options.model, streak, options.signal) : undefined;
  const body = fromModel ?? templateBody(streak);
  const source = fromModel ? "model" : "template";
  const safe = sanitizeSignature(streak.signature);
  const manifest: DraftManifest = {
    auto_drafted: true,
    signature: streak.signature,
    namespace: streak.namespace,
    evidence_count: streak.count,
    needs_review: true,
    score: null,
    created_at: new Date().toISOString(),
    source,
    skills_used: [...new Set(streak.examples.flatMap((e) => (e.skill ? [e.skill] : [])))],
  };
  const description = `Drafted from ${streak.count} successful turns on requests about ${safe.split("-").join(", ")}; needs review.`;
  const skillMd = redact(`---\nname: auto-${safe}\ndescription: ${JSON.stringify(description)}\n---\n\n${body}\n`);
  const tmp = join(autoDir, `.tmp-${safe}-${process.pid}-${Date.now().toString(36)}`);
  try {
    mkdirSync(tmp, { recursive: true });
    writeFileSync(join(tmp, "SKILL.md"), skillMd, { flush: true });
    writeFileSync(join(tmp, "manifest.json"), redact(`${JSON.stringify(manifest, null, 2)}\n`), { flush: true });
    if (existsSync(dir) || (await options.isRevoked(streak.signature))) {
      rmSync(tmp, { recursive: true, force: true });
      return { status: "skipped", reason: existsSync(dir) ? "exists" : "revoked" };
    }
    renameSync(tmp, dir);
    return { status: "drafted", dir, source };
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    return { status: "failed", message: (err as Error).message };
  }
}

/**
 * Mark a draft reviewed: `needs_review: false` and `reviewed_at` in its manifest, written
 * atomically. From then on it is listed and readable in every namespace.
 * Contract: only ever touches `autoDir/<sanitised signature>/manifest.json`; false when there is no such draft.
 */
export function reviewDraft(autoDir: string, signature: string): boolean {
  const dir = draftDir(autoDir, signature);
  if (!dir || !existsSync(join(dir, "manifest.json"))) return false;
  const file = join(dir, "manifest.json");
  const m = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  m.needs_review = false;
  m.reviewed_at = new Date().toISOString();
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify(m, null, 2)}\n`, { flush: true });
  renameSync(tmp, file);
  return true;
}

/** Remove a draft's folder (revocation). Contract: only ever removes `autoDir/<sanitised signature>`. */
export function removeDraft(autoDir: string, signature: string): boolean {
  const dir = draftDir(autoDir, signature);
  if (!dir || !existsSync(dir)) return false;
  rmSync(dir, { recursive: true, force: true });
  return true;
}
