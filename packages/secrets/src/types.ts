/** Public types of the secret scanner. */

/**
 * One secret found in a text. It never carries the secret itself.
 * Contract: `start`/`end` are UTF-16 offsets into the scanned text (end exclusive), cover the
 * whole secret value, and never split a surrogate pair; `kind` is snake_case.
 */
export interface SecretFinding {
  /** What was found, e.g. `aws_secret_access_key`, `github_token`, `high_entropy`. */
  kind: string;
  /** Which rule found it: `secretlint:<rule>`, `keel:<rule>` or `entropy`. */
  rule: string;
  start: number;
  end: number;
}

/** What `redactSecrets` returns. Contract: `text` holds no span of any finding; findings refer to the input. */
export interface Redaction {
  text: string;
  findings: SecretFinding[];
}
