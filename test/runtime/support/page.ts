/**
 * A tiny site for the in-page test, on 127.0.0.1 at an ephemeral port: `/` is a page whose
 * module script imports `/agent.js` (the bundle), puts its runOnce on globalThis and sets the
 * body's data-ready to "true", or to "failed" with globalThis.loadError when the bundle throws.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><link rel="icon" href="data:,"><title>Keel in a page</title></head>
<body>
<script type="module">
// The page says when the bundle is in (data-ready="true") or why it is not ("failed", loadError).
import("/agent.js").then(
  (m) => {
    globalThis.runOnce = m.runOnce;
    document.body.dataset.ready = "true";
  },
  (e) => {
    globalThis.loadError = String((e && e.stack) || e);
    document.body.dataset.ready = "failed";
  },
);
</script>
</body>
</html>
`;

export interface PageSite {
  url: string;
  close(): Promise<void>;
}

export async function servePage(agentJs: string): Promise<PageSite> {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    const [type, body] =
      path === "/"
        ? ["text/html; charset=utf-8", PAGE]
        : path === "/agent.js"
          ? ["text/javascript; charset=utf-8", agentJs]
          : [undefined, "not found"];
    res.writeHead(type ? 200 : 404, { "content-type": type ?? "text/plain", "cache-control": "no-store" });
    res.end(body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
