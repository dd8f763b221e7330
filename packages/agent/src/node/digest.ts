/**
 * Content digests of a request, for the prompt manifest: a replay compares them to find the
 * first request whose content changed. Each is of the content as the session log stores it
 * (secrets redacted; tool schemas as defined): a digest never derives from a secret a person,
 * a model or a tool wrote, and a replay, which only has the stored form, compares like with like. Messages and tool lists are immutable, so each is
 * digested once and a round costs only its new messages.
 */
import { redact, redactData, redactMessage } from "@keel/secrets";
import type { DigestSeam, RequestDigest } from "@keel/kernel";
import { hashText } from "@keel/kernel";
import type { Message } from "@keel/kernel";

const byObject = new WeakMap<object, string>();
let lastText: { text: string; digest: string } | undefined;

const hash = hashText;

/**
 * 16 hex characters of the kernel's content hash (hashText) of the text as stored (redacted).
 * Contract: the same text gives the same digest in every process.
 */
export function digestOf(text: string): string {
  if (lastText?.text === text) return lastText.digest;
  const digest = hash(redact(text));
  lastText = { text, digest };
  return digest;
}

function digestOfValue(value: object, stored: (v: unknown) => unknown): string {
  let d = byObject.get(value);
  if (d === undefined) {
    d = hash(JSON.stringify(stored(value)) ?? "");
    byObject.set(value, d);
  }
  return d;
}

/** The digests of one request. Contract: pure; equal stored content gives equal digests. */
export function requestDigest(
  system: string,
  tools: readonly object[],
  messages: readonly Message[],
  options: Record<string, unknown>,
): RequestDigest {
  const s = digestOf(system);
  // Tool schemas come from code, config and MCP servers, not from what a person or a model wrote.
  const t = digestOfValue(tools, (v) => v);
  const m = hash(messages.map((x) => digestOfValue(x, redactMessage)).join(""));
  const o = hash(JSON.stringify(redactData(options, "options")) ?? "");
  return { system: s, tools: t, messages: m, options: o, request: hash(s + t + m + o) };
}

/** The digests as the kernel's seam. */
export const digestSeam: DigestSeam = { text: digestOf, request: requestDigest };
