/**
 * The Worker module's handler (bundled into workerd; no Node API): every request runs one turn
 * and answers what it did as JSON, or status 500 with the error's message and stack.
 */
export function turnWorker(runOnce: () => Promise<unknown>): { fetch(request: Request): Promise<Response> } {
  return {
    async fetch() {
      try {
        return Response.json(await runOnce());
      } catch (err) {
        const e = err instanceof Error ? err : new Error(String(err));
        return Response.json({ error: e.message, stack: e.stack }, { status: 500 });
      }
    },
  };
}
