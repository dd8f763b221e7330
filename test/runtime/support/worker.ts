/**
 * The Worker module's handler (bundled into workerd; no Node API): every request runs `run`
 * with the request's query and the Worker's bindings, and answers what it returned as JSON, or
 * status 500 with the error's message and stack.
 */
export function turnWorker(run: (query: URLSearchParams, env: Record<string, unknown>) => Promise<unknown>): {
  fetch(request: Request, env: Record<string, unknown>): Promise<Response>;
} {
  return {
    async fetch(request, env) {
      try {
        return Response.json(await run(new URL(request.url).searchParams, env));
      } catch (err) {
        const e = err instanceof Error ? err : new Error(String(err));
        return Response.json({ error: e.message, stack: e.stack }, { status: 500 });
      }
    },
  };
}
