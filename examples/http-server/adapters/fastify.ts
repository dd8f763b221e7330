/**
 * The fetch-style handler (app.ts) in Fastify: Fastify leaves the body unread (the handler reads
 * and limits bodies itself) and the route hands the raw node:http request and response to the
 * node:http adapter, which streams the SSE body and notices a client that goes away.
 *
 *   await fastifyApp(createHandler(agent)).listen({ port: 8787 })
 */
import Fastify from "fastify";
import type { FastifyInstance } from "fastify";
import { nodeHandler } from "./node.ts";

/** A Fastify app whose every route is the handler. Contract: the reply is hijacked, so Fastify's onSend hooks do not see it. */
export function fastifyApp(handler: (request: Request) => Promise<Response>): FastifyInstance {
  const app = Fastify();
  const toNode = nodeHandler(handler);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_request, _payload, done) => done(null, undefined));
  app.all("/*", async (request, reply) => {
    reply.hijack();
    await toNode(request.raw, reply.raw);
  });
  return app;
}
