import type { MergedSection } from "./merge.ts";
import type { PromptContextEntry } from "./phases.ts";

/**
 * Assemble the system prompt: the agent's instructions, then merged sections in order,
 * then the prompt context block.
 * Contract: deterministic for the same inputs; empty parts leave no blank headings.
 */
export function compileSystemPrompt(
  instructions: string,
  sections: readonly MergedSection[],
  context: readonly PromptContextEntry[],
): string {
  const parts: string[] = [];
  if (instructions.trim()) parts.push(instructions.trim());
  for (const s of sections) parts.push(s.title ? `## ${s.title}\n${s.content}` : s.content);
  if (context.length) {
    const entries = context.map((e) => `<entry id="${e.id}" domain="${e.domain}">\n${e.content}\n</entry>`);
    parts.push(`<context>\n${entries.join("\n")}\n</context>`);
  }
  return parts.join("\n\n");
}

/** The instruction added to the system prompt of a final round without tools. */
export function finalRoundInstruction(guard: string): string {
  return `[Limit reached: ${guard}. Tools are disabled for this last response. Give your final answer now with what you have, and say what is left undone.]`;
}
