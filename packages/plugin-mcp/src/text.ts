/** Words too common to say anything about which tool fits. */
const STOPWORDS = new Set(
  ("a an and are as at be but by can could do does for from get has have how i if in into is it its me my of on or our please "
    + "should so some than that the their them then there these this those to use used using via want was we what when where which "
    + "who will with would you your all any also about after before each more most other only such same very just need needs make "
    + "given give let lets tool tools mcp server").split(" "),
);

const CJK = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]/;

/** Tokens as the reference ranking cuts them: lowercase alphanumeric runs longer than 3 characters. */
export function referenceTokens(text: string): string[] {
  return text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((t) => t.length > 3);
}

/**
 * Keel's tokens: camelCase and snake/kebab names split, lowercased, stopwords dropped, a
 * light suffix stemmer applied; CJK runs become character bigrams.
 */
export function keelTokens(text: string): string[] {
  const out: string[] = [];
  const spaced = text.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2");
  for (const raw of spaced.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if (!raw) continue;
    if (CJK.test(raw)) {
      for (const run of raw.split(/([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+)/)) {
        if (!run) continue;
        if (CJK.test(run)) {
          if (run.length === 1) out.push(run);
          for (let i = 0; i + 1 < run.length; i++) out.push(run.slice(i, i + 2));
        } else pushWord(out, run);
      }
      continue;
    }
    pushWord(out, raw);
  }
  return out;
}

function pushWord(out: string[], w: string): void {
  if (w.length < 2 || STOPWORDS.has(w)) return;
  out.push(stem(w));
}

/** A light English suffix stemmer (plural, -ing, -ed, -ly); leaves short words alone. */
export function stem(w: string): string {
  if (w.length <= 3 || /\d/.test(w)) return w;
  if (w.endsWith("ies") && w.length > 4) return `${w.slice(0, -3)}y`;
  if (w.endsWith("sses")) return w.slice(0, -2);
  if (w.endsWith("ing") && w.length > 5) return undouble(w.slice(0, -3));
  if (w.endsWith("ed") && w.length > 4) return undouble(w.slice(0, -2));
  if (w.endsWith("ly") && w.length > 5) return w.slice(0, -2);
  if (w.endsWith("es") && /(ch|sh|x|z|ss)es$/.test(w)) return w.slice(0, -2);
  if (w.endsWith("s") && !w.endsWith("ss") && !w.endsWith("us") && !w.endsWith("is")) return w.slice(0, -1);
  return w;
}

function undouble(w: string): string {
  return /([bdfgmnprt])\1$/.test(w) ? w.slice(0, -1) : w;
}
