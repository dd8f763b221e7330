/**
 * The example server against a hostile client, over real sockets: the chat page's folder never
 * serves a file outside it, even through a symlink inside it (a build that copied one, a
 * careless deploy); a chunked body far over the limit on the example's own routes is refused
 * without being read whole.
 */
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { offlineModel } from "./offline-model.ts";
import { startServer } from "./server.ts";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function serve(staticDir?: string): Promise<string> {
  const home = mkdtempSync(join(tmpdir(), "keel-hostile-"));
  const server = await startServer({
    home,
    provider: offlineModel,
    port: 0,
    worker: false,
    ...(staticDir ? { staticDir } : {}),
  });
  closers.push(server.close);
  return server.url;
}

describe("examples/http-server: hostile clients", () => {
  it("serves the page, never a file outside its folder (symlink, encoded dots)", async () => {
    const outside = mkdtempSync(join(tmpdir(), "keel-outside-"));
    writeFileSync(join(outside, "secret.txt"), "the deploy key");
    const page = mkdtempSync(join(tmpdir(), "keel-page-"));
    mkdirSync(join(page, "assets"));
    writeFileSync(join(page, "index.html"), "<!doctype html><title>chat</title>");
    writeFileSync(join(page, "assets", "app.js"), "console.log('chat')");
    symlinkSync(join(outside, "secret.txt"), join(page, "assets", "leak.js"));
    symlinkSync(outside, join(page, "assets", "dir"));
    const url = await serve(page);
    expect(await (await fetch(`${url}/`)).text()).toContain("<title>chat</title>");
    expect((await fetch(`${url}/assets/app.js`)).headers.get("content-type")).toContain("text/javascript");
    for (const path of [
      "/assets/leak.js",
      "/assets/dir/secret.txt",
      "/assets/..%2f..%2fsecret.txt",
      "/%2e%2e/secret.txt",
    ]) {
      const res = await fetch(`${url}${path}`);
      expect(res.status, path).toBe(404);
      expect(await res.text(), path).not.toContain("deploy key");
    }
  });

  it("a chunked body past 8 MB on the example's own routes is a 400 after reading little more", async () => {
    const url = await serve();
    const { id } = (await (await fetch(`${url}/sessions`, { method: "POST" })).json()) as { id: string };
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled >= 256 * 1024 * 1024) return controller.close();
        pulled += 1024 * 1024;
        controller.enqueue(new Uint8Array(1024 * 1024).fill(32));
      },
    });
    const res = await fetch(`${url}/sessions/${id}/turns`, { method: "POST", body, duplex: "half" } as RequestInit);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("larger than 8 MB");
    expect(pulled).toBeLessThan(64 * 1024 * 1024);
  });
});
