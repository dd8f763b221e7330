/**
 * @keel/otel — OpenTelemetry spans for Keel agents, on `@opentelemetry/api` only: bring any
 * SDK (or none: then every span is a no-op). Spans follow the OpenTelemetry GenAI semantic
 * conventions where they have a name (`invoke_agent`, `chat`, `execute_tool`, `gen_ai.*`) and use
 * `keel.*` for the rest (phases, plugins, contributions, compaction, jobs).
 */
import { trace, type Tracer, type TracerProvider } from "@opentelemetry/api";
import { defineObserver, errorMessage, KeelError } from "@keel/kernel";
import { headOf } from "@keel/text";
import type { Agent, AgentObserver } from "@keel/agent";
import { SpanBuilder } from "./span-builder.ts";

export { splitProviderId } from "./attributes.ts";

/**
 * How an agent is traced.
 * Contract: every field is optional; prompt, completion, tool argument and tool result content
 * is exported only when `captureContent` is true, and then redacted as the session log is.
 */
export interface OtelOptions {
  /** The tracer to use. Default: `tracerProvider.getTracer("@keel/otel")`. */
  tracer?: Tracer;
  /** Default: the global provider (`trace.getTracerProvider()`, a no-op until an SDK registers one). */
  tracerProvider?: TracerProvider;
  /**
   * Export prompt, completion and tool content as `gen_ai.input.messages`, `gen_ai.output.messages`,
   * `gen_ai.tool.call.arguments` and `gen_ai.tool.call.result`. Default: false, or true when
   * OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is `true`.
   */
  captureContent?: boolean;
  /** Longest content attribute, in code points. Default 8,000. */
  maxContentChars?: number;
  /** `work` (default): a span per phase run with at least one handler; `all`: every logged phase run. */
  phases?: "work" | "all";
  /** Flush the tracer provider when the agent closes (so a CLI run exports before it exits). Default true. */
  flushOnClose?: boolean;
}

/** Version reported as the instrumentation scope's version. */
const SCOPE_VERSION = "0.1.0";

/**
 * Trace an agent from code; returns the function that stops tracing (and flushes).
 * Contract: spans never change a turn; a failure while building one is reported once on the
 * agent as KEEL_OBSERVER_FAILED and tracing stops.
 */
export function traceAgent(agent: Agent, options: OtelOptions = {}): () => Promise<void> {
  const provider = options.tracerProvider ?? trace.getTracerProvider();
  const tracer = options.tracer ?? provider.getTracer("@keel/otel", SCOPE_VERSION);
  const envCapture = process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.toLowerCase() === "true";
  const builder = new SpanBuilder({
    tracer,
    agentName: agent.name,
    providerId: agent.options.provider.id,
    captureContent: options.captureContent ?? envCapture,
    maxContentChars: options.maxContentChars ?? 8_000,
    phases: options.phases ?? "work",
  });
  let broken = false;
  const unsubscribe = agent.subscribe((event) => {
    if (broken) return;
    try {
      builder.handle(event);
    } catch (err) {
      broken = true;
      agent.reportFault(
        new KeelError(
          "KEEL_OBSERVER_FAILED",
          `Observer "otel" failed on a ${event.type} event and stopped tracing: ${headOf(errorMessage(err), 300)}`,
        ),
      );
    }
  });
  return async () => {
    unsubscribe();
    builder.end();
    if (options.flushOnClose !== false) await flush(provider);
  };
}

/** An observer for `observers` in agent.config.ts or createAgent(). Contract: as traceAgent. */
export function otel(options: OtelOptions = {}): AgentObserver {
  return defineObserver({ name: "otel", attach: (agent: Agent) => traceAgent(agent, options) });
}

export default otel;

/** forceFlush on the provider, or on the SDK provider behind the API's global proxy. */
async function flush(provider: TracerProvider): Promise<void> {
  const p = provider as TracerProvider & { forceFlush?: () => Promise<void>; getDelegate?: () => TracerProvider };
  const target = typeof p.forceFlush === "function" ? p : (p.getDelegate?.() as typeof p | undefined);
  if (typeof target?.forceFlush === "function") await target.forceFlush();
}
