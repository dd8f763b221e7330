/** Query-side text processing: query terms (@keel/text's tokenizer), frame words, and date expressions. */
import { headOf } from "@keel/text";
import { terms } from "@keel/text/retrieval";
import type { TokenizeOptions } from "@keel/text/retrieval";

// Chat words besides @keel/text's STOPWORDS: fillers, modals and vague nouns and verbs that
// match nearly every turn of a conversation and carry no topic.
const CHAT_STOPWORDS = new Set(
  (
    "shall may might must yes yeah oh ok okay wow really much many gets getting go goes going went gone " +
    "thing things something anything kind sort lot lots like likely well still even ever back way think know tell told say said says make made " +
    "one ones sure"
  ).split(/\s+/),
);

/**
 * Query terms: @keel/text's words (possessive "'s" dropped, "don't" read as "dont"), its
 * STOPWORDS and CHAT_STOPWORDS dropped, unstemmed: the store's full-text index stems them.
 */
export const QUERY_TOKENS: TokenizeOptions = { extraStopwords: CHAT_STOPWORDS, stem: false };

// Words that frame a question about a person rather than name its topic ("How does Ana describe
// …", "Would Ana be considered …", "What type of …", "based on …"); "likely" and "might" are
// stopwords already. Dropped from recall queries.
const FRAME_WORDS = new Set([
  "describe",
  "described",
  "mention",
  "mentioned",
  "consider",
  "considered",
  "based",
  "type",
  "types",
]);

/** True when `word` (lower case) frames a question rather than naming its topic. */
export function isFrameWord(word: string): boolean {
  return FRAME_WORDS.has(word);
}

/** Content terms of a query (QUERY_TOKENS): deduplicated, in order, at most `max`. */
export function queryTerms(text: string, max = 24): string[] {
  return terms(text, QUERY_TOKENS).slice(0, max);
}

const MONTHS = [
  "january",
  "february",
  "march",
  "april",
  "may",
  "june",
  "july",
  "august",
  "september",
  "october",
  "november",
  "december",
];
const MONTH_ABBR = new Map(MONTHS.map((m, i) => [m.slice(0, 3), i] as const));

/** A calendar window a query mentions (UTC ms, end exclusive). */
export interface DateWindow {
  start: number;
  end: number;
}

/** The leading code points of a text that dateWindows reads. */
const DATE_TEXT_CHARS = 2000;

const MONTH_WORD =
  /\b(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t|tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)(?![a-z])/g;
// Month words that are also common English words (the modal "may", the verb "march", "mar").
const AMBIGUOUS_MONTH = new Set(["may", "march", "mar"]);
// A day number that reads as one: "May 5th", "May 5?", "May 5, 2023", "May 5 and 6" (not "May 5 people").
const DAY_AFTER =
  /^\s+\d{1,2}(?:(?:st|nd|rd|th)\b|(?=\s*(?:$|[,.?!;:)]|[-–]\s*\d|(?:and|or|to|through|till|until)\b)))/;
const MONTH_CONTEXT = /\b(?:in|of|during|early|late|mid|since|until|till|by|before|after|from)\s+(?:the\s+)?$/;
// Before a number: words that make it a year, and marks or words that make it a count or a code.
const YEAR_CONTEXT =
  /(?:\b(?:in|since|of|year|during|from|until|till|by|before|after|around|circa|early|late|mid|summer|winter|spring|fall|autumn|january|february|march|april|may|june|july|august|september|october|november|december)\s*,?\s*|\b(?:mid|pre|post)-)$/;
const NOT_YEAR_BEFORE =
  /(?:[$#€£¥@]\s*|\d\.|[a-z]-|\b(?:port|room|no|number|version|model|page|route|flight|bus|exit|over|under|about|nearly|almost|approximately|exactly)\s+)$/;
// After a number: part of a longer token ("2048-token", "2020x", "2020.5") or a unit or counted noun.
const NOT_YEAR_TOKEN = /^(?:[-–]?[a-z]|[.,]\d|\s*[%+])/;
const UNIT_AFTER =
  /^\s+(?:people|persons?|men|women|children|kids|km|kg|mi|m|ft|feet|lbs?|px|pt|kb|mb|gb|tb|ms|mph|kph|rpm|hz|k|x|usd|eur|gbp|ml|mg|g|kcal|meters?|metres?|miles?|tokens?|items?|words?|steps?|dollars?|euros?|calories?|pieces?|points?|pages?|units?|times?|yen)\b/;
const PLURAL_AFTER = /^\s+([a-z]{3,}s)\b/;
const NOT_PLURAL = new Set([
  "was",
  "has",
  "this",
  "his",
  "its",
  "yes",
  "plus",
  "always",
  "perhaps",
  "unless",
  "whereas",
  "thus",
  "does",
  "goes",
  "besides",
  "ours",
  "yours",
  "hers",
  "theirs",
  "afterwards",
  "towards",
]);

/** True when the 4-digit number 1950–2099 at `at` in `lower` (`orig` its original case) reads as a year. */
function isYearAt(lower: string, orig: string, at: number): boolean {
  if (
    !/^(?:19[5-9]\d|20\d\d)$/.test(lower.slice(at, at + 4)) ||
    /\d$/.test(lower.slice(0, at)) ||
    /^\d/.test(lower.slice(at + 4, at + 5))
  )
    return false;
  const before = lower.slice(Math.max(0, at - 30), at);
  const after = lower.slice(at + 4, at + 40);
  if (NOT_YEAR_TOKEN.test(after)) return false;
  if (YEAR_CONTEXT.test(before)) return true;
  if (NOT_YEAR_BEFORE.test(before) || UNIT_AFTER.test(after)) return false;
  // A lowercase plural right after is what is counted ("2021 items"; "the 2022 Olympics" stays a year).
  const pl = PLURAL_AFTER.exec(after);
  return !(pl && !NOT_PLURAL.has(pl[1]!) && /^\s+[a-z]/.test(orig.slice(at + 4, at + 40)));
}

/**
 * Hides the month words of `lower` that read as ordinary words. A full name other than "May" and
 * "March" is always a month; an abbreviation when capitalised; "may", "march" and "mar" when
 * capitalised and not opening a sentence ("in May", but "May I ask"). Otherwise a month word
 * needs a month's company: a year or a day number after it ("may 2023", "May 5th", "May 5?",
 * not "May 5 people"), a day before it ("the 3rd of may"), or a month-context word before it
 * and the end of a clause after it ("in may?", not "in may be").
 */
function hideNonMonths(lower: string, orig: string): string {
  let out = lower;
  for (const m of lower.matchAll(MONTH_WORD)) {
    const w = m[1]!;
    const at = m.index!;
    if (w.length > 4 && !AMBIGUOUS_MONTH.has(w)) continue;
    const capital = /[A-Z]/.test(orig[at]!);
    const opening = /(?:^|[.!?:\n])\s*["'“‘(]?\s*$/.test(orig.slice(Math.max(0, at - 10), at));
    if (capital && (!AMBIGUOUS_MONTH.has(w) || !opening)) continue;
    const before = lower.slice(Math.max(0, at - 30), at);
    const after = lower.slice(at + w.length, at + w.length + 40);
    // The year is read without this word before it, which would make any number a year ("may 2000 times").
    const year = /^,?\s+(?=\d{4}\b)/.exec(after);
    const without = lower.slice(0, at) + "~".repeat(w.length) + lower.slice(at + w.length);
    if (year && isYearAt(without, orig, at + w.length + year[0].length)) continue;
    if (DAY_AFTER.test(after) || /\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?$/.test(before)) continue;
    if (MONTH_CONTEXT.test(before) && /^\s*(?:$|[,.?!;:)])/.test(after)) continue;
    out = out.slice(0, at) + "~".repeat(w.length) + out.slice(at + w.length);
  }
  return out;
}

/**
 * Date windows a text names: "7 May 2023", "May 7, 2023", "May 2023", "2023-05-07", a bare
 * year. Relative words ("yesterday", "last week") resolve against `now` when given. Only the
 * first 2,000 code points are read. Words that only look like dates are skipped: the modal
 * "may" or the verb "march" (see hideNonMonths), a number that is a count, price or code
 * rather than a year ("2000 meters", "$1999", "port 2020", "a 2048-token context").
 */
export function dateWindows(text: string, now?: number): DateWindow[] {
  // Each date read rewrites the text: bounded work on a pasted document (a question names its dates early).
  text = headOf(text, DATE_TEXT_CHARS);
  const out: DateWindow[] = [];
  // Lowercased code unit for code unit, so offsets in `lower` are offsets in `text`.
  let lower = text.replace(/[A-Z]/g, (c) => c.toLowerCase());
  lower = hideNonMonths(lower, text);
  const unread = lower;
  const consume = (m: RegExpMatchArray) =>
    (lower = lower.slice(0, m.index) + " ".repeat(m[0].length) + lower.slice(m.index! + m[0].length));
  const month = (w: string) => MONTH_ABBR.get(w.slice(0, 3));
  const used = new Set<number>();
  const DAY_MS = 86_400_000;
  // A day, or the stretch a leading "the week before" / "the day after" / "the week of" names around it.
  const dated: Array<{ at: number; t: number }> = [];
  const day = (m: RegExpMatchArray, y: number, mi: number, d: number) => {
    const t = Date.UTC(y, mi, d);
    const c = new Date(t);
    // No such day ("February 30", "2023-13-01", year 0099 read as 1999): the text is read, no window made.
    if (c.getUTCFullYear() !== y || c.getUTCMonth() !== mi || c.getUTCDate() !== d) return (used.add(y), consume(m));
    dated.push({ at: m.index!, t });
    const rel = /\b(day|week|weekend|month)\s+(before|after|of)\s+(?:the\s+)?$/.exec(lower.slice(0, m.index));
    const len = rel ? { day: 1, week: 7, weekend: 3, month: 31 }[rel[1] as "day"]! * DAY_MS : 0;
    if (!rel) out.push({ start: t, end: t + DAY_MS });
    else if (rel[2] === "before") out.push({ start: t - len, end: t + DAY_MS });
    else if (rel[2] === "after") out.push({ start: t, end: t + DAY_MS + len });
    else out.push({ start: t - len / 2, end: t + DAY_MS + len / 2 });
    used.add(y);
    consume(m);
  };
  for (const m of [...lower.matchAll(/\b(\d{4})-(\d{2})-(\d{2})\b/g)]) day(m, +m[1]!, +m[2]! - 1, +m[3]!);
  // A month's name or abbreviation, as a whole word ("marathon", "Mark", "decent" are no months).
  const mon =
    "(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t|tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)(?![a-z])";
  for (const m of [
    ...lower.matchAll(new RegExp(`\\b(\\d{1,2})(?:st|nd|rd|th)?\\s+(?:of\\s+)?${mon},?\\s+(\\d{4})\\b`, "g")),
  ])
    day(m, +m[3]!, month(m[2]!)!, +m[1]!);
  for (const m of [...lower.matchAll(new RegExp(`\\b${mon}\\s+(\\d{1,2})(?:st|nd|rd|th)?,?\\s+(\\d{4})\\b`, "g"))])
    day(m, +m[3]!, month(m[1]!)!, +m[2]!);
  // A day without its year ("August 11 and August 15 2023", "on the 3rd of May"): the year the text names, else each of the last three.
  const named = [...unread.matchAll(/\b(19[5-9]\d|20\d\d)\b/g)].find((m) => isYearAt(unread, text, m.index!));
  const years = named
    ? [+named[1]!]
    : now !== undefined
      ? [0, 1, 2].map((k) => new Date(now).getUTCFullYear() - k)
      : [];
  const withYear = dated.slice();
  // The named year, moved by one so the day keeps its order with the dated day nearest it in the
  // text ("between December 28 and January 3 2023" starts in 2022).
  const yearOf = (at: number, y: number, mi: number, d: number) => {
    if (!named || !withYear.length) return y;
    const near = withYear.reduce((a, b) => (Math.abs(b.at - at) < Math.abs(a.at - at) ? b : a));
    const t = Date.UTC(y, mi, d);
    return at < near.at && t > near.t ? y - 1 : at > near.at && t < near.t ? y + 1 : y;
  };
  for (const re of [
    `\\b(\\d{1,2})(?:st|nd|rd|th)?\\s+of\\s+${mon}\\b`,
    `\\b${mon}\\s+(\\d{1,2})(?:st|nd|rd|th)?\\b(?!\\s*(?:,\\s*)?\\d)`,
  ]) {
    for (const m of [...lower.matchAll(new RegExp(re, "g"))]) {
      const [d, mi] = /^\d/.test(m[1]!) ? [+m[1]!, month(m[2]!)!] : [+m[2]!, month(m[1]!)!];
      if (d < 1 || d > 31) continue;
      for (const y of years) day(m, yearOf(m.index!, y, mi, d), mi, d);
    }
  }
  // "between <day> and <day>": the whole stretch.
  if (/\bbetween\b/.test(lower) && out.length >= 2) {
    const start = Math.min(...out.map((w) => w.start));
    const end = Math.max(...out.map((w) => w.end));
    if (end - start <= 400 * DAY_MS) out.push({ start, end });
  }
  for (const m of lower.matchAll(new RegExp(`\\b${mon},?\\s+(\\d{4})\\b`, "g"))) {
    if (!isYearAt(unread, text, m.index! + m[0].length - 4)) continue;
    const y = +m[2]!;
    const mi = month(m[1]!)!;
    out.push({ start: Date.UTC(y, mi, 1), end: Date.UTC(y, mi + 1, 1) });
    used.add(y);
  }
  if (now !== undefined) {
    // A month without a year ("in May", "early June"): that month in each of the last three years.
    const y0 = new Date(now).getUTCFullYear();
    for (const m of [
      ...lower.matchAll(
        new RegExp(`\\b(?:in|of|during|early|late|mid|since)\\s+(?:the\\s+)?${mon}\\b(?!\\s*,?\\s*\\d)`, "g"),
      ),
    ]) {
      const mi = month(m[1]!)!;
      for (let y = y0 - 2; y <= y0; y++) out.push({ start: Date.UTC(y, mi, 1), end: Date.UTC(y, mi + 1, 1) });
    }
  }
  for (const m of lower.matchAll(/\b(19[5-9]\d|20[0-9]\d)\b/g)) {
    if (!isYearAt(unread, text, m.index!)) continue;
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

/** True when a question asks for a time ("When …", "what year/month/date", "how long ago"). */
export function isWhenQuestion(text: string): boolean {
  return /\bwhen\b|\bwhat (?:year|month|day|date|time)\b|\bhow long ago\b|\bwhich (?:year|month|day)\b/i.test(text);
}

const TIME_EXPR = new RegExp(
  "\\b(?:yesterday|today|tonight|tomorrow|ago|last|next|this (?:week|month|year|weekend|morning|summer|winter|spring|fall)|weekend|recently|earlier|" +
    "(?:mon|tues|wednes|thurs|fri|satur|sun)days?|january|february|march|april|june|july|august|september|october|november|december|" +
    "(?:19|20)\\d\\d|week|month|year|summer|winter|spring|autumn)\\b",
  "i",
);

/** True when a text carries a time expression ("last Friday", "two weeks ago", "in 2022", …). */
export function hasTimeExpression(text: string): boolean {
  return TIME_EXPR.test(text);
}

const NUM: Record<string, number> = {
  a: 1,
  an: 1,
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  few: 3,
  couple: 2,
};

/**
 * Days before and after a memory's date that its own words may point to ("yesterday",
 * "last week", "two weeks ago", "next month", …): the span its event may lie in.
 */
export function eventSpan(text: string): { back: number; fwd: number } {
  const t = text.toLowerCase();
  let back = 0;
  let fwd = 0;
  if (/\b(?:yesterday|last night)\b/.test(t)) back = Math.max(back, 1);
  if (/\blast (?:mon|tues|wednes|thurs|fri|satur|sun)day\b/.test(t)) back = Math.max(back, 7);
  if (/\b(?:last|past) (?:week|weekend)\b|\ba week ago\b/.test(t)) back = Math.max(back, 10);
  if (/\b(?:last|past) month\b|\ba month ago\b/.test(t)) back = Math.max(back, 45);
  for (const m of t.matchAll(/\b(\d+|a|an|one|two|three|four|five|six|few|couple)(?: of)? (day|week|month)s? ago\b/g)) {
    const n = /^\d+$/.test(m[1]!) ? +m[1]! : (NUM[m[1]!] ?? 1);
    back = Math.max(back, n * (m[2] === "day" ? 1 : m[2] === "week" ? 7 : 30) + 3);
  }
  if (/\b(?:tomorrow|tonight)\b/.test(t)) fwd = Math.max(fwd, 1);
  if (/\b(?:next|this) (?:week|weekend)\b|\bnext (?:mon|tues|wednes|thurs|fri|satur|sun)day\b/.test(t))
    fwd = Math.max(fwd, 10);
  if (/\bnext month\b/.test(t)) fwd = Math.max(fwd, 45);
  return { back: Math.min(back, 400), fwd };
}
