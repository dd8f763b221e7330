/** A host-given MemoryStore wrapped so every text it is asked to write is redacted first. */
import { redact, redactValue } from "@keel/secrets";
import type { MemoryInput, MemoryStore } from "./types.ts";

function clean(i: MemoryInput): MemoryInput {
  return {
    ...i,
    content: typeof i.content === "string" ? redact(i.content) : i.content,
    ...(typeof i.key === "string" ? { key: redactValue(i.key) } : {}),
    ...(typeof i.category === "string" ? { category: redactValue(i.category) } : {}),
  };
}

/**
 * `store` with its write paths redacting through @keel/secrets.
 * Contract: reads pass through unchanged; write, writeExtraction and logMiss never hand the
 * store a secret, whatever the store does itself.
 */
export function redactingStore(store: MemoryStore): MemoryStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== "function") return v;
      if (prop === "write") return (i: MemoryInput) => target.write(clean(i));
      if (prop === "writeExtraction")
        return (turnId: string, ns: string, inputs: readonly MemoryInput[]) =>
          target.writeExtraction(turnId, ns, inputs.map(clean));
      if (prop === "logMiss")
        return (m: Parameters<MemoryStore["logMiss"]>[0]) => target.logMiss({ ...m, query: redact(m.query) });
      return (v as (...a: unknown[]) => unknown).bind(target);
    },
  });
}
