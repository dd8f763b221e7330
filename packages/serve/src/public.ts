/** What a served agent tells anyone who may ask about itself. */
import type { Agent } from "@keel/agent";
import { headOf } from "@keel/text";

/** What a served agent without a description of its own is published as. */
export const GENERIC_DESCRIPTION = "A Keel agent.";

/**
 * The description a served agent publishes (card, MCP server instructions, its `ask` tool):
 * `explicit`, else the agent's `description` option, cut to 300 code points; undefined when
 * neither is given. Contract: never derived from the instructions (a system prompt is private:
 * the card is served to anyone, without a token); never throws.
 */
export function publicDescription(agent: Agent, explicit?: string): string | undefined {
  let given: unknown = explicit;
  try {
    given ??= agent.options.description;
  } catch {
    given = undefined;
  }
  if (typeof given !== "string" || !given.trim()) return undefined;
  return headOf(given.trim(), 300);
}
