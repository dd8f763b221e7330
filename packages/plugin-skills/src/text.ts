/** Tokenising for relevance and for the router's per-term evidence. */

const STOPWORDS = new Set(
  ("a about above after again all also am an and any are as at be been before being below between both but by can cannot could " +
    "did do does doing done down during each few for from further get got had has have having he her here hers him his how i if in " +
    "into is it its itself just let like me more most my myself no nor not now of off on once only or other our ours out over own " +
    "please same she should so some such than that the their theirs them then there these they this those through to too under " +
    "until up us very want was we were what when where which while who whom why will with would you your yours yourself " +
    "im ive id dont cant hi hey thanks thank").split(" "),
);

/** Light suffix stemming so "papers"/"paper" and "booking"/"book" meet. Contract: deterministic, idempotent on its output's shape. */
export function stem(token: string): string {
  let t = token;
  if (t.length > 4 && t.endsWith("ies")) t = `${t.slice(0, -3)}y`;
  else if (t.length > 4 && (t.endsWith("sses") || t.endsWith("xes") || t.endsWith("ches") || t.endsWith("shes"))) t = t.slice(0, -2);
  else if (t.length > 3 && t.endsWith("s") && !t.endsWith("ss") && !t.endsWith("us") && !t.endsWith("is")) t = t.slice(0, -1);
  if (t.length > 5 && t.endsWith("ing")) t = t.slice(0, -3);
  else if (t.length > 4 && t.endsWith("ed")) t = t.slice(0, -2);
  return t;
}

/**
 * Tokens of a text: camelCase split, lowercased, split on non-alphanumerics, stopwords and
 * one-character tokens dropped, stemmed. Contract: keeps order and repeats.
 */
export function tokenize(text: string): string[] {
  const spaced = text.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2").toLowerCase();
  const out: string[] = [];
  for (const raw of spaced.split(/[^a-z0-9]+/)) {
    if (raw.length < 2 || STOPWORDS.has(raw)) continue;
    out.push(stem(raw));
  }
  return out;
}

/** Distinct tokens of a text, in first-seen order. */
export function terms(text: string): string[] {
  return [...new Set(tokenize(text))];
}

/** True for the stopwords shared by the tokenizer and the task-signature bucketer. */
export function isStopword(word: string): boolean {
  return STOPWORDS.has(word);
}
