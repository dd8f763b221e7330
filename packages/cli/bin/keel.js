#!/usr/bin/env node
// The keel command. `@keel/cli/main` is the published build (dist) or, in the repository, the
// TypeScript sources (Node strips types); `node --conditions=keel-dist` picks built files there too.
const { main, processIo, exitWhenSettled } = await import("@keel/cli/main");
exitWhenSettled(await main(process.argv.slice(2), processIo()));
