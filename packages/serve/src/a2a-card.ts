/** The agent card a served Keel agent publishes at `/.well-known/agent-card.json`. */
import { A2A_PROTOCOL_VERSION } from "@a2a-js/sdk";
import type { AgentCard } from "@a2a-js/sdk";
import type { Agent } from "@keel/agent";
import { ANSWER_HELP } from "./a2a-approvals.ts";
import { GENERIC_DESCRIPTION, publicDescription } from "./public.ts";

/** What the card says beyond what the agent knows. */
export interface CardOptions {
  /** Default: the agent's own `description` option, else "A Keel agent." (never its instructions). */
  description?: string;
  /** Default "0.1.0". */
  version?: string;
}

/**
 * The card of `agent` served at `url` (the JSON-RPC endpoint).
 * Contract: streaming is declared; a bearer scheme is declared and required exactly when
 * `bearer` is true; the one skill names the agent's tools and says how approvals are answered.
 */
export function agentCard(agent: Agent, url: string, bearer: boolean, options: CardOptions = {}): AgentCard {
  const description = publicDescription(agent, options.description) ?? GENERIC_DESCRIPTION;
  const tools = (agent.options.tools ?? []).map((t) => t.name);
  return {
    name: agent.name,
    description,
    supportedInterfaces: [{ url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: A2A_PROTOCOL_VERSION }],
    provider: undefined,
    version: options.version ?? "0.1.0",
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: bearer
      ? {
          bearer: {
            scheme: {
              $case: "httpAuthSecurityScheme",
              value: { description: "The server's token", scheme: "Bearer", bearerFormat: "" },
            },
          },
        }
      : {},
    securityRequirements: bearer ? [{ schemes: { bearer: { list: [] } } }] : [],
    defaultInputModes: ["text/plain", "application/json"],
    defaultOutputModes: ["text/plain", "application/json"],
    skills: [
      {
        id: "turn",
        name: `Ask ${agent.name}`,
        description: `One task is one turn of ${agent.name}; messages in the same contextId continue the conversation.${tools.length ? ` Tools: ${tools.join(", ")}.` : ""} A tool call that needs approval pauses the task (input-required). ${ANSWER_HELP}`,
        tags: ["keel", ...tools],
        examples: [],
        inputModes: ["text/plain", "application/json"],
        outputModes: ["text/plain", "application/json"],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

/**
 * The same card in A2A v0.3's shape, for callers that do not ask for v1.0 (no `A2A-Version`
 * header, or 0.3), as the SDK's own card router does. Contract: `url` is the JSON-RPC endpoint
 * (where the v0.3 method names are answered); the v1.0 interfaces ride along in
 * `supportedInterfaces`.
 */
export function legacyCard(card: AgentCard): Record<string, unknown> {
  const bearer = Object.keys(card.securitySchemes).length > 0;
  return {
    protocolVersion: "0.3.0",
    name: card.name,
    description: card.description,
    url: card.supportedInterfaces[0]!.url,
    preferredTransport: "JSONRPC",
    version: card.version,
    capabilities: { streaming: true, pushNotifications: false },
    defaultInputModes: card.defaultInputModes,
    defaultOutputModes: card.defaultOutputModes,
    skills: card.skills.map((k) => ({
      id: k.id,
      name: k.name,
      description: k.description,
      tags: k.tags,
      examples: [],
    })),
    ...(bearer
      ? {
          securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "The server's token" } },
          security: [{ bearer: [] }],
        }
      : {}),
    supportedInterfaces: card.supportedInterfaces.map((i) => ({
      url: i.url,
      protocolBinding: i.protocolBinding,
      protocolVersion: i.protocolVersion,
    })),
  };
}
