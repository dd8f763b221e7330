/**
 * Rules secretlint's preset does not cover. The provider patterns are taken from the
 * gitleaks default ruleset (config/gitleaks.toml, MIT licence, Copyright (c) 2019 Zachary
 * Rice), rewritten for JavaScript RegExp; the password-assignment rule follows the memory
 * plugin's former rule. `group` names the capture that holds the secret (0: the whole match).
 */

/** One pattern rule. Contract: `re` is global; `group` is the capture holding the secret. */
export interface PatternRule {
  id: string;
  kind: string;
  re: RegExp;
  group: number;
  /** Extra check on the captured value; a value it refuses is not a finding. */
  accept?: (value: string) => boolean;
}

/** Words after "password is" that are prose, not a password. */
const PROSE = new Set(
  "is was for the a an and to of that this here there changed reset expired required manager protected stored saved set missing wrong incorrect invalid correct needed optional empty blank same different secure strong weak rotated revoked updated hidden in on at from with".split(
    " ",
  ),
);

/**
 * True for a value that stands for a secret without being one: a variable (`$DB_PASSWORD`,
 * `${TOKEN}`, `{{ secret }}`, `<password>`), a documentation placeholder (`your-api-key`,
 * `your_api_key_here`, `ghp_xxx`, `sk-ant-...`, `****`) or a bare word (`pass`, `password`).
 * Contract: never true for a value with 8+ random characters and no such marker.
 */
export function isPlaceholder(v: string): boolean {
  const t = v.replace(/^["'`]+|["'`]+$/g, "");
  return (
    /^(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|<[^<>]+>|\{\{[^{}]+\}\}|%\([A-Za-z_]+\)s)$/.test(t) ||
    /^(?:your|my)[-_]/i.test(t) ||
    /(?:^|[-_])(?:x{3,}|X{3,})(?:$|[-_])|\.{3}|…|\*{3,}/.test(t) ||
    /(?:^|[-_])(?:here|example|placeholder|changeme)$/i.test(t) ||
    /^(?:pass|password|passwd|pwd|secret|token|changeme|example|placeholder|none|null|undefined|dummy)$/i.test(t)
  );
}

/**
 * True for code rather than a value: a call or index cut at its bracket (`conn_params.get(`,
 * `env[`) or a dotted name (`self.password`, `config.db.password)`); `Passw0rd(2024)` is a value.
 */
const CODE = /^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*[([]$|^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+(?:\(\)?|\))?$/;

/** True for a value after a password word that reads as a password: not prose, a placeholder or code. */
export function plausiblePassword(v: string): boolean {
  if (PROSE.has(v.toLowerCase().replace(/[.?!,:;)]+$/, ""))) return false;
  if (/^\[REDACTED:[a-z_]+\]$/.test(v)) return false;
  if (isPlaceholder(v) || CODE.test(v)) return false;
  return /\d/.test(v) || /[^A-Za-z]/.test(v) || v.length >= 10 || (/[A-Z]/.test(v) && /[a-z]/.test(v) && v.length >= 8);
}

/** The rules, most specific first. */
export const PATTERN_RULES: readonly PatternRule[] = [
  // gitleaks: jwt
  {
    id: "jwt",
    kind: "jwt",
    re: /(?<![A-Za-z0-9])ey[A-Za-z0-9]{17,}\.ey[A-Za-z0-9/_-]{17,}\.(?:[A-Za-z0-9/_-]{10,}={0,2})?/g,
    group: 0,
  },
  // gitleaks: gcp-api-key
  { id: "gcp-api-key", kind: "gcp_api_key", re: /(?<![A-Za-z0-9])AIza[\w-]{35}\b/g, group: 0 },
  // gitleaks: private-key (also a key with its END line missing, cut mid-way)
  {
    id: "private-key",
    kind: "private_key",
    re: /-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|$)/g,
    group: 0,
  },
  // gitleaks: gcp… (Google OAuth access tokens)
  { id: "gcp-oauth-token", kind: "gcp_oauth_token", re: /(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_-]{20,}/g, group: 0 },
  // gitleaks: slack-webhook-url
  {
    id: "slack-webhook",
    kind: "slack_webhook_url",
    re: /(?:https?:\/\/)?hooks\.slack\.com\/(?:services|workflows|triggers)\/[A-Za-z0-9+/]{43,56}/g,
    group: 0,
  },
  // gitleaks: slack-*-token (bot, user, app, config, legacy)
  { id: "slack-token", kind: "slack_token", re: /(?<![A-Za-z0-9])xox[abposre]-[0-9A-Za-z-]{10,250}/g, group: 0 },
  { id: "slack-app-token", kind: "slack_token", re: /(?<![A-Za-z0-9])xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+/gi, group: 0 },
  // gitleaks: github-pat, github-fine-grained-pat, github-oauth/app/refresh
  {
    id: "github-token",
    kind: "github_token",
    re: /(?<![A-Za-z0-9])(?:ghp|gho|ghu|ghs|ghr)_[0-9A-Za-z]{36,}\b|(?<![A-Za-z0-9])github_pat_\w{82}\b/g,
    group: 0,
  },
  // gitleaks: openai-api-key (project, service-account and legacy keys)
  {
    id: "openai-api-key",
    kind: "openai_api_key",
    re: /(?<![A-Za-z0-9])sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|(?<![A-Za-z0-9])sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}\b/g,
    group: 0,
  },
  // gitleaks: anthropic-api-key, anthropic-admin-api-key
  {
    id: "anthropic-api-key",
    kind: "anthropic_api_key",
    re: /(?<![A-Za-z0-9])sk-ant-(?:api|admin)0\d-[A-Za-z0-9_-]{20,}/g,
    group: 0,
  },
  // gitleaks: stripe-access-token
  {
    id: "stripe-key",
    kind: "stripe_key",
    re: /(?<![A-Za-z0-9])(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,99}\b/g,
    group: 0,
  },
  // gitleaks: aws-access-token
  {
    id: "aws-access-key-id",
    kind: "aws_access_key_id",
    re: /(?<![A-Za-z0-9])(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b/g,
    group: 0,
  },
  // gitleaks: npm-access-token, pypi-upload-token, gitlab-pat, huggingface
  { id: "npm-token", kind: "npm_token", re: /(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}\b/g, group: 0 },
  { id: "pypi-token", kind: "pypi_token", re: /(?<![A-Za-z0-9])pypi-AgEIcHlwaS5vcmc[\w-]{50,}/g, group: 0 },
  { id: "gitlab-token", kind: "gitlab_token", re: /(?<![A-Za-z0-9])glpat-[\w-]{20}\b/g, group: 0 },
  { id: "huggingface-token", kind: "huggingface_token", re: /(?<![A-Za-z0-9])hf_[A-Za-z]{34}\b/g, group: 0 },
  // gitleaks: twilio-api-key, sendgrid, mailgun, azure storage account key
  { id: "twilio-api-key", kind: "twilio_api_key", re: /(?<![A-Za-z0-9])SK[0-9a-fA-F]{32}\b/g, group: 0 },
  { id: "sendgrid-api-key", kind: "sendgrid_api_key", re: /(?<![A-Za-z0-9])SG\.[\w-]{22}\.[\w-]{43}\b/g, group: 0 },
  { id: "mailgun-key", kind: "mailgun_key", re: /(?<![A-Za-z0-9])key-[0-9a-f]{32}\b/g, group: 0 },
  { id: "azure-storage-key", kind: "azure_storage_key", re: /AccountKey=([A-Za-z0-9+/=]{60,100})/g, group: 1 },
  // Credentials in a URL: scheme://user:password@host (any scheme).
  {
    id: "url-password",
    kind: "url_password",
    re: /\b[a-z][a-z0-9+.-]{1,20}:\/\/[^\s:@/]{1,200}:([^\s@/]{1,200})@/gi,
    group: 1,
    accept: (v) => !/^\[REDACTED:/.test(v) && !isPlaceholder(v),
  },
  // Authorization: Bearer / Basic <token>
  { id: "bearer", kind: "bearer_token", re: /\b(?:Bearer|Basic|Token)\s+([A-Za-z0-9._~+/-]{16,}=*)/g, group: 1 },
  // ENV-style assignments: FOO_API_KEY=..., DB_PASSWORD: ...
  {
    id: "env-assignment",
    kind: "credential",
    re: /\b[A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|_PASS|_AUTH|CREDENTIALS?)\s*[:=]\s*["']?([^\s"'`,;]{6,})/g,
    group: 1,
    accept: plausiblePassword,
  },
  // Generic `sk-…`/`pk-…`/`rk-…` API keys of providers without a rule of their own.
  {
    id: "generic-sk-key",
    kind: "api_key",
    re: /\b(?:sk|pk|rk)-(?:[A-Za-z0-9_]{2,}-)?[A-Za-z0-9_-]{16,}/g,
    group: 0,
    accept: (v) => /[0-9]/.test(v) || (/[a-z]/.test(v) && v.length >= 24),
  },
  // "my api key is sk-…", "the access token was Abc…": a key word, "is"/"was", a key-shaped value.
  {
    id: "key-is-value",
    kind: "credential",
    re: /\b(?:api[_ -]?key|access[_ -]?key|secret[_ -]?key|client[_ -]?secret|access[_ -]?token|auth[_ -]?token|refresh[_ -]?token|token|secret)\s+(?:is|was)\s*[:=]?\s*["'`]?([^\s"'`,;]{8,})/gi,
    group: 1,
    accept: (v) =>
      plausiblePassword(v) &&
      (/\d/.test(v) || (/[-_./+=]/.test(v) && v.length >= 16) || (/[A-Z]/.test(v) && /[a-z]/.test(v))),
  },
  // "password is hunter2", "pwd: x7!k", "passphrase = ..." in prose and config.
  {
    id: "password-assignment",
    kind: "password",
    re: /(?<![A-Za-z])(?:password|passwd|pwd|passphrase|passcode|pin code)(?![A-Za-z])(?:\s+(?:is|was|=|:)\s*|\s*[:=]\s*)["'`]?([^\s"'`,;]{4,})/gi,
    group: 1,
    accept: plausiblePassword,
  },
];
