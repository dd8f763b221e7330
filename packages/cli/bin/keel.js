#!/usr/bin/env node
// The keel command: the published build when present, else the TypeScript sources (Node >= 22.18 strips types).
import { existsSync } from "node:fs";
const dist = new URL("../dist/main.js", import.meta.url);
const { main } = await import(existsSync(dist) ? dist.href : new URL("../src/main.ts", import.meta.url).href);
process.exitCode = await main(process.argv.slice(2), {
  cwd: process.cwd(),
  env: process.env,
  stdin: process.stdin,
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
});
