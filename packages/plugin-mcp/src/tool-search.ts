import type { ToolSchema } from "@keel/kernel";

/** Name of the meta tool through which the model finds and reveals hidden MCP tools. */
export const TOOL_SEARCH_NAME = "tool_search";

/** What the model sees of tool_search. */
export const TOOL_SEARCH_SCHEMA: ToolSchema = {
  name: TOOL_SEARCH_NAME,
  description:
    'Search the connected MCP servers for tools that are not listed yet. Describe the step you need a tool for (e.g. "convert a word document to pdf"); matching tools become callable for the rest of this turn.',
  parameters: {
    type: "object",
    properties: {
      query: { type: "string", description: "What the tool should do, in a few words." },
      limit: { type: "integer", minimum: 1, maximum: 20, description: "Most tools to return (default 5)." },
    },
    required: ["query"],
  },
};
