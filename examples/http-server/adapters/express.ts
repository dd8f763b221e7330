/**
 * The fetch-style handler (app.ts) in Express: Express's req and res are node:http's, so the
 * node:http adapter mounts as is. No body parser runs before it (the handler reads and limits
 * bodies itself).
 *
 *   expressApp(createHandler(agent)).listen(8787)
 */
import express from "express";
import type { Express } from "express";
import { nodeHandler } from "./node.ts";

/** An Express app whose every route is the handler. Contract: mount it under a prefix with `parent.use("/api", app)`. */
export function expressApp(handler: (request: Request) => Promise<Response>): Express {
  const app = express();
  app.use(nodeHandler(handler));
  return app;
}
