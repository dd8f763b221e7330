/** The turn classifier: does this turn need recall, may it write memory, does it ask to forget? */
import { queryTerms } from "./text.ts";

/** What the classifier decided for one turn. */
export interface TurnClass {
  recall: boolean;
  write: boolean;
  /** What the user asked to forget ("forget that I live in Paris" → "I live in Paris"). */
  forget?: string;
  reason: string;
}

const NO_WRITE =
  /\b(?:don'?t|do not|never|please don'?t)\s+(?:remember|save|store|memori[sz]e|keep|record|log)\b|\boff the record\b|\b(?:forget|disregard) (?:this|what I (?:just )?said)\b|\bno memory\b/i;
const FORGET = /\bforget\s+(?:that|about|my|the fact that)\s+(.{3,300})/i;
const ACK =
  /^(?:hi|hello|hey|thanks|thank you|ok|okay|cool|great|nice|yes|no|sure|bye|good (?:morning|night|evening))[\s!.,]*$/i;

/** Classify a user input. Contract: deterministic, never throws. */
export function classifyTurn(input: string): TurnClass {
  const text = input.trim();
  const forget = FORGET.exec(text);
  const noWrite = NO_WRITE.test(text) || !!forget;
  const recall = !!text && !ACK.test(text) && queryTerms(text).length > 0;
  const reason = forget
    ? "the user asked to forget something"
    : noWrite
      ? "the user asked not to remember this turn"
      : recall
        ? "content words present"
        : "greeting or acknowledgement";
  return { recall, write: !noWrite, ...(forget ? { forget: forget[1]!.replace(/[.!?]+$/, "").trim() } : {}), reason };
}
