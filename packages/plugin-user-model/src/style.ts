/**
 * The style detector (Wayland's StyleDetector): from one user message, signals about the
 * detail they want, their tone, and the words they use. Pure and deterministic; reads the
 * message after redaction, so no secret reaches a term.
 */

/** What one message says. Contract: scores in [-1, 1]; 0 = no signal. */
export interface StyleSignals {
  words: number;
  /** -1 asks for less detail, +1 for more. */
  detail: number;
  /** -1 casual, +1 formal. */
  tone: number;
  terms: string[];
}

const BRIEF =
  /\b(be brief|briefly|shorter|short answer|concise(ly)?|tl;?dr|just the (answer|code|command)|one line|in a sentence|no explanation|keep it short)\b/i;
const DETAILED =
  /\b(in (more )?detail|more detail|elaborate|explain (why|how|in depth|thoroughly)|step[- ]by[- ]step|walk me through|in depth|thorough(ly)?|longer answer)\b/i;
const CASUAL =
  /\b(hey|hi there|lol|thx|thanks!|pls|plz|gonna|wanna|yeah|yep|nope|cool|awesome|btw|imo)\b|[\u{1F300}-\u{1FAFF}]|!{2,}/iu;
const FORMAL =
  /\b(dear|kindly|would you (please )?be so kind|i would appreciate|regards|sincerely|could you please|please find)\b/i;

const STOP = new Set(
  "about above after again against also because been before being below between both could does doing down during each from further have having here how into itself just more most other over same should some such than that their them then there these they this those through under until very what when where which while whom will with would your yours yourself please thanks thank could make need want like know think tell give show help using used file files".split(
    " ",
  ),
);

/** Signals of `text` (already redacted). */
export function detectStyle(text: string): StyleSignals {
  const words = text.split(/\s+/).filter(Boolean);
  const detail = (DETAILED.test(text) ? 1 : 0) - (BRIEF.test(text) ? 1 : 0);
  const casual = CASUAL.test(text) || (/^[a-z]/.test(text.trim()) && !/[.?!]$/.test(text.trim()) && words.length > 3);
  const tone = (FORMAL.test(text) ? 1 : 0) - (casual ? 1 : 0);
  const terms = new Set<string>();
  for (const raw of text.toLowerCase().match(/[\p{L}][\p{L}\p{N}_-]{3,30}/gu) ?? []) {
    const t = raw.replace(/[-_]+$/, "");
    // Words only: no digits-heavy ids, no redaction markers, nothing common.
    if (STOP.has(t) || /\d{3,}/.test(t) || t.startsWith("redacted") || t.length < 4) continue;
    terms.add(t);
  }
  return { words: words.length, detail, tone, terms: [...terms].slice(0, 40) };
}
