/**
 * The stack's secrets, decided once (docs/design/secrets.md): which config keys hold one, what a
 * secret in plain text in a stack file gets told, which env var names and which values look like a
 * credential. The program's loader (load.ts), the config edge (parse.ts, validate.ts), the preflight's
 * stack loading and the offline plan's writer (scripts/lib/plan.ts) all read these, so a key added
 * here is refused in plain text, read with getSecret and redacted from every plan file at once.
 * Pure: no messages ever hold a value.
 */
import { CONFIG_NAMESPACE, ENV_SECRET_PREFIX, type STACK_KEYS } from "./stack-keys";

export { ENV_SECRET_PREFIX } from "./stack-keys";

/** The stack keys that hold a secret (besides every `ingressKey-<name>` and `envSecret-<name>`); each is also a STACK_KEYS entry. */
export const SECRET_STACK_KEYS = ["hfToken", "registryAuth"] as const satisfies ReadonlyArray<(typeof STACK_KEYS)[number]>;

/** Prefix of an operator-supplied ingress key (`ingressKey-sandboxes`, `ingressKey-operators`, ...). */
export const INGRESS_KEY_CONFIG_PREFIX = "ingressKey-";

/** What each secret key is for, as the messages say it. */
const PURPOSE: Readonly<Record<(typeof SECRET_STACK_KEYS)[number], string>> = {
    hfToken: "the Hugging Face token (gated models, Hub pushes, trackio Spaces)",
    registryAuth: "the private-registry credentials (a Docker config.json)",
};

/** Whether a key of the namespace (without `agent-rl-infra:`) holds a secret. */
export function isSecretConfigKey(key: string): boolean {
    return (
        (SECRET_STACK_KEYS as readonly string[]).includes(key) ||
        [INGRESS_KEY_CONFIG_PREFIX, ENV_SECRET_PREFIX].some((prefix) => key.startsWith(prefix) && key.length > prefix.length)
    );
}

function purposeOf(key: string): string {
    if (key.startsWith(ENV_SECRET_PREFIX)) return `the env secret '${key.slice(ENV_SECRET_PREFIX.length)}' (referenced by an extraEnv entry)`;
    return PURPOSE[key as keyof typeof PURPOSE] ?? `the ingress key '${key.slice(INGRESS_KEY_CONFIG_PREFIX.length)}'`;
}

/** The command that stores a secret key encrypted in the stack file. */
export function setSecretCommand(key: string): string {
    if (key === "registryAuth") return `pulumi config set --secret registryAuth "$(cat config.json)"`;
    if (key === "hfToken" || key.startsWith(ENV_SECRET_PREFIX)) return `pulumi config set --secret ${key}`;
    return `pulumi config set --secret ${key} "$(openssl rand -hex 32)"`;
}

/**
 * One line per secret key of `config` (fully qualified keys) that the stack file holds in plain text
 * (`isSecret` says which are encrypted): the key, why, and the command that fixes it. Never the value.
 */
export function plainSecretProblems(configKeys: readonly string[], isSecret: (fullKey: string) => boolean, stackFile: string): string[] {
    const prefix = `${CONFIG_NAMESPACE}:`;
    return configKeys
        .filter((k) => k.startsWith(prefix) && isSecretConfigKey(k.slice(prefix.length)) && !isSecret(k))
        .map((k) => {
            const key = k.slice(prefix.length);
            return (
                `${k}: ${purposeOf(key)} is a secret, and ${stackFile} holds it in plain text (value not shown): whoever reads the file or the repository has it, ` +
                `and every plan and state would carry it: store it encrypted with ${setSecretCommand(key)} (it replaces the plain entry; ` +
                `rotate the value first if the file was ever shared or committed)`
            );
        });
}

/**
 * What the offline plan puts in place of a secret it cannot read (an encrypted `secure:` value, or a
 * secret the stack needs and does not set): a value the config edge accepts, redacted from every file.
 */
export function secretPlaceholder(key: string): string {
    if (key === "registryAuth") {
        const auth = Buffer.from("plan-placeholder:plan-placeholder").toString("base64");
        return JSON.stringify({ auths: { "registry.plan-placeholder.invalid": { auth } } });
    }
    return `plan-placeholder-${key}`;
}

/** The secret keys a config needs set before `pulumi up` (the offline plan stands placeholders in for them). */
export function requiredSecretKeys(config: EnvMapsConfig & { readonly training: { readonly hubRepoId?: string } }): string[] {
    const refs = [...new Set(envSecretRefs(config).map((r) => r.key))];
    return [...(config.training.hubRepoId !== undefined ? ["hfToken"] : []), ...refs];
}

// ---------------------------------------------------------------------------------------
// Secret references in env maps

/** An env map entry that takes its value from the stack's secret config key `secret` (`envSecret-<name>`). */
export interface SecretRef {
    readonly secret: string;
}

/** An env map's value: plain text, or a reference to a stack secret. */
export type EnvValue = string | SecretRef;

/** The env maps that take references. */
export interface EnvMapsConfig {
    readonly training: { readonly extraEnv: Readonly<Record<string, EnvValue>>; readonly vllm: { readonly extraEnv: Readonly<Record<string, EnvValue>> } };
}

export function isSecretRef(v: EnvValue): v is SecretRef {
    return typeof v !== "string";
}

/** The plain-text entries of an env map. */
export function plainEnv(env: Readonly<Record<string, EnvValue>>): Record<string, string> {
    return Object.fromEntries(Object.entries(env).flatMap(([k, v]) => (typeof v === "string" ? [[k, v]] : [])));
}

/** The referenced entries of an env map: env var name -> stack secret key. */
export function secretRefEnv(env: Readonly<Record<string, EnvValue>>): Record<string, string> {
    return Object.fromEntries(Object.entries(env).flatMap(([k, v]) => (isSecretRef(v) ? [[k, v.secret]] : [])));
}

/** Every secret reference of the config's env maps, with the field that holds it. */
export function envSecretRefs(config: EnvMapsConfig): Array<{ readonly field: string; readonly key: string }> {
    const maps: Array<[string, Readonly<Record<string, EnvValue>>]> = [
        ["training.extraEnv", config.training.extraEnv],
        ["training.vllm.extraEnv", config.training.vllm.extraEnv],
    ];
    return maps.flatMap(([field, env]) => Object.entries(secretRefEnv(env)).map(([name, key]) => ({ field: `${field}.${name}`, key })));
}

/**
 * One line per reference to a stack secret the stack file does not set (`configKeys` fully qualified):
 * the field, the key, and the command that sets it.
 */
export function missingEnvSecretProblems(config: EnvMapsConfig, configKeys: readonly string[], stackFile: string): string[] {
    return envSecretRefs(config)
        .filter((r) => !configKeys.includes(`${CONFIG_NAMESPACE}:${r.key}`))
        .map(
            (r) =>
                `${r.field}: references the stack secret ${r.key}, which ${stackFile} does not set: set it with ${setSecretCommand(r.key)} (or remove the reference)`,
        );
}

/** An env setting's value: plain text, or a key of an existing Kubernetes Secret in the env's namespace. */
export type SettingValue = string | { readonly secretKeyRef: { readonly name: string; readonly key: string } };

/** The plain-text settings of an env. */
export function plainSettings(settings: Readonly<Record<string, SettingValue>>): Record<string, string> {
    return Object.fromEntries(Object.entries(settings).flatMap(([k, v]) => (typeof v === "string" ? [[k, v]] : [])));
}

/** The settings taken from an existing Kubernetes Secret: env var -> (Secret, key). */
export function secretKeyRefSettings(settings: Readonly<Record<string, SettingValue>>): Record<string, { readonly name: string; readonly key: string }> {
    return Object.fromEntries(
        Object.entries(settings).flatMap(([k, v]) => (typeof v === "string" ? [] : [[k, { name: v.secretKeyRef.name, key: v.secretKeyRef.key }]])),
    );
}

// ---------------------------------------------------------------------------------------
// Names and values that look like a credential (docs/design/secrets.md keeps the two tables' words)

/** A rule that recognises a credential, with what it matched as a message says it and why that is one. */
export interface CredentialRule {
    readonly re: RegExp;
    /** What matched, as a message says it after "its name" or "looks like": "ends in _PASS or _PWD", "a JSON Web Token (eyJ...)". */
    readonly what: string;
    /** Why it is a credential (the design note's table). */
    readonly why: string;
    /** A way to keep the setting without the secret, where there is one. */
    readonly fix?: string;
}

/**
 * Env var (and env setting) names that say the value is a credential, matched on the upper-cased name.
 * Names are matched by meaning, so a word inside another word does not count: `PASSAGE_COUNT`,
 * `COMPASS_MODE`, `TOKENIZERS_PARALLELISM`, `MAX_TOKENS`, `PWD` (the shell's working directory) pass.
 */
export const SECRET_ENV_NAMES: readonly CredentialRule[] = [
    { re: /PASSWORD|PASSWD|PASSPHRASE/, what: "holds PASSWORD, PASSWD or PASSPHRASE", why: "a password (PGPASSWORD, DB_PASSWD)" },
    {
        re: /(^|_)PASS$|_PWD$/,
        what: "ends in _PASS or _PWD",
        why: "a password by its short name (RABBITMQ_DEFAULT_PASS, SMTP_PASS, MYSQL_PWD); not PWD alone, the working directory",
    },
    { re: /SECRET|CREDENTIAL/, what: "holds SECRET or CREDENTIAL", why: "the name says it is one (AWS_SECRET_ACCESS_KEY, GOOGLE_APPLICATION_CREDENTIALS)" },
    {
        re: /API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|AUTH_?KEY|(^|_)KEY$/,
        what: "holds APIKEY, API_KEY, PRIVATE_KEY, ACCESS_KEY or AUTH_KEY, or ends in KEY",
        why: "a key that authenticates (OPENAI_API_KEY, SSH_PRIVATE_KEY, STRIPE_KEY)",
    },
    {
        re: /TOKEN(?!IZER|S(?![A-Z0-9]))/,
        what: "holds TOKEN",
        why: "a bearer or API token (HF_TOKEN, GITHUB_TOKEN); not TOKENIZER or TOKENS, which are counts (MAX_TOKENS)",
    },
    {
        re: /CONN(ECTION)?_?STR(ING)?S?(?![A-Z])/,
        what: "holds CONNECTION_STRING or CONN_STR",
        why: "a connection string carries its password or account key (AZURE_STORAGE_CONNECTION_STRING, DB_CONN_STR)",
    },
    {
        re: /(^|_)DSN(_|$)/,
        what: "holds DSN",
        why: "a data source name carries its password or key (PG_DSN, SENTRY_DSN)",
    },
    {
        re: /WEBHOOK/,
        what: "holds WEBHOOK",
        why: "a chat webhook's URL is its own credential: whoever has it posts (SLACK_WEBHOOK_URL, DISCORD_WEBHOOK)",
    },
];

/** The rule that says an env var (or env setting) name holds a secret; undefined for an ordinary name. */
export function secretEnvNameRule(name: string): CredentialRule | undefined {
    const n = name.toUpperCase();
    return SECRET_ENV_NAMES.find((r) => r.re.test(n));
}

/** Whether an env var (or env setting) name holds a secret (SECRET_ENV_NAMES). */
export function isSecretEnvName(name: string): boolean {
    return secretEnvNameRule(name) !== undefined;
}

/**
 * Values that are a credential, whatever field holds them. A token format with a known prefix needs a
 * token's length after it, so a word never matches (`hf_transfer`, `sk-learn`); a URL or a connection
 * string counts only with its secret part (`http://user@proxy` and `Server=db;Database=x` pass).
 */
export const CREDENTIAL_VALUES: readonly CredentialRule[] = [
    {
        re: /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----/,
        what: "a PEM private key (-----BEGIN ... PRIVATE KEY-----)",
        why: "a TLS, SSH or PGP private key (RFC 7468 labels); a CERTIFICATE or PUBLIC KEY block is public and passes",
    },
    {
        re: /[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s/?#@:]*:[^\s/?#@]+@/,
        what: "a URL with a password in it (scheme://user:password@host)",
        why: "userinfo with a password (RFC 3986 3.2.1): a proxy URL, postgres://user:pass@host",
        fix: "name the endpoint without its user:password part",
    },
    {
        re: /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/,
        what: "a JSON Web Token (eyJ...)",
        why: "a signed bearer token: header and claims are base64url JSON objects, so both start eyJ (RFC 7519)",
    },
    {
        re: /hooks\.slack\.com\/(?:services|workflows|triggers)\/[A-Za-z0-9_/-]{8,}/i,
        what: "a Slack webhook URL (hooks.slack.com/services/...)",
        why: "the URL is the credential: whoever has it posts to the channel",
    },
    {
        re: /discord(?:app)?\.com\/api\/(?:v\d+\/)?webhooks\/\d+\/[A-Za-z0-9_-]{8,}/i,
        what: "a Discord webhook URL (discord.com/api/webhooks/...)",
        why: "the URL carries the webhook's token",
    },
    {
        re: /\.webhook\.office\.com\/webhookb2\/[A-Za-z0-9@/-]{8,}|outlook\.office(?:365)?\.com\/webhook\/[A-Za-z0-9@/-]{8,}/i,
        what: "a Microsoft Teams webhook URL (webhook.office.com/webhookb2/...)",
        why: "the URL is the credential: whoever has it posts to the channel",
    },
    {
        re: /[?&]sig=[A-Za-z0-9%+/=_-]{16,}/,
        what: "a URL signed with a shared access signature (...&sig=...)",
        why: "the signature grants access on its own (an Azure SAS URL, a Teams or Power Automate workflow URL)",
    },
    {
        re: /(?:^|;)\s*(?:AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd)\s*=\s*[^;\s]/i,
        what: "a connection string with its key or password (AccountKey=, SharedAccessSignature=, Password=)",
        why: "an Azure Storage or Service Bus key, an ADO.NET or ODBC password",
    },
    {
        re: /(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}/,
        what: "a Hugging Face token (hf_...)",
        why: "read or write access to the Hub as its owner",
    },
    {
        re: /(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{20,}/,
        what: "an API key (sk-..., OpenAI or Anthropic style)",
        why: "billed model API access",
    },
    {
        re: /(?<![A-Za-z0-9])(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/,
        what: "a GitHub token (ghp_..., github_pat_...)",
        why: "repository access as its owner",
    },
    {
        re: /(?<![A-Za-z0-9])(AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])/,
        what: "an AWS access key id (AKIA...)",
        why: "half of an AWS key pair; its secret is seldom far",
    },
    { re: /(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}/, what: "a Slack token (xox...)", why: "Slack API access as a bot or user" },
    { re: /(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,}/, what: "a GitLab token (glpat-...)", why: "repository access as its owner" },
];

/** The rule a string value matches when it looks like a credential; undefined otherwise. */
export function credentialValueRule(value: string): CredentialRule | undefined {
    return CREDENTIAL_VALUES.find((r) => r.re.test(value));
}

/** What a string value looks like when it looks like a credential; undefined otherwise. */
export function credentialKind(value: string): string | undefined {
    return credentialValueRule(value)?.what;
}

// ---------------------------------------------------------------------------------------
// Where env is set, and the reference that carries a secret there

/**
 * Every env map of the platform config (fields with `<name>` for an env's name): where a stack sets an
 * env var or an env setting, and the form a secret takes there. The name rule and the value rule both
 * refuse a plain-text secret in each, naming this form.
 */
export const ENV_MAP_FIELDS = [
    { field: "training.extraEnv", reference: "stack-secret" },
    { field: "training.vllm.extraEnv", reference: "stack-secret" },
    { field: "envs.<name>.settings", reference: "secret-key-ref" },
] as const satisfies ReadonlyArray<{ readonly field: string; readonly reference: "stack-secret" | "secret-key-ref" }>;

/** The ENV_MAP_FIELDS entry an env map's field (`envs.coding.settings`) is; undefined for any other field. */
function envMapField(field: string): (typeof ENV_MAP_FIELDS)[number] | undefined {
    return ENV_MAP_FIELDS.find((m) => new RegExp(`^${m.field.replace(/\./g, "\\.").replace("<name>", "[^.]+")}$`).test(field));
}

/** The fix for a secret written in plain text as `name` in the env map `field`: the reference form that map takes. */
export function envReferenceFix(field: string, name: string): string {
    return envMapField(field)?.reference === "secret-key-ref"
        ? `pass it as a reference to an existing Kubernetes Secret in the env's namespace instead: ${name}: { secretKeyRef: { name: <Secret>, key: <key> } } (Kubernetes target only)`
        : `pass it as a reference instead: ${name}: { secret: ${ENV_SECRET_PREFIX}<name> } and pulumi config set --secret ${ENV_SECRET_PREFIX}<name>`;
}

/** The env map and entry name of a path (`training.extraEnv.DB_URL`), when it is an entry of one. */
function envEntryAt(path: string): { readonly field: string; readonly name: string } | undefined {
    const dot = path.lastIndexOf(".");
    if (dot < 0) return undefined;
    const field = path.slice(0, dot);
    return envMapField(field) === undefined ? undefined : { field, name: path.slice(dot + 1) };
}

function isObj(v: unknown): v is Record<string, unknown> {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A stack key written inside the platform object (`platform.hfToken`, `training.HF_TOKEN`, `ingress.ingressKey-ops`). */
function misplacedSecretKey(field: string): string | undefined {
    const n = field.toLowerCase().replace(/[-_]/g, "");
    if (n === "hftoken" || n === "huggingfacetoken") return "hfToken";
    if (n === "registryauth") return "registryAuth";
    const ingress = /^ingress[-_]?key[-_](.+)$/i.exec(field);
    if (ingress !== null) return `${INGRESS_KEY_CONFIG_PREFIX}${ingress[1]}`;
    return undefined;
}

/**
 * A value at `path` that looks like a credential (never shown): in an env map, the reference form that
 * map takes; elsewhere, the stack's secret keys.
 */
function credentialValueProblem(path: string, rule: CredentialRule): string {
    const hint = rule.fix === undefined ? "" : `, or ${rule.fix}`;
    const entry = envEntryAt(path);
    if (entry !== undefined)
        return (
            `${path}: looks like ${rule.what} (value not shown), and ${entry.field} is plain text in the stack file and the pod spec: remove the value; ` +
            `${envReferenceFix(entry.field, entry.name)}${hint}; rotate it if the file was shared`
        );
    return (
        `${path}: looks like ${rule.what} (value not shown), and a stack file is plain text that every plan and manifest copies: remove it; ` +
        `the stack carries secrets only as its secret keys (${SECRET_STACK_KEYS.join(", ")}, ${INGRESS_KEY_CONFIG_PREFIX}<name>, and ${ENV_SECRET_PREFIX}<name> that an extraEnv entry references as { secret: ${ENV_SECRET_PREFIX}<name> }; set with pulumi config set --secret)` +
        `${rule.fix === undefined ? "" : `, so ${rule.fix}`}; rotate it if the file was shared`
    );
}

/**
 * The platform object's secrets in the wrong place, before the schema reads it: a stack secret key
 * written as a field (named, with the command that sets it, instead of "unknown field"; the field is
 * dropped from `value`, so the schema does not say it twice), and every string anywhere that looks
 * like a credential (named by its path, never shown; `hide` takes it out of any other check's message).
 */
export function platformSecretProblems(raw: unknown): {
    readonly value: unknown;
    readonly problems: string[];
    /** Hides the credential values found from another check's message (one that quotes a value it refuses). */
    readonly hide: (message: string) => string;
} {
    const problems: string[] = [];
    const found = new Set<string>();
    const walk = (v: unknown, path: string, inEnvMap: boolean): unknown => {
        if (typeof v === "string") {
            const rule = credentialValueRule(v);
            if (rule !== undefined) {
                problems.push(credentialValueProblem(path, rule));
                found.add(v);
            }
            return v;
        }
        if (Array.isArray(v)) return v.map((x, i) => walk(x, `${path}[${i}]`, false));
        if (!isObj(v)) return v;
        const out: Record<string, unknown> = {};
        for (const [k, x] of Object.entries(v)) {
            const at = path === "" ? k : `${path}.${k}`;
            const stackKey = inEnvMap ? undefined : misplacedSecretKey(k);
            if (stackKey !== undefined) {
                problems.push(
                    `${at}: ${stackKey} is a stack secret, not a field of platform (value not shown): remove it from the platform object and store it encrypted with ${setSecretCommand(stackKey)}`,
                );
                continue;
            }
            out[k] = walk(x, at, envMapField(at) !== undefined);
        }
        return out;
    };
    const value = walk(raw, "", false);
    const hide = (message: string) => [...found].reduce((m, v) => m.split(v).join("<value not shown>"), message);
    return { value, problems, hide };
}
