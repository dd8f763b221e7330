/**
 * The built chat page (examples/chat-ui, `vite build`) served by the example: GET of a file
 * under `root`, `index.html` for `/`. Nothing outside `root` is served.
 */
import { readFile, realpath } from "node:fs/promises";
import { extname, join, normalize, sep } from "node:path";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".json": "application/json",
  ".ico": "image/x-icon",
};

/** The file `pathname` names under `root`, or undefined (not found, or outside `root`). */
export async function staticFile(root: string, pathname: string): Promise<Response | undefined> {
  let relative: string;
  try {
    relative = decodeURIComponent(pathname === "/" ? "/index.html" : pathname);
  } catch {
    return undefined;
  }
  const path = normalize(join(root, relative));
  if (!path.startsWith(normalize(root) + sep) || relative.includes("\0")) return undefined;
  try {
    // A symlink under root may point anywhere: what is read must resolve under root too.
    const real = await realpath(path);
    if (!real.startsWith((await realpath(root)) + sep)) return undefined;
    const body = await readFile(real);
    return new Response(body, {
      headers: { "content-type": TYPES[extname(path)] ?? "application/octet-stream", "cache-control": "no-cache" },
    });
  } catch {
    return undefined;
  }
}
