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
// Names and values that look like a credential

/**
 * Whether an env var (or env setting) name holds a secret: a name with PASSWORD, PASSWD, PASSPHRASE,
 * SECRET, CREDENTIAL, APIKEY/API_KEY, PRIVATE_KEY, ACCESS_KEY, AUTH_KEY or TOKEN anywhere in it (not
 * TOKENIZER or TOKENS: counts), or one ending in KEY or PWD (`PGPASSWORD`, `OPENAI_APIKEY`, `HF_TOKEN`).
 */
export function isSecretEnvName(name: string): boolean {
    const n = name.toUpperCase();
    return (
        /PASSWORD|PASSWD|PASSPHRASE|SECRET|CREDENTIAL|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|AUTH_?KEY/.test(n) ||
        /TOKEN(?!IZER|S(?![A-Z0-9]))/.test(n) ||
        /(^|_)(KEY|PWD)$/.test(n)
    );
}

/** Token formats with a known prefix; each needs enough characters after it that a word never matches. */
const TOKEN_FORMATS: ReadonlyArray<{ readonly re: RegExp; readonly what: string }> = [
    { re: /(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}/, what: "a Hugging Face token (hf_...)" },
    { re: /(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{20,}/, what: "an API key (sk-..., OpenAI or Anthropic style)" },
    { re: /(?<![A-Za-z0-9])(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/, what: "a GitHub token (ghp_..., github_pat_...)" },
    { re: /(?<![A-Za-z0-9])(AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])/, what: "an AWS access key id (AKIA...)" },
    { re: /(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}/, what: "a Slack token (xox...)" },
    { re: /(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,}/, what: "a GitLab token (glpat-...)" },
];

/** A URL whose userinfo has a password (`scheme://user:password@host`). */
const URL_WITH_PASSWORD = /[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s/?#@:]*:[^\s/?#@]+@/;

/** What a string value looks like when it looks like a credential; undefined otherwise. */
export function credentialKind(value: string): string | undefined {
    if (URL_WITH_PASSWORD.test(value)) return "a URL with a password in it (scheme://user:password@host)";
    return TOKEN_FORMATS.find((f) => f.re.test(value))?.what;
}

function isObj(v: unknown): v is Record<string, unknown> {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Maps of env vars and env settings (checked by name in validate.ts, by value here). */
const ENV_MAPS = new Set(["extraEnv", "settings"]);

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
 * The platform object's secrets in the wrong place, before the schema reads it: a stack secret key
 * written as a field (named, with the command that sets it, instead of "unknown field"; the field is
 * dropped from `value`, so the schema does not say it twice), and every string anywhere that looks
 * like a credential (named by its path, never shown).
 */
export function platformSecretProblems(raw: unknown): { readonly value: unknown; readonly problems: string[] } {
    const problems: string[] = [];
    const walk = (v: unknown, path: string, inEnvMap: boolean): unknown => {
        if (typeof v === "string") {
            const kind = credentialKind(v);
            if (kind !== undefined)
                problems.push(
                    `${path}: looks like ${kind} (value not shown), and a stack file is plain text that every plan and manifest copies: remove it; ` +
                        `the stack carries secrets only as its secret keys (${SECRET_STACK_KEYS.join(", ")}, ${INGRESS_KEY_CONFIG_PREFIX}<name>, and ${ENV_SECRET_PREFIX}<name> that an extraEnv entry references as { secret: ${ENV_SECRET_PREFIX}<name> }; set with pulumi config set --secret)` +
                        `${kind.startsWith("a URL") ? ", so name the endpoint without its user:password part" : ""}; rotate it if the file was shared`,
                );
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
            out[k] = walk(x, at, ENV_MAPS.has(k));
        }
        return out;
    };
    const value = walk(raw, "", false);
    return { value, problems };
}
