/**
 * The one schema of a stack's configuration (`agent-rl-infra:platform`), parsed once at the
 * edge with zod, fully defaulted, and handed down as plain typed data.
 *
 * Secrets are NOT here: they are separate config keys read with `requireSecret`/`getSecret`
 * (see load.ts), because reading them as plain objects would drop the secret marking.
 * Defaults that depend on other fields (e.g. vLLM GPUs by layout) are applied in
 * `resolveDefaults` (resolve.ts), once, after parsing.
 *
 * A field's words (what it means, its default as a person states it, the why and the source) live
 * in one place, field-docs.ts, by field path: the configuration reference and the JSON Schema's
 * descriptions are generated from them (`npm run schema`). No comment here repeats them: only
 * top-level declarations carry JSDoc (test/schema-docs.test.ts holds it).
 */
import { z } from "zod";
import { CATALOG_NAMES } from "./catalog";
import { INGRESS_LIMIT_DEFAULTS } from "./ingress-defaults";
import { HARBOR_AGENTS } from "./harbor-facts";
import { CUSTOM_PROGRAM, PROGRAM_NAMES } from "./programs";
import { DTYPES, GPU_SHARING, LAYOUTS, SANDBOX_PROVIDER_NAMES, WEIGHT_DTYPES } from "./terms";

/** DNS-1123 subdomain: Kubernetes object names, host names. */
export const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** DNS-1123 label: what every name derived from it must stay. */
export const dnsLabel = z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be lower-case letters, digits and '-', starting and ending with a letter or digit");
const imageRef = z.string().regex(/^[a-z0-9][a-zA-Z0-9._\-/:@]*$/, "must be an image reference such as ghcr.io/org/name@sha256:<digest>");
export const quantity = z.string().regex(/^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/, "must be a Kubernetes quantity such as 500m, 4Gi or 2");
const posInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();

const toleration = z.strictObject({
    key: z.string().optional(),
    operator: z.enum(["Exists", "Equal"]).optional(),
    value: z.string().optional(),
    effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
    tolerationSeconds: z.number().int().optional(),
});

const ipv4Address = z.string().regex(/^(\d{1,3}\.){3}\d{1,3}$/, "must be one IPv4 address such as 169.254.20.10 (no range)");

const dnsTarget = z.discriminatedUnion("kind", [
    z.strictObject({ kind: z.literal("kube-dns") }),
    z.strictObject({ kind: z.literal("node-local"), addresses: z.array(ipv4Address).min(1).default(["169.254.20.10"]) }),
    z.strictObject({ kind: z.literal("selector"), namespace: dnsLabel, podLabels: z.record(z.string(), z.string()) }),
]);

const kubernetesTarget = z.strictObject({
    kind: z.literal("kubernetes"),
    namespacePrefix: dnsLabel.max(40).optional(),
    kubeconfig: z.string().optional(),
    context: z.string().min(1).optional(),
    nodeSelector: z.record(z.string(), z.string()).default({}),
    tolerations: z.array(toleration).default([]),
    gpuResourceName: z.string().default("nvidia.com/gpu"),
    gpuProduct: z.string().optional(),
    priorityClassName: z.string().optional(),
    storageClassName: z.string().optional(),
    kueueQueue: dnsLabel.optional(),
    dns: dnsTarget.default({ kind: "kube-dns" }),
    team: dnsLabel.max(40).optional(),
});

const dockerTarget = z.strictObject({
    kind: z.literal("docker"),
    host: z
        .string()
        .regex(/^(unix|ssh|tcp):\/\/.+/, "must start with unix://, ssh:// or tcp://")
        .default("unix:///var/run/docker.sock"),
    dataDir: z.string().regex(/^\//, "must be an absolute path").default("/srv/agent-rl"),
});

/**
 * TRL 1.16 declares vllm>=0.22,<=0.31 (its METADATA); `vllm/vllm-openai:latest` was 0.33 on
 * 2026-11-30, outside that range. Pin a tag inside it.
 */
// The lock's vLLM (python/requirements-test.txt, trainer/): the trainer's weight-transfer client and the server
// are one version; 0.29 is the newest that co-installs with openenv 0.10 in the trainer image.
export const DEFAULT_VLLM_IMAGE = "vllm/vllm-openai:v0.29.0";

/** OpenEnv's opencode sandbox image (OpenEnv envs/opencode_env/sandbox/hf_image/Dockerfile): enough for the Docker and hosted pools, which exec into it. */
export const STOCK_SANDBOX_IMAGE = "ghcr.io/huggingface/openenv-opencode-sandbox:latest";

const images = z.strictObject({
    vllm: imageRef.optional(),
    trainer: imageRef.optional(),
    nginx: imageRef.default("nginxinc/nginx-unprivileged:1.27-alpine"),
    nginxExporter: imageRef.default("nginx/nginx-prometheus-exporter:1.4.0"),
    mtail: imageRef.optional(),
});

const volume = z.strictObject({
    enabled: z.boolean().default(true),
    size: quantity,
});

const ipv4Cidr = z.string().regex(/^(\d{1,3}\.){3}\d{1,3}\/\d{1,2}$/, "must be an IPv4 CIDR such as 10.0.0.1/32");

const trainerEgress = z.strictObject({
    restrict: z.boolean().default(true),
    apiServerCidrs: z.array(ipv4Cidr).min(1).optional(),
});

/**
 * A secret env var's value: a reference to the stack's secret config key `envSecret-<name>`
 * (`pulumi config set --secret envSecret-<name>`), never the value (docs/design/secrets.md).
 */
const secretRef = z.strictObject({
    secret: z
        .string()
        .regex(
            /^envSecret-[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$/,
            "must name a stack secret key envSecret-<name> (<name>: lower-case letters, digits and '-'), set with pulumi config set --secret envSecret-<name>",
        ),
});
/** Env vars: a plain (non-secret) string, or `{ secret: envSecret-<name> }` for a secret. */
const envVars = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.union([z.string(), secretRef]));

const vllmServer = z.strictObject({
    extraArgs: z.array(z.string()).default([]),
    extraEnv: envVars.default({}),
    toolCallParser: z.string().min(1).optional(),
});

const training = z.strictObject({
    layout: z.enum(LAYOUTS),
    gpusOnNode: posInt,
    nodes: posInt.default(1),
    vllmGpus: nonNegInt.optional(),
    trainerGpus: posInt.optional(),
    numProcesses: posInt.optional(),
    perDeviceTrainBatchSize: posInt.default(8),
    gradientAccumulationSteps: posInt.default(1),
    stepsPerGeneration: posInt.optional(),
    numGenerations: posInt.default(8),
    perDeviceEvalBatchSize: posInt.default(8),
    datasetSize: posInt,
    evalSize: nonNegInt.default(0),
    maxSteps: posInt.optional(),
    program: z.enum([...PROGRAM_NAMES, CUSTOM_PROGRAM]).default(CUSTOM_PROGRAM),
    argsCheck: z.boolean().optional(),
    command: z.array(z.string()).min(1).optional(),
    extraArgs: z.array(z.string()).default([]),
    accelerateConfig: z.string().regex(/^\//, "must be an absolute path inside the trainer image").optional(),
    optim: z
        .string()
        .regex(/^[a-z0-9_]+$/, "must be a transformers optimizer name such as paged_adamw_8bit")
        .optional(),
    gradientCheckpointing: z.boolean().optional(),
    maxCompletionLength: posInt.optional(),
    // The optimisation and sampling knobs (docs/guides/knobs.md): each renders as the program's own flag
    // (components/config/program-settings.ts), and is refused for a program that has none.
    learningRate: z.number().positive().optional(),
    warmupSteps: z
        .number()
        .nonnegative()
        .refine((n) => Number.isInteger(n) || n < 1, "must be a whole number of steps or a fraction of the run below 1, such as 0.1")
        .optional(),
    temperature: z.number().positive().optional(),
    lrSchedulerType: z
        .string()
        .regex(/^[a-z_]+$/, "must be a transformers scheduler name such as linear, cosine or constant_with_warmup")
        .optional(),
    numEpochs: posInt.optional(),
    seed: nonNegInt.optional(),
    maxStaleness: nonNegInt.optional(),
    extraEnv: envVars.default({}),
    gpuSharing: z.enum(GPU_SHARING).optional(),
    ncclCheck: z.boolean().default(false),
    dtype: z.enum(DTYPES).optional(),
    vllm: vllmServer.prefault({}),
    maxModelLen: posInt.optional(),
    gpuMemoryUtilization: z.number().gt(0).lte(1).default(0.9),
    gpuMemory: z
        .strictObject({
            product: z.string().min(1).optional(),
            gib: z.number().positive().optional(),
            enforce: z.boolean().optional(),
            promptTokens: posInt.optional(),
            model: z
                .strictObject({
                    layers: posInt,
                    hidden: posInt,
                    intermediate: posInt,
                    heads: posInt,
                    kvHeads: posInt,
                    headDim: posInt,
                    vocab: posInt,
                    tiedEmbeddings: z.boolean(),
                    maxPositions: posInt,
                })
                .optional(),
        })
        .prefault({}),
    modelLoadSeconds: posInt.min(60).default(1200),
    activeDeadlineSeconds: posInt.default(6 * 3600),
    backoffLimit: nonNegInt.default(0),
    shmSize: quantity.default("16Gi"),
    modelCache: volume.prefault({ size: "200Gi" }),
    checkpoints: volume
        .extend({
            keepLast: posInt.optional(),
            parameters: z.number().positive().optional(),
            dtype: z.enum(WEIGHT_DTYPES).optional(),
        })
        .prefault({ size: "100Gi" }),
    resumeFromCheckpoint: z
        .union([z.boolean(), z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\/checkpoint-[0-9]+)?$/, "must be a run id or <runId>/checkpoint-<step>")])
        .default(false),
    hubRepoId: z
        .string()
        .regex(/^[\w.-]+\/[\w.-]+$/, "must be <owner>/<name>")
        .optional(),
    trackioProject: z.string().optional(),
    trackioSpaceId: z.string().optional(),
    maxInflight: posInt.default(8),
    egress: trainerEgress.prefault({}),
    trainerCpu: quantity.default("8"),
    trainerMemory: quantity.default("64Gi"),
    vllmCpu: quantity.default("8"),
    vllmMemory: quantity.default("64Gi"),
});

const resources = z.strictObject({
    cpu: quantity.default("2"),
    memory: quantity.default("4Gi"),
});

const envServer = z.strictObject({
    catalog: z.enum([...CATALOG_NAMES, "custom"]),
    image: imageRef.optional(),
    concurrentSessions: z.boolean().optional(),
    sessionsPerReplica: posInt.optional(),
    replicas: posInt.optional(),
    headroomReplicas: nonNegInt.default(1),
    settings: z
        .record(
            z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/),
            z.union(
                [
                    z.string(),
                    z.strictObject({
                        secretKeyRef: z.strictObject({
                            name: z.string().regex(DNS_SUBDOMAIN, "must be a Kubernetes Secret name (lower-case DNS subdomain)"),
                            key: z.string().regex(/^[-._a-zA-Z0-9]{1,253}$/, "must be a key of the Secret (letters, digits, '-', '_', '.')"),
                        }),
                    }),
                ],
                {
                    error: "must be a string, or { secretKeyRef: { name, key } }: a key of an existing Kubernetes Secret in the env's namespace (env settings take no stack secret reference)",
                },
            ),
        )
        .default({}),
    resources: resources.prefault({}),
    terminationGraceSeconds: posInt.default(300),
    egress: z.enum(["dns", "internet"]).optional(),
    readOnlyRootFilesystem: z.boolean().optional(),
    scratchSize: quantity.default("1Gi"),
    wsPing: z.strictObject({ intervalSeconds: posInt, timeoutSeconds: posInt }).optional(),
    runAsNonRoot: z.boolean().optional(),
    ephemeralStorage: quantity.default("8Gi"),
    runtimeClassName: dnsLabel.optional(),
    external: z
        .strictObject({
            url: z.url({ protocol: /^https?$/, error: "must be an http(s) URL such as https://org-wordle.hf.space" }),
            sessions: posInt,
        })
        .optional(),
});

const sandboxes = z.strictObject({
    provider: z.enum(SANDBOX_PROVIDER_NAMES).optional(),
    image: imageRef.optional(),
    cpu: quantity.default("1"),
    memory: quantity.default("2Gi"),
    runtimeClassName: z.string().optional(),
    runAsUser: z.number().int().min(1000).max(2147483647).default(65532),
    headroom: nonNegInt.default(2),
    poolSize: posInt.optional(),
    rolloutSeconds: posInt.default(35),
    refillSeconds: posInt.default(10),
    autoscale: z
        .strictObject({
            enabled: z.boolean().default(false),
            maxPoolSize: posInt.optional(),
        })
        .prefault({}),
    maxLifetimeSeconds: posInt.default(3600),
    maxWarmWaitSeconds: posInt.default(6 * 3600),
    // The forwarder's per-rollout bounds (python/agent_rl_sandbox/forwarder.py DEFAULT_MAX_CALLS, DEFAULT_MAX_ROLLOUT_TOKENS).
    maxCallsPerRollout: posInt.default(256),
    maxTokensPerRollout: posInt.default(1048576),
    priorityClassName: z.string().optional(),
});

// Shapes only here; harbor.ts checks the list.
const harbor = z.strictObject({
    agent: z.enum(HARBOR_AGENTS, {
        error: (issue) =>
            `${JSON.stringify(issue.input)} is not an agent the trial code runs (python/agent_rl_sandbox/harbor_trial.py AGENTS, each pre-installed in the task image): set it to one of ${HARBOR_AGENTS.join(", ")}`,
    }),
    taskImages: z
        .array(
            z.strictObject({
                image: z.string().min(1),
                name: dnsLabel.max(30).optional(),
            }),
        )
        .default([]),
});

const ingress = z.strictObject({
    enabled: z.boolean().optional(),
    keys: z.array(dnsLabel.max(30)).min(1).default(["sandboxes", "operators"]),
    sandboxKey: dnsLabel.default("sandboxes"),
    allowCompletions: z.boolean().default(false),
    healthUnauthenticated: z.boolean().default(false),
    exposure: z.enum(["cluster", "loadbalancer", "httproute"]).default("cluster"),
    host: z.string().regex(DNS_SUBDOMAIN, "must be a DNS host name such as vllm.example.com (no scheme, no port)").optional(),
    tls: z
        .strictObject({
            mode: z.enum(["secret", "cert-manager", "files", "none"]).default("none"),
            secretName: z.string().regex(DNS_SUBDOMAIN, "must be a Kubernetes Secret name (lower-case DNS subdomain)").optional(),
            issuer: z
                .strictObject({
                    name: z.string().regex(DNS_SUBDOMAIN, "must be a Kubernetes object name"),
                    kind: z.enum(["Issuer", "ClusterIssuer"]).default("ClusterIssuer"),
                    group: z.string().default("cert-manager.io"),
                })
                .optional(),
            certFile: z.string().regex(/^\//, "must be an absolute path on the Docker host").optional(),
            keyFile: z.string().regex(/^\//, "must be an absolute path on the Docker host").optional(),
            publiclyTrusted: z.boolean().default(false),
        })
        .prefault({}),
    gateway: z.strictObject({ name: z.string(), namespace: z.string(), sectionName: z.string().optional() }).optional(),
    replicas: posInt.default(2),
    maxBodySize: z
        .string()
        .regex(/^[0-9]+[kKmM]?$/, "must be an nginx size such as 4m")
        .default(INGRESS_LIMIT_DEFAULTS.maxBodySize),
    rateLimitPerSecond: posInt.default(INGRESS_LIMIT_DEFAULTS.rateLimitPerSecond),
    rateLimitBurst: nonNegInt.default(INGRESS_LIMIT_DEFAULTS.rateLimitBurst),
    readTimeoutSeconds: posInt.default(INGRESS_LIMIT_DEFAULTS.readTimeoutSeconds),
});

/** A Prometheus duration: a number and one unit (s, m, h), e.g. 30s, 5m, 2h. */
const promDuration = z.string().regex(/^[1-9][0-9]*(s|m|h)$/, "must be a Prometheus duration such as 30s, 5m or 2h (one number, one unit: s, m, h)");
const fraction = z.number().gt(0).lte(1);
const labelMap = z.record(
    z.string().regex(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, "must be a Kubernetes label key"),
    z.string().max(63),
);

const observability = z.strictObject({
    enabled: z.boolean().default(false),
    form: z.enum(["operator", "annotations"]).default("operator"),
    scraper: z
        .strictObject({
            namespace: dnsLabel.default("monitoring"),
            podLabels: labelMap.default({ "app.kubernetes.io/name": "prometheus" }),
        })
        .prefault({}),
    monitorLabels: labelMap.default({}),
    dashboardLabels: labelMap.default({ grafana_dashboard: "1" }),
    scrapeInterval: promDuration.default("30s"),
    hostPortBase: z.number().int().min(1024).max(65535).default(19400),
    alerts: z
        .strictObject({
            for: promDuration.default("5m"),
            envSessionsFraction: fraction.default(0.9),
            ingressUnauthorizedPerSecond: z.number().positive().default(1),
            ingressRateLimitedPerSecond: z.number().positive().default(1),
            vllmKvCacheUsage: fraction.default(0.9),
            vllmQueueGrowingFor: promDuration.default("10m"),
            trainerStalledFor: promDuration.default("15m"),
            sandboxClaimLatencySeconds: z.number().positive().default(30),
            warmPoolRefillFor: promDuration.default("1m"),
        })
        .prefault({}),
});

export const platformSchema = z.strictObject({
    recipe: z.string().optional(),
    runId: dnsLabel.max(24),
    clusterStack: z
        .string()
        .regex(/^[\w.-]+\/[\w.-]+\/[\w.-]+$/, "must be <org>/<project>/<stack>, e.g. organization/agent-rl-infra/cluster")
        .optional(),
    prod: z.boolean().optional(),
    preflight: z.enum(["off", "warn", "enforce"]).default("off"),
    target: z.discriminatedUnion("kind", [kubernetesTarget, dockerTarget]),
    model: z.strictObject({
        name: z.string().regex(/^[\w.-]+\/[\w.-]+$/, "must be <owner>/<name> such as Qwen/Qwen3-1.7B"),
        revision: z.string().min(1).default("main"),
    }),
    images: images.prefault({}),
    training: training,
    envs: z.record(dnsLabel.max(20), envServer).default({}),
    sandboxes: sandboxes.prefault({}),
    harbor: harbor.optional(),
    ingress: ingress.prefault({}),
    observability: observability.prefault({}),
});

/** The config as written (before defaults). */
export type PlatformConfigInput = z.input<typeof platformSchema>;
/** The config after zod parsing. */
export type ParsedConfig = z.output<typeof platformSchema>;
