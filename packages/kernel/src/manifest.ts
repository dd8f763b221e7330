/**
 * What the model saw on one request, and why. Recorded as a `prompt.compiled` event
 * for every request.
 * Contract: every section names the plugins whose contributions built it; `hash` and `digest`
 * are content digests (equal content, equal digest), so a replay can tell which part changed.
 */
export interface PromptManifest {
  round: number;
  sections: Array<{ sectionId: string; title?: string; chars: number; plugins: string[]; hash?: string }>;
  context: Array<{ id: string; domain: string; chars: number; plugin: string; hash?: string }>;
  tools: Array<{ name: string; source: string }>;
  /** Tools the agent has but did not send (hidden until revealed), at most 200; absent when none. */
  hiddenTools?: Array<{ name: string; source: string }>;
  messageCount: number;
  systemChars: number;
  /** `exact: false` means chars/4 estimates: the request was far below the context ceiling. */
  tokenEstimate: { exact: boolean; system: number; tools: number; messages: number; total: number };
  options: Record<string, unknown>;
  finalRound: boolean;
  /** The provider's context window (what the ceilings and plugins such as compaction went by); absent when it has none, and in older logs. */
  contextWindow?: number;
  /** The pool member a plugin routed this request to, and why; absent when the default model served. */
  route?: { model: string; provider: string; reason: string; plugin: string };
  /** Digests of what was sent: absent in logs written before Keel recorded them. */
  digest?: RequestDigest;
}

/**
 * Content digests of one request (16 hex characters of SHA-256 each).
 * Contract: `request` changes exactly when the system prompt, the tools sent, the messages or
 * the request options change.
 */
export interface RequestDigest {
  system: string;
  tools: string;
  messages: string;
  options: string;
  request: string;
}
