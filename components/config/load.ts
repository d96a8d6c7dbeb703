/**
 * Reads the stack's config once from `pulumi.Config`: the structured object
 * `agent-rl-infra:platform` (zod-parsed) and the secrets, each in its own key read with
 * getSecret so Pulumi keeps it marked secret end to end.
 */
import * as pulumi from "@pulumi/pulumi";
import { validateKeys } from "./keys";
import { CONFIG_NAMESPACE, missingPlatformMessage, stackObject, unknownStackKeys } from "./stack-keys";
import { parseClusterConfig } from "./cluster";
import type { ClusterConfig } from "./cluster-schema";
import { ConfigError } from "./errors";
import { parsePlatformConfig } from "./parse";
import { ENV_SECRET_PREFIX, envSecretRefs, missingEnvSecretProblems, plainSecretProblems } from "./secrets";
import type { PlatformConfig } from "./types";

export { CONFIG_NAMESPACE } from "./stack-keys";

/** The stack file `pulumi up` reads (Pulumi.yaml: stackConfigDir stacks). */
const stackFile = () => `stacks/Pulumi.${pulumi.getStack()}.yaml`;

/** Secrets of the stack, as secret outputs. */
export interface PlatformSecrets {
    /** Hugging Face token (`pulumi config set --secret hfToken`), for gated models and Hub pushes. */
    readonly hfToken?: pulumi.Output<string>;
    /** Ingress keys supplied by the operator (`pulumi config set --secret ingressKey-<name>`); others are generated. */
    readonly ingressKeys: Readonly<Record<string, pulumi.Output<string>>>;
    /**
     * Private-registry credentials (`pulumi config set --secret registryAuth "$(cat config.json)"`): a
     * Docker config.json / dockerconfigjson, and the registries it names (not secret: host names).
     */
    readonly registryAuth?: RegistryAuth;
    /** The stack secrets env maps reference (`{ secret: envSecret-<name> }`), by config key. */
    readonly envSecrets?: Readonly<Record<string, pulumi.Output<string>>>;
}

/** Registry credentials: the dockerconfigjson (secret) and the registries its `auths` name. */
export interface RegistryAuth {
    readonly dockerConfigJson: pulumi.Output<string>;
    readonly registries: readonly string[];
}

/** Config key of the registry credentials. */
export const REGISTRY_AUTH_KEY = "registryAuth";

/** Config key of a supplied ingress key. */
export function ingressKeyConfigKey(name: string): string {
    return `ingressKey-${name}`;
}

/**
 * Whether the stack file holds a config key encrypted: the language host hands the program the keys
 * the CLI decrypted (PULUMI_CONFIG_SECRET_KEYS; @pulumi/pulumi runtime/config.ts `isConfigSecret`,
 * internal, present in 3.x). Without it nothing can tell, and nothing is refused.
 */
function configIsSecret(fullKey: string): boolean {
    const isConfigSecret = (pulumi.runtime as unknown as { isConfigSecret?: (k: string) => boolean }).isConfigSecret;
    return isConfigSecret === undefined ? true : isConfigSecret(fullKey);
}

/** Secret keys the stack file holds in plain text: refused, naming the command that encrypts each. */
function plainSecrets(all: Readonly<Record<string, string>>): string[] {
    return plainSecretProblems(Object.keys(all), configIsSecret, stackFile());
}

/** Turns config problems into the clean, trace-free error Pulumi prints. */
export function toRunError(e: unknown): never {
    if (e instanceof ConfigError) throw new pulumi.RunError(e.message);
    throw e;
}

/**
 * The cluster stack's config (`agent-rl-infra:cluster`), parsed; undefined for a run stack.
 * A stack is one or the other: both keys is an error.
 */
export function loadClusterConfig(): ClusterConfig | undefined {
    const cfg = new pulumi.Config(CONFIG_NAMESPACE);
    const raw = cfg.get("cluster");
    if (raw === undefined) return undefined;
    if (cfg.get("platform") !== undefined)
        throw new pulumi.RunError(
            `${stackFile()} sets both ${CONFIG_NAMESPACE}:cluster and ${CONFIG_NAMESPACE}:platform: a stack is a cluster stack or a run stack; move one into a stack of its own (run stacks point at the cluster stack with clusterStack)`,
        );
    const problems = [...unknownStackKeys(Object.keys(pulumi.runtime.allConfig())), ...plainSecrets(pulumi.runtime.allConfig())];
    const obj = stackObject("cluster", raw, stackFile());
    if ("problem" in obj) problems.push(obj.problem);
    try {
        if (problems.length > 0) throw new ConfigError(problems);
        return parseClusterConfig("value" in obj ? obj.value : raw);
    } catch (e) {
        toRunError(e);
    }
}

export function loadPlatformConfig(): { config: PlatformConfig; secrets: PlatformSecrets } {
    const cfg = new pulumi.Config(CONFIG_NAMESPACE);
    const all = pulumi.runtime.allConfig();
    const raw = cfg.get("platform");
    if (raw === undefined) throw new pulumi.RunError(missingPlatformMessage(stackFile(), Object.keys(all)));
    // Every problem at once: keys that are no setting (a misspelled secret), the platform object, the supplied keys.
    const problems = [...unknownStackKeys(Object.keys(all)), ...plainSecrets(all)];
    const obj = stackObject("platform", raw, stackFile());
    let config: PlatformConfig | undefined;
    if ("problem" in obj) problems.push(obj.problem);
    else {
        try {
            config = parsePlatformConfig(obj.value, pulumi.getStack());
        } catch (e) {
            if (!(e instanceof ConfigError)) throw e;
            problems.push(...e.problems);
        }
    }
    if (config !== undefined) problems.push(...checkSuppliedKeys(config.ingress.keys, all), ...missingEnvSecretProblems(config, Object.keys(all), stackFile()));
    if (problems.length > 0 || config === undefined) toRunError(new ConfigError(problems));
    const ingressKeys: Record<string, pulumi.Output<string>> = {};
    for (const name of config.ingress.keys) {
        const supplied = cfg.getSecret(ingressKeyConfigKey(name));
        if (supplied !== undefined) ingressKeys[name] = supplied;
    }
    const registryProblems = checkRegistryAuth(pulumi.runtime.allConfig()[`${CONFIG_NAMESPACE}:${REGISTRY_AUTH_KEY}`]);
    if (registryProblems.problems.length > 0) toRunError(new ConfigError(registryProblems.problems));
    const dockerConfigJson = cfg.getSecret(REGISTRY_AUTH_KEY);
    const registryAuth = dockerConfigJson !== undefined ? { dockerConfigJson, registries: registryProblems.registries } : undefined;
    const envSecrets: Record<string, pulumi.Output<string>> = {};
    for (const { key } of envSecretRefs(config)) if (key.startsWith(ENV_SECRET_PREFIX)) envSecrets[key] = cfg.requireSecret(key);
    return { config, secrets: { hfToken: cfg.getSecret("hfToken"), ingressKeys, ...(registryAuth ? { registryAuth } : {}), envSecrets } };
}

/**
 * Supplied ingress keys are checked here, at the config edge, so a bad one stops the run
 * before anything registers (the nginx keys file would refuse it mid-deploy). Messages name
 * the config key, never its value.
 */
export function checkSuppliedKeys(keyNames: readonly string[], allConfig: Readonly<Record<string, string>>): string[] {
    const prefix = `${CONFIG_NAMESPACE}:${ingressKeyConfigKey("")}`;
    const problems: string[] = [];
    for (const [key, value] of Object.entries(allConfig)) {
        if (!key.startsWith(prefix)) continue;
        const name = key.slice(prefix.length);
        const field = ingressKeyConfigKey(name);
        if (!keyNames.includes(name)) {
            problems.push(
                `${field}: no key '${name}' in ingress.keys (${keyNames.join(", ")}): add '${name}' to ingress.keys or remove it with pulumi config rm ${field}`,
            );
        } else if (validateKeys([{ name, key: value }]).length > 0) {
            problems.push(
                `${field}: must be 16 to 512 characters of [A-Za-z0-9._~+/=-] (value not shown): set a new one, e.g. pulumi config set --secret ${field} "$(openssl rand -hex 32)"`,
            );
        }
    }
    return problems;
}

/**
 * The config.json keys terraform-provider-docker v4 reads Docker Hub credentials from for an entry
 * whose address is a Docker Hub host (internal/provider/provider.go `getAuthConfigFromConfigFile`,
 * `preferredDockerHubKeys`, v4.0.0 to v4.5.0); `docker login` files them under the first.
 */
export const DOCKER_HUB_CONFIG_KEYS: readonly string[] = ["https://index.docker.io/v1/", "index.docker.io", "docker.io"];

/**
 * The hosts the provider's RemoteImage pull looks Docker Hub credentials up under, exactly
 * (resource_docker_image_funcs.go `pullImage`, `parseImageOptions`): registry-1.docker.io for a
 * name without a registry part, docker.io or index.docker.io for a name that starts with one.
 */
export const DOCKER_HUB_PULL_HOSTS: readonly string[] = ["registry-1.docker.io", "docker.io", "index.docker.io"];

/**
 * The Docker provider's registryAuth addresses for the registries a config.json names: each of them,
 * and, when it holds Docker Hub credentials under a key the provider reads (DOCKER_HUB_CONFIG_KEYS),
 * every Docker Hub pull host no registry already names, so `https://index.docker.io/v1/` credentials
 * also serve `nginx` (looked up under registry-1.docker.io, where no entry of that key is filed).
 */
export function dockerProviderAddresses(registries: readonly string[]): string[] {
    if (!registries.some((r) => DOCKER_HUB_CONFIG_KEYS.includes(r))) return [...registries];
    const hosts = new Set(registries.map((r) => r.replace(/^https?:\/\//, "").split("/")[0]!));
    return [...registries, ...DOCKER_HUB_PULL_HOSTS.filter((h) => !hosts.has(h))];
}

/**
 * The registryAuth secret, checked at the config edge: a Docker config.json (`{"auths": {"<registry>":
 * {"auth": "<base64 user:password>"}}}`, what `docker login` writes and a kubernetes.io/dockerconfigjson
 * Secret holds). Returns the registries it names; messages name the key, never the value.
 */
export function checkRegistryAuth(value: string | undefined): { problems: string[]; registries: string[] } {
    if (value === undefined) return { problems: [], registries: [] };
    const fix = `set it to a Docker config.json with the credentials inline (what a kubernetes.io/dockerconfigjson Secret holds), e.g. pulumi config set --secret ${REGISTRY_AUTH_KEY} "$(kubectl create secret docker-registry pull --docker-server=<registry> --docker-username=<user> --docker-password=<token> --dry-run=client -o jsonpath='{.data.\\.dockerconfigjson}' | base64 -d)"`;
    let parsed: unknown;
    try {
        parsed = JSON.parse(value);
    } catch {
        return { problems: [`${REGISTRY_AUTH_KEY}: not JSON (value not shown): ${fix}`], registries: [] };
    }
    const auths = (parsed as { auths?: unknown } | null)?.auths;
    if (typeof auths !== "object" || auths === null || Array.isArray(auths) || Object.keys(auths).length === 0) {
        return { problems: [`${REGISTRY_AUTH_KEY}: has no "auths" object naming at least one registry (value not shown): ${fix}`], registries: [] };
    }
    const problems: string[] = [];
    for (const [registry, entry] of Object.entries(auths as Record<string, unknown>)) {
        const e = (entry ?? {}) as Record<string, unknown>;
        const hasAuth = typeof e.auth === "string" && e.auth.length > 0;
        const hasUserPass = typeof e.username === "string" && typeof e.password === "string";
        if (!hasAuth && !hasUserPass && typeof e.identitytoken !== "string")
            problems.push(
                `${REGISTRY_AUTH_KEY}: auths["${registry}"] holds no credentials (no auth, username/password or identitytoken; value not shown): ${fix}`,
            );
    }
    return { problems, registries: Object.keys(auths as Record<string, unknown>) };
}
