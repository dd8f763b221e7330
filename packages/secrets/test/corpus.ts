/**
 * A labelled corpus for the scanner: real-looking keys of many providers (generated from a
 * seed at run time, so no key-shaped literal sits in the repository) and ordinary text that
 * must pass untouched (UUIDs, hashes in prose, base64 images, code, paths, public keys).
 */

/** A seeded PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const B64 = `${ALNUM}+/`;
const URLSAFE = `${ALNUM}_-`;
const HEX = "0123456789abcdef";

/** A labelled sample: `secret` is the string that must not survive redaction (undefined: a negative). */
export interface Sample {
  label: string;
  text: string;
  secret?: string;
}

/** The corpus for one seed. */
export function corpus(seed = 12): Sample[] {
  const r = rng(seed);
  const pick = (set: string, n: number) => {
    let s = "";
    for (let i = 0; i < n; i++) s += set[Math.floor(r() * set.length)];
    // Keep a digit in alphanumeric draws (as real keys have); other sets are left as drawn.
    return /[0-9]/.test(set) && !/[0-9]/.test(s) ? `${s.slice(0, -1)}7` : s;
  };
  const b64 = (n: number) => pick(B64, n);
  const pem = (label: string) =>
    `-----BEGIN ${label}-----\n${Array.from({ length: 6 }, () => b64(64)).join("\n")}\n-----END ${label}-----`;
  const jwt = () => {
    const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
    return `${enc({ alg: "HS256", typ: "JWT" })}.${enc({ sub: pick(HEX, 12), name: "Ada Lovelace", iat: 1_700_000_000 + Math.floor(r() * 1e6) })}.${pick(URLSAFE, 43)}`;
  };
  const pos: Array<[string, (s: string) => string, string]> = [
    ["aws access key id", (s) => `Our deploy user is ${s}, do not share it.`, `AKIA${pick(UPPER32, 16)}`],
    ["aws secret in prose", (s) => `Remember my aws key with secret ${s} for the deploy.`, b64(40)],
    ["aws secret env", (s) => `export AWS_SECRET_ACCESS_KEY=${s}`, b64(40)],
    ["aws docs example secret", (s) => `with secret ${s}`, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
    ["github classic pat", (s) => `use ${s} to push`, `ghp_${pick(ALNUM, 36)}`],
    ["github fine-grained pat", (s) => `GH token: ${s}`, `github_pat_${pick(ALNUM, 22)}_${pick(ALNUM, 59)}`],
    ["github oauth", (s) => `oauth=${s}`, `gho_${pick(ALNUM, 36)}`],
    [
      "slack bot token",
      (s) => `SLACK_BOT=${s}`,
      `xoxb-${pick("0123456789", 12)}-${pick("0123456789", 13)}-${pick(ALNUM, 24)}`,
    ],
    [
      "slack webhook",
      (s) => `post alerts to ${s}`,
      `https://hooks.slack.com/services/T${pick(UPPER32, 8)}/B${pick(UPPER32, 10)}/${pick(ALNUM, 24)}`,
    ],
    ["openai project key", (s) => `OPENAI key is ${s}`, `sk-proj-${pick(URLSAFE, 74)}T3BlbkFJ${pick(URLSAFE, 74)}`],
    [
      "openai legacy key",
      (s) => `const client = new OpenAI({ apiKey: "${s}" });`,
      `sk-${pick(ALNUM, 20)}T3BlbkFJ${pick(ALNUM, 20)}`,
    ],
    ["anthropic key", (s) => `ANTHROPIC_API_KEY=${s}`, `sk-ant-api03-${pick(URLSAFE, 93)}AA`],
    ["anthropic key in prose", (s) => `here is the claude key ${s} thanks`, `sk-ant-api03-${pick(URLSAFE, 93)}AA`],
    ["rsa private key", (s) => `key file:\n${s}\n`, pem("RSA PRIVATE KEY")],
    ["openssh private key", (s) => `${s}`, pem("OPENSSH PRIVATE KEY")],
    ["private key cut mid-way", (s) => `paste: ${s}`, pem("PRIVATE KEY").slice(0, 200)],
    ["jwt", (s) => `Authorization header was ${s}`, jwt()],
    ["jwt in json", (s) => `{"id_token":"${s}"}`, jwt()],
    ["postgres url password", (s) => `DATABASE_URL=postgres://app:${s}@db.internal:5432/app`, `${pick(ALNUM, 14)}!x`],
    ["https basic auth url", (s) => `curl https://deploy:${s}@ci.example.com/hook`, pick(ALNUM, 16)],
    ["mongodb srv url", (s) => `mongodb+srv://root:${s}@cluster0.mongodb.net/test`, pick(ALNUM, 20)],
    ["stripe live key", (s) => `stripe: ${s}`, `sk_live_${pick(ALNUM, 24)}`],
    ["google api key", (s) => `maps key ${s}`, `AIza${pick(URLSAFE, 35)}`],
    ["npm token", (s) => `//registry.npmjs.org/:_authToken=${s}`, `npm_${pick(ALNUM, 36)}`],
    ["gitlab pat", (s) => `gitlab ${s}`, `glpat-${pick(URLSAFE, 20)}`],
    ["huggingface token", (s) => `HF ${s}`, `hf_${pick("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", 34)}`],
    ["sendgrid key", (s) => `sendgrid ${s}`, `SG.${pick(URLSAFE, 22)}.${pick(URLSAFE, 43)}`],
    ["password in prose", (s) => `my password is ${s} for the wifi`, "Tr0ub4dor&3"],
    ["password env", (s) => `DB_PASSWORD=${s}`, `${pick(ALNUM, 12)}#`],
    ["password yaml", (s) => `db:\n  user: app\n  password: '${s}'`, `x9$${pick(ALNUM, 8)}`],
    ["bearer header", (s) => `Authorization: Bearer ${s}`, pick(URLSAFE, 48)],
    ["hex api key", (s) => `api_key: "${s}"`, pick(HEX, 32)],
    ["base64url token", (s) => `token: ${s}`, pick(URLSAFE, 40)],
    ["twilio api key", (s) => `twilio ${s}`, `SK${pick(HEX, 32)}`],
    [
      "azure storage key",
      (s) => `DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=${s};EndpointSuffix=core.windows.net`,
      `${b64(86)}==`,
    ],
    ["client secret json", (s) => `{"client_id": "web-app", "client_secret": "${s}"}`, pick(URLSAFE, 40)],
    ["shopify token", (s) => `shop ${s}`, `shpat_${pick(HEX, 32)}`],
    ["groq key", (s) => `groq ${s}`, `gsk_${pick(ALNUM, 52)}`],
    ["databricks token", (s) => `databricks ${s}`, `dapi${pick(HEX, 32)}`],
    ["mailgun key", (s) => `mailgun ${s}`, `key-${pick(HEX, 32)}`],
    ["linear key", (s) => `linear ${s}`, `lin_api_${pick(ALNUM, 40)}`],
    ["bare high-entropy key", (s) => `use ${s} as the value`, pick(ALNUM, 40)],
  ];
  const positives: Sample[] = pos.map(([label, wrap, secret]) => ({ label, text: wrap(secret), secret }));

  const uuid = () => `${pick(HEX, 8)}-${pick(HEX, 4)}-4${pick(HEX, 3)}-a${pick(HEX, 3)}-${pick(HEX, 12)}`;
  const negatives: Sample[] = [
    `Ticket ${uuid()} was closed; see also ${uuid()}.`,
    `The idempotency key is ${uuid()}.`,
    `Fixed in commit ${pick(HEX, 40)} (reverted in ${pick(HEX, 7)}).`,
    `sha256 of the tarball: ${pick(HEX, 64)}`,
    `The file hash is md5 ${pick(HEX, 32)} per the manifest.`,
    `<img src="data:image/png;base64,${b64(400)}=">`,
    `background: url(data:image/gif;base64,${b64(120)});`,
    `"integrity": "sha512-${b64(86)}=="`,
    `my public key is ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI${b64(43)} ada@laptop`,
    "const apiKey = process.env.OPENAI_API_KEY;\nif (!apiKey) throw new Error('set OPENAI_API_KEY');",
    "function getAccessTokenForUser(userId: string) { return tokens.get(userId); }",
    "The refresh token flow calls handleUserAuthenticationTokenRefreshCallback on expiry.",
    "The password is stored in the vault, never in the repo.",
    "Reset your password at https://example.com/account/reset-password?step=2",
    "My favourite colour is blue and release day is Thursday.",
    "The key insight is that memory recall must stay within the namespace.",
    "Open /usr/local/lib/node_modules/typescript/lib/tsc.js and src/plugins/memory/index.ts",
    "See https://github.com/keel-dev/keel/blob/main/packages/kernel/src/turn.ts#L120-L140",
    "Bump typescript from 5.9.2 to 5.9.3 and vitest to 4.1.12 in package.json.",
    "maxTokens: 4096, tokenizer: cl100k_base, temperature: 0.2",
    "API key rotation is scheduled every 90 days; tokens expire after 3600 seconds.",
    "| id | name | created |\n|---|---|---|\n| 42 | Ada | 2026-11-23T20:25:14Z |",
    "SELECT id, token_hash FROM sessions WHERE user_id = $1 AND expires_at > now()",
    "The secret to good bread is time: let the dough rest overnight.",
    "Call me at +44 20 7946 0958 or write to ada@example.com.",
    `Session ${pick(ALNUM, 8)} started; turn ${pick(HEX, 16)} finished in 1.2 s.`,
    "for (let i = 0; i < keys.length; i++) { const key = keys[i]; out[key] = src[key]; }",
    "docker run -e POSTGRES_PASSWORD_FILE=/run/secrets/db -p 5432:5432 postgres:16",
    "The AWS region is eu-west-1 and the bucket is acme-prod-artifacts-2026.",
    "https://user@example.com/path is a URL with a user but no password.",
    "Translate 'mot de passe' to English: it means password.",
    "JWTs have three parts separated by dots: header.payload.signature.",
    `Base64 of 'hello world' is aGVsbG8gd29ybGQ= and the etag is "${pick(HEX, 32)}".`,
    "npm install @secretlint/secretlint-rule-preset-recommend --save-dev",
    "Kubernetes pod keel-worker-7d9f8b6c5d-x2k9p restarted 3 times.",
    "Use Bearer authentication: send the token in the Authorization header.",
  ].map((text, i) => ({ label: `negative ${i + 1}`, text }));
  return [...positives, ...negatives];
}
