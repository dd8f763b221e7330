/**
 * @keel/secrets: the one secret scanner every Keel plugin that persists text uses.
 * secretlint's recommended rules, gitleaks-derived provider rules, and Shannon-entropy checks
 * for tokens near key-like words.
 */
export { shannonEntropy, isHighEntropyToken, isWordPath } from "./entropy.ts";
export { isPlaceholder, PATTERN_RULES } from "./rules.ts";
export type { PatternRule } from "./rules.ts";
export { secretlintRuleNames } from "./secretlint.ts";
export { credentialSpans, isSecretParameter, LIBPQ_SECRET_KEYS, maskCredentials } from "./connection.ts";
export type { CredentialSpan } from "./connection.ts";
export {
  containsSecret,
  isKeyField,
  redact,
  redactData,
  redactDeep,
  redactSecrets,
  redactValue,
  scanSecrets,
} from "./scan.ts";
export type { ScanOptions } from "./scan.ts";
export {
  guardedFields,
  MEDIA_BLOCK_TYPES,
  readField,
  redactBlock,
  redactEach,
  redactMessage,
  redactText,
} from "./structured.ts";
export type { Redaction, SecretFinding } from "./types.ts";
