/**
 * LoCoMo loader for the evaluation (CC BY-NC 4.0: read in place from the shared data folder,
 * never copied). Each dialogue turn becomes one memory with its session's date.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { dataDir } from "../../../test/support/data.ts";
import type { MemoryInput } from "../src/index.ts";

export interface LocomoTurn {
  diaId: string;
  input: MemoryInput;
}

export interface LocomoQuestion {
  question: string;
  category: 1 | 2 | 3 | 4;
  evidence: string[];
}

export interface LocomoConversation {
  index: number;
  sampleId: string;
  turns: LocomoTurn[];
  questions: LocomoQuestion[];
  /** The last session's date (ms): "now" for recency. */
  lastDate: number;
}

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/** "1:56 pm on 8 May, 2023" → ms (UTC). */
export function parseSessionDate(s: string): number {
  const m = /(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})/i.exec(s);
  if (!m) throw new Error(`unparsed LoCoMo session date: ${s}`);
  const hour = (+m[1]! % 12) + (m[3]!.toLowerCase() === "pm" ? 12 : 0);
  return Date.UTC(+m[6]!, MONTHS.indexOf(m[5]!.slice(0, 3).toLowerCase()), +m[4]!, hour, +m[2]!);
}

/** Load LoCoMo's ten conversations as memory inputs and questions of categories 1–4. */
export function loadLocomo(): LocomoConversation[] {
  const raw = JSON.parse(readFileSync(join(dataDir(), "memory", "locomo", "locomo10.json"), "utf8")) as Array<{
    sample_id: string;
    conversation: Record<string, unknown>;
    qa: Array<{ question: string; category: number; evidence: string[] }>;
  }>;
  return raw.map((c, index) => {
    const turns: LocomoTurn[] = [];
    let lastDate = 0;
    const sessions = Object.keys(c.conversation)
      .filter((k) => /^session_\d+$/.test(k))
      .sort((a, b) => +a.slice(8) - +b.slice(8));
    for (const s of sessions) {
      const date = parseSessionDate(String(c.conversation[`${s}_date_time`]));
      lastDate = Math.max(lastDate, date);
      for (const t of c.conversation[s] as Array<{
        speaker: string;
        dia_id: string;
        text: string;
        blip_caption?: string;
      }>) {
        const caption = t.blip_caption ? ` [shares a photo: ${t.blip_caption}]` : "";
        turns.push({
          diaId: t.dia_id,
          input: {
            namespace: c.sample_id,
            content: `${t.speaker}: ${t.text}${caption}`,
            occurredAt: date,
            at: date,
            source: { sessionId: `${c.sample_id}/${s}`, turnId: t.dia_id, via: "import" },
          },
        });
      }
    }
    const questions = c.qa
      .filter((q) => q.category >= 1 && q.category <= 4)
      .map((q) => ({
        question: q.question,
        category: q.category as 1 | 2 | 3 | 4,
        evidence: q.evidence
          .flatMap((e) => e.split(/[;,\s]+/))
          .map((e) => e.trim())
          .filter(Boolean),
      }));
    return { index, sampleId: c.sample_id, turns, questions, lastDate };
  });
}
