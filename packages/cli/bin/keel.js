#!/usr/bin/env node
// The keel command. `@keel/cli/main` is the published build (dist) or, in the repository, the
// TypeScript sources (Node strips types); `node --conditions=keel-dist` picks built files there too.
const { main, processIo } = await import("@keel/cli/main");
const status = await main(process.argv.slice(2), processIo());
process.exitCode = status;
// Nothing of ours is left to run: a stray timer of a config or plugin must not keep the process alive.
setTimeout(() => process.exit(status), 1_000).unref();
