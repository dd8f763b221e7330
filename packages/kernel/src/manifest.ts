/**
 * What the model saw on one request, and why. Recorded as a `prompt.compiled` event
 * for every request.
 * Contract: every section names the plugins whose contributions built it.
 */
export interface PromptManifest {
  round: number;
  sections: Array<{ sectionId: string; title?: string; chars: number; plugins: string[] }>;
  context: Array<{ id: string; domain: string; chars: number; plugin: string }>;
  tools: Array<{ name: string; source: string }>;
  /** Tools the agent has but did not send (hidden until revealed), at most 200; absent when none. */
  hiddenTools?: Array<{ name: string; source: string }>;
  messageCount: number;
  systemChars: number;
  /** `exact: false` means chars/4 estimates: the request was far below the context ceiling. */
  tokenEstimate: { exact: boolean; system: number; tools: number; messages: number; total: number };
  options: Record<string, unknown>;
  finalRound: boolean;
}
