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
  return lazyRequestDigest(system, tools, messages, options)();
}

let lastTools: { tools: readonly object[]; digest: string } | undefined;

/** The digest of a list of frozen tool schemas: the same list as the last request's (by identity) is not serialized again. */
function frozenToolsDigest(tools: readonly object[]): string {
  const last = lastTools;
  if (last?.tools.length === tools.length && last.tools.every((x, i) => x === tools[i])) return last.digest;
  const digest = hash(JSON.stringify(tools));
  lastTools = { tools: tools.slice(), digest };
  return digest;
}

let lastOptions: { json: string; digest: string } | undefined;

/**
 * requestDigest, computed when first read (a store that writes the manifest reads it; a log
 * kept in memory may never). What may still change once the request is sent (its options, a
 * tool schema that is not frozen) is digested at once; the rest (the system prompt, the
 * frozen history and schemas) is immutable. Contract: the same digests requestDigest gives.
 */
export function lazyRequestDigest(
  system: string,
  tools: readonly object[],
  messages: readonly Message[],
  options: Record<string, unknown>,
): () => RequestDigest {
  const json = JSON.stringify(redactData(options, "options")) ?? "";
  if (lastOptions?.json !== json) lastOptions = { json, digest: hash(json) };
  const o = lastOptions.digest;
  // Tool schemas come from code, config and MCP servers, not from what a person or a model wrote.
  const t = tools.every((x) => Object.isFrozen(x)) ? frozenToolsDigest(tools) : digestOfValue(tools, (v) => v);
  let sent: readonly Message[] | undefined = messages;
  let digest: RequestDigest | undefined;
  return () => {
    if (digest) return digest;
    const s = digestOf(system);
    const m = hash(sent!.map((x) => digestOfValue(x, redactMessage)).join(""));
    sent = undefined;
    digest = { system: s, tools: t, messages: m, options: o, request: hash(s + t + m + o) };
    return digest;
  };
}

/** The digests as the kernel's seam. */
export const digestSeam: DigestSeam = { text: digestOf, request: lazyRequestDigest };
