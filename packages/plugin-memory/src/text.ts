/** Query-side text processing: tokens, stopwords, and date expressions. */

// Function words and question words: they match nearly every memory and carry no topic.
const STOPWORDS = new Set(
  (
    "a about above after again against all also am an and any are aren't as at be because been before being below between both but by can can't " +
    "cannot could couldn't did didn't do does doesn't doing don't down during each few for from further had hadn't has hasn't have haven't having he he'd " +
    "he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most " +
    "mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't she she'd she'll she's should shouldn't " +
    "so some such than that that's the their theirs them themselves then there there's these they they'd they'll they're they've this those through to " +
    "too under until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while who who's whom why " +
    "why's with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves " +
    "s t d ll re ve m just will shall may might must yes yeah oh ok okay hey hi hello wow really much many get got gets getting go goes going went gone " +
    "thing things something anything kind sort lot lots like likely would well still even ever back way think know tell told say said says make made " +
    "one ones thanks thank please sure"
  ).split(/\s+/),
);

/** True when `word` (lower case) is a stopword. */
export function isStopword(word: string): boolean {
  return STOPWORDS.has(word);
}

/** Lower-case word tokens of `text` (letters, digits, inner apostrophes). */
export function tokens(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+(?:'[\p{L}]+)?/gu) ?? [];
}

/** Content terms of a query: tokens without stopwords and possessive endings, deduplicated, in order. */
export function queryTerms(text: string, max = 24): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  for (let t of tokens(text)) {
    if (t.endsWith("'s")) t = t.slice(0, -2);
    t = t.replace(/'/g, "");
    if (t.length < 2 || STOPWORDS.has(t) || seen.has(t)) continue;
    seen.add(t);
    out.push(t);
    if (out.length >= max) break;
  }
  return out;
}

const MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];
const MONTH_ABBR = new Map(MONTHS.map((m, i) => [m.slice(0, 3), i] as const));

/** A calendar window a query mentions (UTC ms, end exclusive). */
export interface DateWindow {
  start: number;
  end: number;
}

/**
 * Date windows a text names: "7 May 2023", "May 7, 2023", "May 2023", "2023-05-07", a bare
 * year. Relative words ("yesterday", "last week") resolve against `now` when given.
 */
export function dateWindows(text: string, now?: number): DateWindow[] {
  const out: DateWindow[] = [];
  let lower = text.toLowerCase();
  const consume = (m: RegExpMatchArray) => (lower = lower.slice(0, m.index) + " ".repeat(m[0].length) + lower.slice(m.index! + m[0].length));
  const month = (w: string) => MONTH_ABBR.get(w.slice(0, 3));
  const used = new Set<number>();
  for (const m of [...lower.matchAll(/\b(\d{4})-(\d{2})-(\d{2})\b/g)]) {
    const d = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!);
    out.push({ start: d, end: d + 86_400_000 });
    used.add(+m[1]!);
    consume(m);
  }
  const mon = "(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*";
  for (const m of [...lower.matchAll(new RegExp(`\\b(\\d{1,2})(?:st|nd|rd|th)?\\s+(?:of\\s+)?${mon},?\\s+(\\d{4})\\b`, "g"))]) {
    const d = Date.UTC(+m[3]!, month(m[2]!)!, +m[1]!);
    out.push({ start: d, end: d + 86_400_000 });
    used.add(+m[3]!);
    consume(m);
  }
  for (const m of [...lower.matchAll(new RegExp(`\\b${mon}\\s+(\\d{1,2})(?:st|nd|rd|th)?,?\\s+(\\d{4})\\b`, "g"))]) {
    const d = Date.UTC(+m[3]!, month(m[1]!)!, +m[2]!);
    out.push({ start: d, end: d + 86_400_000 });
    used.add(+m[3]!);
    consume(m);
  }
  for (const m of lower.matchAll(new RegExp(`\\b${mon},?\\s+(\\d{4})\\b`, "g"))) {
    const y = +m[2]!;
    const mi = month(m[1]!)!;
    out.push({ start: Date.UTC(y, mi, 1), end: Date.UTC(y, mi + 1, 1) });
    used.add(y);
  }
  for (const m of lower.matchAll(/\b(19[5-9]\d|20[0-9]\d)\b/g)) {
    const y = +m[1]!;
    if (!used.has(y)) out.push({ start: Date.UTC(y, 0, 1), end: Date.UTC(y + 1, 0, 1) });
  }
  if (now !== undefined) {
    const day = 86_400_000;
    const today = Math.floor(now / day) * day;
    if (/\byesterday\b/.test(lower)) out.push({ start: today - day, end: today });
    if (/\btoday\b/.test(lower)) out.push({ start: today, end: today + day });
    if (/\blast week\b/.test(lower)) out.push({ start: today - 14 * day, end: today - 6 * day });
    if (/\blast month\b/.test(lower)) out.push({ start: today - 62 * day, end: today - 27 * day });
    if (/\blast year\b/.test(lower)) {
      const y = new Date(now).getUTCFullYear() - 1;
      out.push({ start: Date.UTC(y, 0, 1), end: Date.UTC(y + 1, 0, 1) });
    }
  }
  return out;
}
