/**
 * The fetch-style handler (app.ts) in Hono, as is: Hono hands over the standard Request and
 * sends back the Response, SSE body included. Serve it on Node with @hono/node-server:
 *
 *   serve({ fetch: honoApp(createHandler(agent)).fetch, port: 8787 })
 */
import { Hono } from "hono";

/** A Hono app whose every route is the handler. Contract: mount it under a prefix with `parent.route("/api", app)`. */
export function honoApp(handler: (request: Request) => Promise<Response>): Hono {
  const app = new Hono();
  app.all("*", (c) => handler(c.req.raw));
  return app;
}
