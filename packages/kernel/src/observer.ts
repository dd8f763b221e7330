/**
 * Observers watch an agent from outside: tracing, metrics, a live viewer. They read events
 * (Agent.subscribe) and never contribute to a turn, so a failing observer cannot change one.
 */
import type { AgentEvent } from "./events.ts";
import type { ModelProvider } from "./provider.ts";

/** What an observer sees of the agent it watches. Contract: an Agent is one. */
export interface ObservedAgent {
  readonly name: string;
  readonly options: { readonly provider: ModelProvider };
  subscribe(listener: (event: AgentEvent) => void): () => void;
}

/**
 * Something that watches an agent's events.
 * Contract: `attach` is called once, right after the agent is built; what it returns is
 * called (and awaited, at most `DETACH_DEADLINE_MS`) when the agent closes. A throw from
 * either, or the first from its event listener, is reported as KEEL_OBSERVER_FAILED (a
 * diagnostic; at close, `agent.observerFailures`) and never reaches a turn.
 */
export interface AgentObserver {
  readonly name: string;
  attach(agent: ObservedAgent): void | (() => void | Promise<void>);
}

/** How long agent.close() waits for each observer's detach (a flush of buffered spans, say). */
export const DETACH_DEADLINE_MS = 5_000;

/** Identity function that types an observer. Contract: returns its argument unchanged. */
export function defineObserver<O extends AgentObserver>(observer: O): O {
  return observer;
}
