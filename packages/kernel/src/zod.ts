/**
 * The kernel's and the host's own schemas are written with zod/mini: the same zod (one core,
 * so classic and mini schemas nest, parse and convert to JSON Schema alike), but as functions a
 * bundler keeps only when they are used, where classic zod's methods bring every schema type's
 * whole API into a browser bundle. Users' schemas (tool inputs, plugin options, `output`) may be
 * classic or mini: the kernel only calls their `safeParse`, which both have.
 */
import * as z from "zod/mini";
import { en } from "zod/locales";

/**
 * zod's English messages, unless the application chose a locale (`z.config`): what classic zod
 * sets on its first schema and zod/mini leaves to the application, so the kernel's diagnostics
 * read the same whichever zod the application loads. Contract: called at the top of every module
 * that builds a schema of the kernel or the host; a locale set later still wins.
 */
export function englishMessages(): void {
  if (!z.config().localeError) z.config(en());
}
