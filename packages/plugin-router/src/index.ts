/**
 * @keel/plugin-router — routing across a provider pool (Wayland's and y-agent's provider pool,
 * MECHANICS "Provider pool"). At round.pre_request it reads the request's shape (tokens from the
 * kernel's counter, tools, images, mode), the pool (tags, prices, windows) and the budget left,
 * picks a member by its policy, and routes the round there with `request_options.options.route`;
 * the kernel stamps the decision (member, reason, plugin) on the request's prompt manifest. A
 * turn stays on the member its first round chose while that member fits, so the prompt cache
 * stays warm; a switch says why (the window, images, the budget).
 */
import { z } from "zod";
import type { ContributionFor } from "@keel/kernel";
import { definePlugin } from "@keel/kernel";
import { decide } from "./policy.ts";
import type { RoutePolicy } from "./policy.ts";

export { CAPABILITY_TAGS, decide } from "./policy.ts";
export type { Decision, DecideInput, RoutePolicy } from "./policy.ts";

export const PLUGIN_NAME = "@keel/plugin-router";
export const PLUGIN_VERSION = "0.1.0";

/** Options of router(). Contract: all optional. */
export interface RouterOptions {
  /** How members that fit are preferred: `cheapest` (default), `fastest` (tag `fast`), `strongest` (tag `strong`, then price). */
  policy?: RoutePolicy;
  /** A member over the budget left: `downgrade` (default) routes to one that fits, saying why; `stop` leaves it to the kernel's budget guard. */
  onBudget?: "downgrade" | "stop";
  /** Keep a turn on the member its first round chose while it fits (default true: the prompt cache stays warm). */
  sticky?: boolean;
}

const Options = z.strictObject({
  policy: z.enum(["cheapest", "fastest", "strongest"]).default("cheapest"),
  onBudget: z.enum(["downgrade", "stop"]).default("downgrade"),
  sticky: z.boolean().default(true),
});
type Resolved = z.output<typeof Options>;
type Out = ContributionFor<"round.pre_request">;

/**
 * The router plugin. Contract: routes only when the agent has a pool (else it does nothing);
 * when no member fits it routes nothing (the default model serves) and says so in a diagnostic.
 */
export function router(options: RouterOptions = {}) {
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description: "Routes each round to a provider-pool member by request shape, tags, price and budget.",
    options: Options,
    input: options as z.input<typeof Options>,
    setup(ctx) {
      const o = ctx.options as Resolved;
      const previous = new Map<string, string>();
      ctx.on("round.pre_request", (e): Out[] | undefined => {
        if (!e.routing) return undefined;
        const d = decide({
          view: e.routing,
          policy: o.policy,
          onBudget: o.onBudget,
          ...(o.sticky && previous.has(e.turnId) ? { previous: previous.get(e.turnId)! } : {}),
          reasoning: e.metadata.reasoning === true,
        });
        if (!d) {
          previous.delete(e.turnId);
          return [
            {
              kind: "diagnostic",
              level: "info",
              code: "ROUTER_NO_FIT",
              message: `No pool member fits round ${e.round} (${e.routing.shape.tokens} tokens, ${e.routing.shape.tools} tools${e.routing.shape.images ? ", images" : ""}); ${e.routing.default.id} serves it.`,
            },
          ];
        }
        previous.set(e.turnId, d.model);
        return [{ kind: "request_options", options: { route: { model: d.model, reason: d.reason } } }];
      });
      ctx.on("turn.post_turn", (e) => void previous.delete(e.turnId));
    },
  });
}

export default router;
