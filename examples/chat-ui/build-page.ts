/** The chat page built with vite, for the tests that open it in a browser. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";

const here = dirname(fileURLToPath(import.meta.url));

/** Build examples/chat-ui into `outDir` (default: a new temp folder). Contract: resolves with the folder. */
export async function buildChatPage(outDir = mkdtempSync(join(tmpdir(), "keel-chat-ui-dist-"))): Promise<string> {
  await build({
    root: here,
    configFile: join(here, "vite.config.ts"),
    mode: "production",
    logLevel: "warn",
    // Under vitest NODE_ENV is "test": React's development build is bundled, larger than the warning's bound.
    build: { outDir, emptyOutDir: true, chunkSizeWarningLimit: 4096 },
  });
  return outDir;
}
