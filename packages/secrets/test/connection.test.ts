import { describe, expect, it } from "vitest";
import { credentialSpans, isSecretParameter, LIBPQ_SECRET_KEYS, maskCredentials, redact } from "../src/index.ts";

const SECRET = "Hx7-q9Tz";

describe("maskCredentials: a connection URL as one setting", () => {
  const cases: Array<[string, string]> = [
    [`postgres://keel:${SECRET}@db.internal:5432/keel`, "postgres://keel:***@db.internal:5432/keel"],
    [`postgres://keel@db.internal/keel?password=${SECRET}`, "postgres://keel@db.internal/keel?password=***"],
    [
      `postgresql://keel@db.internal/keel?sslmode=verify-full&sslpassword=${SECRET}&application_name=a`,
      "postgresql://keel@db.internal/keel?sslmode=verify-full&sslpassword=***&application_name=a",
    ],
    [
      `postgres://keel@db.internal/keel?oauth_client_secret=${SECRET}`,
      "postgres://keel@db.internal/keel?oauth_client_secret=***",
    ],
    // %-encoded and upper-case names: node-postgres decodes query keys (URLSearchParams).
    [`postgres://keel@db.internal/keel?pass%77ord=${SECRET}`, "postgres://keel@db.internal/keel?pass%77ord=***"],
    [`postgres://keel@db.internal/keel?PASSWORD=${SECRET}`, "postgres://keel@db.internal/keel?PASSWORD=***"],
    // Userinfo and query both, several hosts, a socket URL without a host.
    [
      `postgres://keel:${SECRET}@h1:5432,h2:5433/keel?password=${SECRET}`,
      "postgres://keel:***@h1:5432,h2:5433/keel?password=***",
    ],
    [
      `postgres:///keel?host=/var/run/postgresql&password=${SECRET}`,
      "postgres:///keel?host=/var/run/postgresql&password=***",
    ],
    // Passwords a URL parser would split or that hold spaces (node-postgres encodes spaces first).
    [`postgres://keel:a b ${SECRET}@db/keel`, "postgres://keel:***@db/keel"],
    [`postgres://keel:p@ss/${SECRET}@db/keel`, "postgres://keel:***@db/keel"],
    [`postgres://keel:pa?${SECRET}@db/keel`, "postgres://keel:***@db/keel"],
    [`postgres://keel:pa#${SECRET}@db/keel`, "postgres://keel:***@db/keel"],
    [`postgres://keel@db/keel?password=a b ${SECRET}&x=1`, "postgres://keel@db/keel?password=***&x=1"],
    // Any scheme.
    [`mysql://root:${SECRET}@127.0.0.1/app`, "mysql://root:***@127.0.0.1/app"],
  ];
  it.each(cases)("%s", (url, masked) => {
    expect(maskCredentials(url)).toBe(masked);
    expect(maskCredentials(url)).not.toContain(SECRET);
    expect(maskCredentials(maskCredentials(url))).toBe(masked);
  });

  it("keeps a URL without credentials as it is (user, host, port, database, other parameters)", () => {
    for (const url of [
      "postgres://keel@db.internal:5432/keel",
      "postgres://db/keel?sslmode=require&application_name=keel&sslkey=/k/client.key&passfile=/k/.pgpass&require_auth=scram-sha-256",
      "postgres://keel@h:5432/keel?user=me@corp.example",
    ]) {
      expect(maskCredentials(url)).toBe(url);
    }
  });
});

describe("maskCredentials: free text (an error message, a log line)", () => {
  it("masks every URL and keyword/value secret in a message and keeps the words around them", () => {
    const msg = `Could not open postgres://keel:${SECRET}@db/keel?sslpassword=${SECRET}x and mysql://r:${SECRET}@h/x: refused`;
    const masked = maskCredentials(msg);
    expect(masked).not.toContain(SECRET);
    expect(masked).toContain("Could not open postgres://keel:***@db/keel?sslpassword=***");
    expect(masked).toContain("mysql://r:***@h/x: refused");
  });

  it("masks libpq keyword/value connection strings: plain, quoted with escapes, spaces around =", () => {
    const cases: Array<[string, string]> = [
      [`host=db user=keel password=${SECRET} dbname=keel`, "host=db user=keel password=*** dbname=keel"],
      [`host=db password='a b \\' ${SECRET}' dbname=keel`, "host=db password=*** dbname=keel"],
      [`host=db sslpassword = ${SECRET} port=5432`, "host=db sslpassword = *** port=5432"],
      [`oauth_client_secret=${SECRET}`, "oauth_client_secret=***"],
      [`user=keel&password=${SECRET}&next=1`, "user=keel&password=***&next=1"],
    ];
    for (const [text, masked] of cases) expect(maskCredentials(text)).toBe(masked);
  });

  it("leaves text without credentials unchanged", () => {
    for (const t of [
      'database "keel" does not exist',
      "connect ECONNREFUSED 127.0.0.1:5432",
      "see https://example.com/docs?page=2#x",
      "sslmode=require host=db",
      "",
    ])
      expect(maskCredentials(t)).toBe(t);
  });
});

describe("which parameters are secret", () => {
  it("knows libpq's secret keywords (the ones PQconndefaults marks with *) and names that say secret", () => {
    expect(LIBPQ_SECRET_KEYS).toEqual(["password", "sslpassword", "oauth_client_secret"]);
    for (const k of [
      ...LIBPQ_SECRET_KEYS,
      "PASSWORD",
      "passwd",
      "db_password",
      "pwd",
      "api_key",
      "apikey",
      "token",
      "access_token",
      "client_secret",
      "sig",
    ])
      expect(isSecretParameter(k), k).toBe(true);
    for (const k of [
      "host",
      "user",
      "dbname",
      "sslmode",
      "sslkey",
      "sslcert",
      "sslrootcert",
      "passfile",
      "require_auth",
      "application_name",
      "options",
      "page",
    ])
      expect(isSecretParameter(k), k).toBe(false);
  });

  it("reports spans in order, without overlap, each saying what holds it", () => {
    const text = `postgres://u:${SECRET}@h/d?password=${SECRET} host=x password=${SECRET}`;
    const spans = credentialSpans(text);
    expect(spans.map((s) => s.where)).toEqual(["userinfo", "query", "keyword"]);
    for (const s of spans) expect(text.slice(s.start, s.end)).toBe(SECRET);
  });
});

describe("redact (stored text) and connection strings", () => {
  it("catches secrets in URL query strings, even a weak or placeholder-looking value", () => {
    for (const t of [
      `postgres://u@h/db?password=${SECRET}`,
      `postgres://u@h/db?sslpassword=${SECRET}&x=1`,
      "postgres://u@h/db?password=secret",
      `postgres://u@h/db?pass%77ord=${SECRET}`,
      `host=db sslpassword='${SECRET}'`,
    ]) {
      const out = redact(t);
      expect(out, t).toContain("[REDACTED:");
      expect(out, t).not.toMatch(/password=(?:secret|Hx7)/);
      expect(out).not.toContain(SECRET);
    }
  });

  it("leaves code and placeholders after a keyword alone (stored text is full of source code)", () => {
    for (const t of [
      "const token = this.next();",
      "sslpassword = conn_params.get('sslpassword')",
      "user:pass@example.com",
      "sslmode=require",
    ])
      expect(redact(t)).toBe(t);
  });

  it("finds a URL password at its place, not at the first character equal to it (a one-letter password)", () => {
    expect(redact("postgres://u:p@ss@h/db")).toBe("postgres://u:[REDACTED:url_password]@h/db");
  });
});
