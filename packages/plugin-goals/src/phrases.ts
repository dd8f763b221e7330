/** Completion phrases: how the model says a goal is done (Zeph's completion heuristic). */

/** Default phrases. Contract: matched case-insensitively as whole words. */
export const DEFAULT_PHRASES: readonly string[] = ["goal complete", "task complete", "goal achieved", "all done"];

/** The first phrase `text` contains as whole words, else undefined. */
export function completionPhrase(text: string, phrases: readonly string[]): string | undefined {
  const t = text.toLowerCase();
  return phrases.find((p) =>
    new RegExp(
      `(^|[^\\p{L}\\p{N}])${p.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}($|[^\\p{L}\\p{N}])`,
      "u",
    ).test(t),
  );
}
