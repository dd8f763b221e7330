/**
 * The chat page's build. `vite build` writes dist/, which examples/http-server serves at `/`;
 * `vite` (dev) proxies /api to the http example (KEEL_API, default http://127.0.0.1:8787).
 */
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

export default defineConfig({
  plugins: [react()],
  server: { proxy: { "/api": process.env.KEEL_API ?? "http://127.0.0.1:8787" } },
});
