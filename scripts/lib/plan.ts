/**
 * The offline plan: runs the very program `pulumi up` runs (index.ts) under Pulumi's mock
 * runtime and writes what the engine would be asked to create: Kubernetes manifests, Docker
 * objects as JSON, and plan.md. No CLI, no cluster, no credentials. Secret values never
 * reach the output: Secret data is redacted and every known secret value is scrubbed.
 */
import {
    alertRules,
    DASHBOARD_FILE,
    grafanaDashboard,
    PROMETHEUS_CONFIG_FILE,
    prometheusConfigText,
    RULES_FILE,
    rulesFileText,
} from "../../components/observability";
import { observedStack } from "../../components/platform/observability";
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import YAML from "yaml";
import {
    checkRegistryAuth,
    REGISTRY_AUTH_KEY,
    clusterOutputs,
    CONFIG_NAMESPACE,
    ConfigError,
    ingressKeyConfigKey,
    envSecretRefs,
    isSecretConfigKey,
    isSecretEnvName,
    JOBSET_RELEASE,
    KUEUE_RELEASE,
    plainSecretProblems,
    requiredSecretKeys,
    secretPlaceholder,
    SECRET_STACK_KEYS,
    missingPlatformMessage,
    parseClusterConfig,
    parsePlatformConfig,
    POD_SECURITY,
    RECIPES,
    ROLES,
    teamNamespace,
    type ClusterConfig,
    type ClusterOutputs,
    type PlatformConfig,
    type Recipe,
    type RecipeName,
    stackObject,
    trainerImageName,
} from "../../components/config";
import { resolvePlatform, type PlatformPlan } from "../../components/platform";
import { renderPlanMarkdown } from "./plan-markdown";
import { isSecret, runUnderMocks, type RecordedResource } from "./mockrun";

/** Where a recipe plan's placeholder images live (a plan never pulls them). */
export const RECIPE_PLAN_REGISTRY = "registry.example.com/agent-rl";

export const REPO_ROOT = path.resolve(__dirname, "..", "..");
export const REDACTED = "<redacted>";

/** What to plan: a stack file, or a recipe on its defaults. */
export type PlanSource = { readonly stack: string; readonly stackFile?: string } | { readonly recipe: string; readonly target: "kubernetes" | "docker" };

export interface PlanOptions {
    /** Output directory; created, and emptied of a previous plan. */
    readonly outDir: string;
    /** Plain values for secret keys (tests use sentinels); default: placeholders. */
    readonly secrets?: Readonly<Record<string, string>>;
    /** Extra/overriding raw platform fields (deep-merged over the stack's; tests and benchmarks). */
    readonly platformOverride?: Record<string, unknown>;
    /** Run as a preview (unknown outputs). @default false */
    readonly preview?: boolean;
}

export interface PlanResult {
    readonly stack: string;
    readonly plan: PlatformPlan;
    readonly resources: RecordedResource[];
    /** Kubernetes manifests written (kubernetes target). */
    readonly manifests: Array<Record<string, any>>;
    readonly files: string[];
}

/** Raised for a plan that cannot be made (bad stack file, bad config). Printed without a trace. */
export class PlanError extends Error {}

/** The stack named has no file: a bad argument (exit 2), not a bad config. */
export class UnknownStackError extends PlanError {}

export interface StackConfig {
    stack: string;
    /** The stack file, as the messages name it (relative to the working directory); undefined for a recipe. */
    file?: string;
    config: Record<string, string>;
    secretKeys: string[];
}

function isObj(v: unknown): v is Record<string, unknown> {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Reads stacks/Pulumi.<stack>.yaml the way the CLI does: objects become JSON strings, `secure:` values are secrets. */
export function readStackFile(stack: string, file?: string): StackConfig {
    const p = file ?? path.join(REPO_ROOT, "stacks", `Pulumi.${stack}.yaml`);
    if (!fs.existsSync(p)) {
        throw new UnknownStackError(
            `no stack file ${path.relative(process.cwd(), p)}: known stacks are ${knownStacks().join(", ") || "(none)"}; or plan a recipe with --recipe <name>`,
        );
    }
    let doc: unknown;
    try {
        doc = YAML.parse(fs.readFileSync(p, "utf8"));
    } catch (e) {
        throw new PlanError(`${p}: not valid YAML: ${(e as Error).message}`);
    }
    const raw = isObj(doc) && isObj(doc.config) ? doc.config : {};
    const config: Record<string, string> = {};
    const secretKeys: string[] = [];
    for (const [k, v] of Object.entries(raw)) {
        const key = k.includes(":") ? k : `${CONFIG_NAMESPACE}:${k}`;
        if (isObj(v) && typeof v.secure === "string" && Object.keys(v).length === 1) {
            // Encrypted in the stack file; the plan never decrypts: a placeholder stands in.
            config[key] = secretPlaceholder(key.slice(key.indexOf(":") + 1));
            secretKeys.push(key);
        } else {
            config[key] = typeof v === "string" ? v : JSON.stringify(v);
        }
    }
    return { stack, file: path.relative(process.cwd(), p) || p, config, secretKeys };
}

/** The stacks with a file in stacks/ (cluster stacks too). */
export function knownStacks(): string[] {
    const dir = path.join(REPO_ROOT, "stacks");
    return fs.existsSync(dir) ? fs.readdirSync(dir).flatMap((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1] ?? []) : [];
}

/**
 * A recipe plan's platform object: the recipe on its defaults. It never deploys: its Kubernetes target
 * names a placeholder context (stacks other than dev must name their cluster), and its images are
 * placeholders too, under the names `npm run images` pushes (trainer-whitebox or trainer-blackbox,
 * sandbox); neither exists publicly.
 */
export function recipePlatform(recipe: string, target: "kubernetes" | "docker"): Record<string, unknown> {
    const k8s = target === "kubernetes";
    const r = RECIPES[recipe as RecipeName] as Recipe | undefined;
    return {
        recipe,
        runId: "demo",
        target: k8s ? { kind: target, context: "recipe-plan" } : { kind: target },
        // The names npm run images pushes under (components/config/built-images.ts).
        images: { trainer: `${RECIPE_PLAN_REGISTRY}/${trainerImageName(r?.training.layout ?? "")}:plan` },
        ...(k8s && r?.training.layout === "blackbox" ? { sandboxes: { image: `${RECIPE_PLAN_REGISTRY}/sandbox:plan` } } : {}),
        // The Harbor path's tasks are the stack's: two placeholder task images show one pool per image.
        ...(r?.harbor !== undefined ? { harbor: { taskImages: RECIPE_PLAN_TASK_IMAGES.map((t) => ({ image: `${RECIPE_PLAN_REGISTRY}/${t}:plan` })) } } : {}),
    };
}

/** A Harbor recipe plan's placeholder task images (the example registry holds none; plan.md warns). */
export const RECIPE_PLAN_TASK_IMAGES = ["harbor-task-hello-world", "harbor-task-fix-permissions"] as const;

function configForSource(source: PlanSource): StackConfig {
    if ("stack" in source) return readStackFile(source.stack, source.stackFile);
    return {
        stack: `${source.recipe}-${source.target === "kubernetes" ? "k8s" : "docker"}`,
        config: { [`${CONFIG_NAMESPACE}:platform`]: JSON.stringify(recipePlatform(source.recipe, source.target)) },
        secretKeys: [],
    };
}

/** apiVersion/kind of a `kubernetes:<group>/<version>:<Kind>` type token. */
export function kubernetesGvk(type: string): { apiVersion: string; kind: string } | undefined {
    const m = /^kubernetes:([^:]+)\/([^:/]+):(.+)$/.exec(type);
    if (!m) return undefined;
    const [, group, version, kind] = m;
    return { apiVersion: group === "core" ? version : `${group}/${version}`, kind };
}

/**
 * Every value a secret holds, to scrub from all output: each secret config key's value (the one list,
 * components/config/secrets.ts, whether or not the stack file encrypted it), every key the run marked
 * secret, each generated (random) value, and the base64 of each (a Secret's data, a registry auth).
 */
function secretValues(cfg: StackConfig, result: RecordedResource[]): string[] {
    const values = new Set<string>();
    for (const [k, v] of Object.entries(cfg.config)) if (cfg.secretKeys.includes(k) || isSecretConfigKey(k.slice(k.indexOf(":") + 1))) values.add(v);
    for (const r of result) if (r.type.startsWith("random:")) values.add(`mock-random-${r.name}`);
    for (const v of [...values]) {
        values.add(Buffer.from(v).toString("base64"));
        values.add(JSON.stringify(v).slice(1, -1));
    }
    // Longest first: a value that holds another is scrubbed whole.
    return [...values].filter((v) => v.length >= 4).sort((a, b) => b.length - a.length);
}

function scrub(text: string, secrets: readonly string[]): string {
    let out = text;
    for (const s of secrets) out = out.split(s).join(REDACTED);
    return out;
}

/** A Docker-style env entry `NAME=value`. */
const ENV_ENTRY = /^([A-Za-z_][A-Za-z0-9_]*)=([\s\S]*)$/;

/**
 * A string the program marked secret (a Pulumi secret input), as the plan shows it: the known
 * secret values in it redacted; one with none of them (a secret of unknown origin) redacted whole,
 * but for a `NAME=value` env entry of a plain name, whose value is not secret (an env list is
 * marked secret as a whole when one entry is).
 */
function redactSecretString(s: string, secrets: readonly string[]): string {
    const scrubbed = scrub(s, secrets);
    if (scrubbed !== s) return scrubbed;
    const env = ENV_ENTRY.exec(s);
    if (env === null) return REDACTED;
    return isSecretEnvName(env[1]!) ? `${env[1]}=${REDACTED}` : s;
}

/** A Kubernetes Secret's values never reach the plan, whatever they are. */
function redactSecretObject(obj: Record<string, any>): Record<string, any> {
    if (obj.kind !== "Secret") return obj;
    // A pull Secret must still hold a Docker config.json for the API server to accept it (the dry runs).
    const placeholder = (k: string, encoded: boolean) =>
        obj.type === "kubernetes.io/dockerconfigjson" && k === ".dockerconfigjson"
            ? encoded
                ? Buffer.from(REDACTED_DOCKER_CONFIG).toString("base64")
                : REDACTED_DOCKER_CONFIG
            : REDACTED;
    const redactAs = (m: unknown, encoded: boolean) => (isObj(m) ? Object.fromEntries(Object.keys(m).map((k) => [k, placeholder(k, encoded)])) : m);
    return { ...obj, ...(obj.data ? { data: redactAs(obj.data, true) } : {}), ...(obj.stringData ? { stringData: redactAs(obj.stringData, false) } : {}) };
}

/** What a pull Secret's config.json becomes in the offline plan: valid, with no credential. */
const REDACTED_DOCKER_CONFIG = JSON.stringify({ auths: { [REDACTED]: { auth: REDACTED } } });

/**
 * Drops what only Pulumi sees (secret wrappers, undefined values, empty helpers) so the manifest
 * is what kubectl would get: a secret is its value, keys and all, with every string in it redacted
 * (redactSecretString) when `secrets` is given (the plan's files; tests read it raw); a Secret's data is
 * redacted whole by redactSecretObject, and every known secret value anywhere by scrub.
 */
function clean(v: unknown, secrets?: readonly string[], inSecret = false): unknown {
    if (isSecret(v)) return clean(v.value, secrets, true);
    if (typeof v === "string" && secrets !== undefined) return inSecret ? redactSecretString(v, secrets) : scrub(v, secrets);
    if (Array.isArray(v)) return v.map((x) => clean(x, secrets, inSecret));
    if (isObj(v)) {
        const out: Record<string, unknown> = {};
        for (const [k, x] of Object.entries(v)) if (x !== undefined && x !== null) out[k] = clean(x, secrets, inSecret);
        return out;
    }
    return v;
}

const KIND_ORDER = ["Namespace", "CustomResourceDefinition", "ServiceAccount", "Secret", "ConfigMap", "PersistentVolumeClaim", "Role", "RoleBinding"];

export function manifestsOf(resources: readonly RecordedResource[], secrets?: readonly string[]): Array<Record<string, any>> {
    const out: Array<Record<string, any>> = [];
    for (const r of resources) {
        const gvk = kubernetesGvk(r.type);
        if (!gvk || !r.custom) continue;
        out.push(clean({ ...r.inputs, apiVersion: r.inputs.apiVersion ?? gvk.apiVersion, kind: r.inputs.kind ?? gvk.kind }, secrets) as Record<string, any>);
    }
    const rank = (k: string) => (KIND_ORDER.includes(k) ? KIND_ORDER.indexOf(k) : KIND_ORDER.length);
    return out.sort((a, b) => rank(a.kind) - rank(b.kind));
}

function runProgram(): () => Promise<Record<string, unknown>> {
    // The same function Pulumi runs for `pulumi up` (Pulumi.yaml main: index.ts).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(path.join(REPO_ROOT, "index.ts"));
}

/** Empties (creates) `outDir`; `write` puts a file under it (through `filter`) and records its path. */
function outputDir(outDir: string, filter: (text: string) => string): { files: string[]; write: (rel: string, text: string) => void } {
    fs.rmSync(outDir, { recursive: true, force: true });
    fs.mkdirSync(outDir, { recursive: true });
    const files: string[] = [];
    const write = (rel: string, text: string) => {
        const p = path.join(outDir, rel);
        fs.mkdirSync(path.dirname(p), { recursive: true });
        fs.writeFileSync(p, filter(text));
        files.push(p);
    };
    return { files, write };
}

/** manifests/<nnn>-<kind>-<namespace>-<name>.yaml, in apply order. */
function writeManifests(write: (rel: string, text: string) => void, manifests: ReadonlyArray<Record<string, any>>): void {
    manifests.forEach((m, i) => {
        const ns = m.metadata?.namespace ? `${m.metadata.namespace}-` : "";
        write(path.join("manifests", `${String(i).padStart(3, "0")}-${m.kind.toLowerCase()}-${ns}${m.metadata?.name ?? "unnamed"}.yaml`), YAML.stringify(m));
    });
}

/** Plans one stack or recipe into `outDir`. Throws PlanError for a bad stack or config. */
export async function planToDir(source: PlanSource, opts: PlanOptions): Promise<PlanResult> {
    const cfg = configForSource(source);
    for (const [k, v] of Object.entries(opts.secrets ?? {})) {
        const key = k.includes(":") ? k : `${CONFIG_NAMESPACE}:${k}`;
        cfg.config[key] = v;
        if (!cfg.secretKeys.includes(key)) cfg.secretKeys.push(key);
    }
    if (opts.platformOverride) {
        const key = `${CONFIG_NAMESPACE}:platform`;
        const base = cfg.config[key] ? JSON.parse(cfg.config[key]) : {};
        const { deepMerge } = await import("../../components/config");
        cfg.config[key] = JSON.stringify(deepMerge(base, opts.platformOverride));
    }
    if (cfg.config[`${CONFIG_NAMESPACE}:cluster`] !== undefined)
        throw new PlanError(`stack ${cfg.stack} is a cluster stack (${CONFIG_NAMESPACE}:cluster): plan it with planClusterToDir (npm run plan does)`);
    // The program names the file `pulumi up` reads; the plan knows the one it was given.
    if (cfg.config[`${CONFIG_NAMESPACE}:platform`] === undefined) throw new PlanError(missingPlatformMessage(cfg.file ?? cfg.stack, Object.keys(cfg.config)));
    refusePlainSecrets(cfg);
    const placeholders = placeholdRequiredSecrets(cfg);
    const run = await runUnderMocks(runProgram(), {
        stack: cfg.stack,
        config: cfg.config,
        secretKeys: cfg.secretKeys,
        preview: opts.preview,
        stackOutputs: clusterStackOutputs(cfg),
    });
    if (run.error) {
        if (pulumi.RunError.isInstance(run.error)) throw new PlanError((run.error as Error).message);
        throw run.error;
    }
    // The pure phase again, for the plan's tables (the same functions the program ran).
    const rawPlatform = JSON.parse(cfg.config[`${CONFIG_NAMESPACE}:platform`]);
    const config: PlatformConfig = parsePlatformConfig(rawPlatform, cfg.stack);
    const plan = resolvePlatform(config, {
        hfToken: cfg.config[`${CONFIG_NAMESPACE}:hfToken`] !== undefined,
        registryAuth: registriesOf(cfg.config[`${CONFIG_NAMESPACE}:${REGISTRY_AUTH_KEY}`]),
    });
    const secrets = secretValues(cfg, run.resources);

    const { files, write } = outputDir(opts.outDir, (text) => scrub(text, secrets));

    const manifests = manifestsOf(run.resources, secrets).map(redactSecretObject);
    if (config.target.kind === "kubernetes") {
        writeManifests(write, manifests);
    } else {
        let i = 0;
        for (const r of run.resources) {
            const m = /^docker:index\/(\w+):(\w+)$/.exec(r.type);
            if (!m) continue;
            write(
                path.join("docker", `${String(i++).padStart(3, "0")}-${m[2].toLowerCase()}-${r.name}.json`),
                `${JSON.stringify({ type: r.type, name: r.name, inputs: clean(r.inputs, secrets) }, null, 2)}\n`,
            );
        }
    }
    write("plan.md", renderPlanMarkdown(plan, run.resources, manifests, placeholders));
    // observability: the rules and the dashboard as files (Docker: for the host's Prometheus and Grafana; docs/guides/observability.md).
    if (config.observability.enabled) {
        const observed = observedStack(plan);
        write(path.join("observability", RULES_FILE), rulesFileText(alertRules(config.observability, observed)));
        write(path.join("observability", DASHBOARD_FILE), `${JSON.stringify(grafanaDashboard(config.observability, observed), null, 2)}\n`);
        // Docker: prometheus.yml over the loopback targets, its rule_files the rules file beside it.
        if (config.target.kind === "docker")
            write(path.join("observability", PROMETHEUS_CONFIG_FILE), prometheusConfigText(config.observability, observed, plan.dockerMetrics));
    }
    const scrubbedManifests = manifests.map((m) => JSON.parse(scrub(JSON.stringify(m), secrets)));
    return { stack: cfg.stack, plan, resources: run.resources, manifests: scrubbedManifests, files };
}

/** A stack file's secret keys in plain text stop the plan, as they stop the program, naming the file read. */
function refusePlainSecrets(cfg: StackConfig): void {
    const problems = plainSecretProblems(Object.keys(cfg.config), (k) => cfg.secretKeys.includes(k), cfg.file ?? cfg.stack);
    if (problems.length > 0) throw new PlanError(new ConfigError(problems).message);
}

/**
 * The secrets the config needs before `pulumi up` (hfToken for training.hubRepoId) and the stack
 * file does not set: the plan stands a placeholder in, as for a `secure:` value, so a stack plans
 * before anyone sets up Pulumi secrets; plan.md names them. Returns their keys.
 */
function placeholdRequiredSecrets(cfg: StackConfig): string[] {
    let config: PlatformConfig;
    try {
        config = parsePlatformConfig(JSON.parse(cfg.config[`${CONFIG_NAMESPACE}:platform`]!), cfg.stack);
    } catch {
        return []; // the program reports a bad config, with every problem
    }
    const missing = requiredSecretKeys(config).filter((k) => cfg.config[`${CONFIG_NAMESPACE}:${k}`] === undefined);
    for (const k of missing) {
        cfg.config[`${CONFIG_NAMESPACE}:${k}`] = secretPlaceholder(k);
        cfg.secretKeys.push(`${CONFIG_NAMESPACE}:${k}`);
    }
    return missing;
}

/** Whether a stack file is a cluster stack (config agent-rl-infra:cluster). */
export function isClusterStack(source: { readonly stack: string; readonly stackFile?: string }): boolean {
    return readStackFile(source.stack, source.stackFile).config[`${CONFIG_NAMESPACE}:cluster`] !== undefined;
}

/**
 * The outputs of the cluster stack a run stack names (clusterStack), computed offline from the
 * local stack file of that name (stacks/Pulumi.<last segment>.yaml), as the cluster program
 * would export them. A plan cannot read a deployed stack.
 */
export function clusterStackOutputs(cfg: StackConfig): Record<string, Record<string, unknown>> {
    const raw = cfg.config[`${CONFIG_NAMESPACE}:platform`];
    // A platform value that is not an object is the program's to report (stackObject), with every other problem.
    const platform = raw !== undefined ? stackObject("platform", raw, cfg.file ?? cfg.stack) : undefined;
    const ref = platform !== undefined && "value" in platform ? platform.value.clusterStack : undefined;
    if (typeof ref !== "string") return {};
    const name = ref.split("/").pop() ?? ref;
    let cluster: StackConfig;
    try {
        cluster = readStackFile(name);
    } catch {
        throw new PlanError(`clusterStack ${ref}: no stacks/Pulumi.${name}.yaml to plan against (a plan reads the cluster stack's file, not a deployed stack)`);
    }
    const clusterRaw = cluster.config[`${CONFIG_NAMESPACE}:cluster`];
    if (clusterRaw === undefined)
        throw new PlanError(`clusterStack ${ref}: stacks/Pulumi.${name}.yaml is not a cluster stack (no ${CONFIG_NAMESPACE}:cluster)`);
    try {
        return { [ref]: { ...clusterOutputs(parseClusterConfig(JSON.parse(clusterRaw))) } };
    } catch (e) {
        throw new PlanError(`clusterStack ${ref}: ${(e as Error).message}`);
    }
}

export interface ClusterPlanResult {
    readonly stack: string;
    readonly config: ClusterConfig;
    readonly outputs: ClusterOutputs;
    readonly resources: RecordedResource[];
    readonly manifests: Array<Record<string, any>>;
    readonly files: string[];
}

/** Plans a cluster stack into `outDir`: its manifests (the agent-sandbox release stays a file reference) and plan.md. */
export async function planClusterToDir(
    source: { readonly stack: string; readonly stackFile?: string },
    opts: { readonly outDir: string },
): Promise<ClusterPlanResult> {
    const cfg = readStackFile(source.stack, source.stackFile);
    const raw = cfg.config[`${CONFIG_NAMESPACE}:cluster`];
    if (raw === undefined) throw new PlanError(`stack ${cfg.stack} is not a cluster stack (no ${CONFIG_NAMESPACE}:cluster)`);
    refusePlainSecrets(cfg);
    const run = await runUnderMocks(runProgram(), { stack: cfg.stack, config: cfg.config, secretKeys: cfg.secretKeys });
    if (run.error) {
        if (pulumi.RunError.isInstance(run.error)) throw new PlanError((run.error as Error).message);
        throw run.error;
    }
    const config = parseClusterConfig(JSON.parse(raw));
    const outputs = clusterOutputs(config);
    const secrets = secretValues(cfg, run.resources);
    const { files, write } = outputDir(opts.outDir, (text) => scrub(text, secrets));
    const manifests = manifestsOf(run.resources, secrets).map(redactSecretObject);
    writeManifests(write, manifests);
    const lines = [
        `# Cluster stack ${cfg.stack}`,
        "",
        `Context: \`${config.target.context}\`. What every run stack on this cluster shares; run stacks read it with`,
        `\`clusterStack: <org>/<project>/${cfg.stack}\` and create none of it.`,
        "",
        "| Object | Name | Detail |",
        "|---|---|---|",
        ...(config.agentSandbox.install
            ? [`| agent-sandbox ${outputs.agentSandbox.version} (CRDs, controller, RBAC) | release manifest | \`${config.agentSandbox.manifest}\` |`]
            : []),
        ...(config.jobSet.install
            ? [`| JobSet ${JOBSET_RELEASE} (CRDs, controller, webhooks, RBAC) | release manifest | \`${config.jobSet.manifest}\` |`]
            : []),
        ...(config.kueue.install ? [`| Kueue ${KUEUE_RELEASE} (CRDs, controller, webhooks, RBAC) | release manifest | \`${config.kueue.manifest}\` |`] : []),
        ...(["training", "sandboxes"] as const).flatMap((role) => {
            const pc = config.priorityClasses[role];
            return pc ? [`| PriorityClass (${role}) | ${pc.name} | value ${pc.value}, ${pc.preemptionPolicy} |`] : [];
        }),
        ...config.runtimeClasses.map((r) => `| RuntimeClass | ${r.name} | handler \`${r.handler}\` (the nodes' runtime must have it) |`),
        ...config.teams.flatMap((t) => [
            ...ROLES.map(
                (role) =>
                    `| Namespace (team ${t.name}, ${role}) | ${teamNamespace(t.name, role)} | Pod Security ${POD_SECURITY[role]}, default-deny ingress, ${t.quotas[role] ? `ResourceQuota ${JSON.stringify(t.quotas[role])}` : "no quota"}${t.deployers.length > 0 ? `, deployer Role for ${t.deployers.map((d) => `${d.kind} ${d.name}`).join(", ")}` : ""} |`,
            ),
            `| ValidatingAdmissionPolicy + binding (team ${t.name}) | agentrl-${t.name}-sandbox-claims | sandbox claims in ${teamNamespace(t.name, "sandboxes")} live at most ${t.sandboxMaxLifetimeSeconds}s and name their run |`,
        ]),
        ...(config.certIssuer ? [`| cert-manager issuer (reference, not created) | ${config.certIssuer.name} | ${config.certIssuer.kind} |`] : []),
        "",
        "## Outputs (what run stacks read)",
        "",
        "`clusterId` (the kube-system namespace's UID) is read from the cluster at `up`; a plan reads no cluster, so it is not below.",
        "",
        "```json",
        JSON.stringify(outputs, null, 2),
        "```",
        "",
    ];
    write("plan.md", lines.join("\n"));
    return { stack: cfg.stack, config, outputs, resources: run.resources, manifests, files };
}

/** Config keys of every secret a stack can have (for tests and docs): the secret stack keys and one per ingress key. */
export function secretConfigKeys(config: PlatformConfig): string[] {
    return [...SECRET_STACK_KEYS, ...config.ingress.keys.map(ingressKeyConfigKey), ...new Set(envSecretRefs(config).map((r) => r.key))];
}

/** The registries a registryAuth value names (undefined when unset: no registry credentials). */
function registriesOf(value: string | undefined): readonly string[] | undefined {
    return value === undefined ? undefined : checkRegistryAuth(value).registries;
}
