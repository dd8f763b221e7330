/**
 * The agent behind the HTTP example: a release assistant with one read-only tool
 * (`service_status`) and one risky tool (`deploy`) that a plugin sends to a person for
 * approval. Its effects are real: deploys append to `<home>/deployments.log`.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { createAgent, definePlugin, defineTool } from "@keel/agent";
import type { Limits, ModelProvider } from "@keel/kernel";

/** Resolves after `ms`, or rejects when the call is cancelled. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });
}

/** Build the example agent. Contract: sessions are stored in `<home>/sessions.sqlite`. */
export async function buildAgent(options: {
  home: string;
  provider: ModelProvider;
  stepMs?: number;
  leaseTtlMs?: number;
  /** The agent's limits (e.g. `maxCostUsd`: a turn past it stops, and the page says so). */
  limits?: Partial<Limits>;
}) {
  const log = join(options.home, "deployments.log");
  const stepMs = options.stepMs ?? 150;

  const serviceStatus = defineTool({
    name: "service_status",
    description: "Show which version is live and the recent deployments.",
    input: z.object({}),
    category: "info",
    execute: async () => {
      const lines = existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : [];
      return lines.length
        ? `live: ${lines.at(-1)!.split(" ")[1]}\nrecent deployments:\n${lines.slice(-5).join("\n")}`
        : "live: v1.0.0 (no deployments recorded)";
    },
  });

  const deploy = defineTool({
    name: "deploy",
    description: "Deploy a version to production. Takes a few seconds and reports progress.",
    input: z.object({ version: z.string().regex(/^v?\d+(\.\d+){0,2}$/, "a version like v1.4.2") }),
    category: "exec",
    execute: async ({ version }, ctx) => {
      const steps = ["building", "uploading", "switching traffic"];
      for (const [i, step] of steps.entries()) {
        ctx.progress(`${step} ${version}`, i / steps.length);
        await pause(stepMs, ctx.signal);
      }
      appendFileSync(log, `${new Date().toISOString()} ${version} by ${ctx.sessionId}\n`);
      return `${version} is live (deployment recorded in deployments.log)`;
    },
  });

  /** The policy: every deploy waits for a person; everything else runs. */
  const reviewDeploys = definePlugin({
    name: "review-deploys",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("tool.pre_call", (e) =>
        e.call.name === "deploy"
          ? { kind: "tool_decision", decision: "ask", reason: "deploys reach production" }
          : undefined,
      );
    },
  });

  return createAgent({
    name: "release-assistant",
    provider: options.provider,
    instructions:
      "You are a release assistant. Use service_status to answer questions about what is live; use deploy to ship a version when asked.",
    tools: [serviceStatus, deploy],
    plugins: [reviewDeploys],
    home: options.home,
    // A turn a crashed server left goes on in another (its worker): service_status runs again
    // (info), a cut deploy never does (exec): the model reads that it was interrupted.
    recovery: "auto",
    ...(options.leaseTtlMs ? { lease: { ttlMs: options.leaseTtlMs } } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
  });
}
