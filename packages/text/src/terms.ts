/**
 * The one tokenizer of Keel's retrieval: words as SQLite FTS5's `unicode61` tokenizer cuts
 * them, lowercased, English stopwords dropped, Porter-stemmed. What a plugin needs beyond that
 * (camelCase names, CJK bigrams, its own extra stopwords, a lighter stemmer, FTS5's exact
 * tokens) is an option.
 */
import { stemmer } from "stemmer";

/**
 * English function words: they occur in nearly every text and name no topic. Contracted negations
 * ("couldnt", "didnt") are not among them: "Audrey couldn't walk her dogs" is about not walking.
 * Contract: lowercase, apostrophes removed ("you're" is "youre"), the default of `tokenize`.
 */
export const STOPWORDS: ReadonlySet<string> = new Set(
  (
    "a about above after again against all also am an and any are as at be because been before being below between both but by can cannot " +
    "could did do does doing down during each few for from further get got had has have having he her here hers herself him himself his " +
    "how i if in into is it its itself just let me more most my myself no nor not now of off on once only or other ought our ours " +
    "ourselves out over own same she should so some such than that the their theirs them themselves then there these they this those " +
    "through to too under until up very was we were what when where which while who whom why will with would you your yours yourself " +
    "yourselves im ive youre youve youll youd hes shes weve theyre theyve lets thats whats theres heres hi hey hello please thanks thank"
  ).split(/\s+/),
);

/** Characters of a word: ASCII letters and digits, and every non-ASCII character that is no space, punctuation, symbol or control (FTS5 `unicode61`). */
const W = String.raw`(?:[A-Za-z0-9]|[^\x00-\x7F\p{Z}\p{P}\p{S}\p{C}])`;
const WORD = new RegExp(`${W}+`, "gu");
/** A word with inner apostrophes ("don't", "Ana's"), read as one. */
const WORD_APOSTROPHE = new RegExp(`${W}+(?:['’]${W}+)*`, "gu");
const MARKS = /\p{M}/gu;
const CJK = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]/;
const CJK_RUNS = /([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+)/;
/** Longer tokens are kept as they are (FTS5's porter step leaves them alone too). */
const MAX_STEM = 64;

/**
 * How `tokenize` reads a text. Contract: every option has the default named on it; the
 * defaults are what the retrieval plugins share, each option a behaviour one of them needs.
 */
export interface TokenizeOptions {
  /** Split camelCase and PascalCase words ("readFile" → "read file", "HTTPServer" → "http server"). Default false. */
  camelCase?: boolean;
  /** A run of CJK characters becomes its overlapping character bigrams (one character stays one token). Default false: the run is one token. */
  cjkBigrams?: boolean;
  /**
   * Apostrophes inside a word join it: a possessive "'s" is dropped and other apostrophes
   * removed ("Ana's" → "ana", "don't" → "dont"). Default true; false makes an apostrophe a
   * separator, as FTS5 does.
   */
  apostrophes?: boolean;
  /** Drop combining marks after canonical decomposition ("café" → "cafe"), as FTS5's `remove_diacritics 2`. Default false. */
  foldDiacritics?: boolean;
  /** Words dropped (compared lowercase, before stemming). Default STOPWORDS; false keeps every word. */
  stopwords?: ReadonlySet<string> | false;
  /** More words dropped besides `stopwords` (a plugin's own: "tool", "server", chat fillers). Default none. */
  extraStopwords?: ReadonlySet<string>;
  /** Shortest word kept, in code points. Default 2. */
  minLength?: number;
  /** How words are stemmed (see `stem`); false keeps them as they are. Default "porter". */
  stem?: Stemming | false;
}

/**
 * A stemmer. Contract: `porter` is the Porter stemmer SQLite FTS5's `porter` tokenizer applies
 * (words of 3 to 64 characters; "generally" and "generate" both become "gener"); `light`
 * only takes plural and -ing/-ed/-ly endings off words of 4 or more characters without digits
 * ("files" → "file", "generated" → "generat", "generally" → "general").
 */
export type Stemming = "porter" | "light";

/**
 * The stem of a lowercase word. Contract: deterministic; words under 3 characters come back
 * unchanged; `porter` (the default) gives the stem SQLite FTS5's `porter` tokenizer gives.
 */
export function stem(word: string, stemming: Stemming = "porter"): string {
  if (stemming === "light") return lightStem(word);
  if (word.length < 3 || word.length > MAX_STEM) return word;
  let s = porterCache.get(word);
  if (s === undefined) {
    // A vocabulary repeats: remembering stems makes Porter several times faster (bounded).
    if (porterCache.size >= PORTER_CACHE) porterCache.clear();
    porterCache.set(word, (s = stemmer(word)));
  }
  return s;
}

const PORTER_CACHE = 20_000;
const porterCache = new Map<string, string>();

function lightStem(w: string): string {
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

/** "stopp" → "stop", "plann" → "plan": the consonant an -ing or -ed ending doubled. */
function undouble(w: string): string {
  return /([bdfgmnprt])\1$/.test(w) ? w.slice(0, -1) : w;
}

/** True when `word` (lowercase, apostrophes removed) is one of STOPWORDS. */
export function isStopword(word: string): boolean {
  return STOPWORDS.has(word);
}

/**
 * The tokens of a text, in order, repeats kept: words cut as FTS5's `unicode61` cuts them,
 * lowercased, stopwords and words shorter than `minLength` dropped, stemmed.
 * Contract: deterministic; never returns an empty token; the options change only what
 * their own documentation says.
 */
export function tokenize(text: string, options: TokenizeOptions = {}): string[] {
  const o = { apostrophes: true, minLength: 2, stem: "porter" as const, ...options };
  const stop = o.stopwords === undefined ? STOPWORDS : o.stopwords || undefined;
  const extra = o.extraStopwords;
  let src = o.foldDiacritics ? text.normalize("NFD") : text;
  if (o.camelCase) src = src.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2");
  const out: string[] = [];
  const push = (w: string) => {
    if (!w || (w.length < 2 * o.minLength && codePoints(w) < o.minLength) || stop?.has(w) || extra?.has(w)) return;
    out.push(o.stem ? stem(w, o.stem) : w);
  };
  for (const m of src.matchAll(o.apostrophes ? WORD_APOSTROPHE : WORD)) {
    let w = m[0];
    if (o.foldDiacritics) w = w.replace(MARKS, "");
    w = w.toLowerCase();
    if (o.apostrophes && /['’]/.test(w)) w = w.replace(/['’]s$/, "").replace(/['’]/g, "");
    if (o.cjkBigrams && CJK.test(w)) {
      for (const run of w.split(CJK_RUNS)) {
        if (!run) continue;
        if (!CJK.test(run)) push(run);
        else if (run.length === 1) out.push(run);
        else for (let i = 0; i + 1 < run.length; i++) out.push(run.slice(i, i + 2));
      }
      continue;
    }
    push(w);
  }
  return out;
}

function codePoints(w: string): number {
  let n = 0;
  for (let i = 0; i < w.length; i++) {
    const c = w.charCodeAt(i);
    if (c < 0xd800 || c > 0xdbff) n++;
  }
  return n;
}

/** Distinct tokens of a text (see `tokenize`), in first-seen order. */
export function terms(text: string, options: TokenizeOptions = {}): string[] {
  return [...new Set(tokenize(text, options))];
}
