/**
 * Content digests of a request, for the prompt manifest: a replay compares them to find the
 * first request whose content changed. Messages and tool lists are immutable, so each is
 * hashed once and a round costs only its new messages.
 */
import { createHash } from "node:crypto";
import type { RequestDigest } from "./manifest.ts";
import type { Message } from "./messages.ts";

const byObject = new WeakMap<object, string>();

/** 16 hex characters of SHA-256. Contract: the same text gives the same digest in every process. */
export function digestOf(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 16);
}

function digestOfValue(value: object): string {
  let d = byObject.get(value);
  if (d === undefined) {
    d = digestOf(JSON.stringify(value) ?? "");
    byObject.set(value, d);
  }
  return d;
}

/** The digests of one request. Contract: pure; equal content gives equal digests. */
export function requestDigest(
  system: string,
  tools: readonly object[],
  messages: readonly Message[],
  options: Record<string, unknown>,
): RequestDigest {
  const s = digestOf(system);
  const t = digestOfValue(tools);
  const m = digestOf(messages.map((x) => digestOfValue(x)).join(""));
  const o = digestOf(JSON.stringify(options) ?? "");
  return { system: s, tools: t, messages: m, options: o, request: digestOf(s + t + m + o) };
}
