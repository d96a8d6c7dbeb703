/**
 * The one schema of a stack's configuration (`agent-rl-infra:platform`), parsed once at the
 * edge with zod, fully defaulted, and handed down as plain typed data.
 *
 * Secrets are NOT here: they are separate config keys read with `requireSecret`/`getSecret`
 * (see load.ts), because reading them as plain objects would drop the secret marking.
 * Defaults that depend on other fields (e.g. vLLM GPUs by layout) are applied in
 * `resolveDefaults` (resolve.ts), once, after parsing.
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

/** Where the stack's locked-down pods send DNS queries (their NetworkPolicies allow exactly this on 53 UDP+TCP). */
const dnsTarget = z.discriminatedUnion("kind", [
    /** The kube-dns / CoreDNS pods in kube-system (label k8s-app: kube-dns). */
    z.strictObject({ kind: z.literal("kube-dns") }),
    /**
     * NodeLocal DNSCache: a DNS cache on every node listening on a link-local address (169.254.20.10
     * by default, Kubernetes' nodelocaldns addon), plus the kube-dns pods it forwards to and pods fall
     * back to. `addresses`: every address pods send queries to (add the kube-dns Service IP where the
     * cache also listens there, kube-proxy iptables mode), each allowed as a /32.
     */
    z.strictObject({ kind: z.literal("node-local"), addresses: z.array(ipv4Address).min(1).default(["169.254.20.10"]) }),
    /** DNS pods of your own (another DNS provider): the namespace and the pod labels. */
    z.strictObject({ kind: z.literal("selector"), namespace: dnsLabel, podLabels: z.record(z.string(), z.string()) }),
]);

const kubernetesTarget = z.strictObject({
    kind: z.literal("kubernetes"),
    /** Prefix of the per-role namespaces (`<prefix>-training`, ...). Default: `arl-<stack>`. */
    namespacePrefix: dnsLabel.max(40).optional(),
    /** Path to a kubeconfig file for the provider; default: the ambient kubeconfig. */
    kubeconfig: z.string().optional(),
    /**
     * kubeconfig context for the provider. Required (or `kubeconfig`) on every stack but `dev` /
     * `dev-*`, so staging and prod never deploy to whatever cluster kubectl points at.
     */
    context: z.string().min(1).optional(),
    /** nodeSelector for the GPU training pod. */
    nodeSelector: z.record(z.string(), z.string()).default({}),
    /** Tolerations for the GPU training pod. */
    tolerations: z.array(toleration).default([]),
    /** Extended resource name of the GPU device plugin. */
    gpuResourceName: z.string().default("nvidia.com/gpu"),
    /** Value of the `nvidia.com/gpu.product` node label to pin the GPU model (e.g. NVIDIA-H200). */
    gpuProduct: z.string().optional(),
    /** PriorityClass of the training pod. */
    priorityClassName: z.string().optional(),
    /** StorageClass of the model-cache and checkpoint volumes; default: the cluster default. */
    storageClassName: z.string().optional(),
    /**
     * Kueue LocalQueue (in the training namespace) the trainer is submitted to: the Job / JobSet
     * carries `kueue.x-k8s.io/queue-name` and is created suspended; Kueue admits it against the
     * queue's quota. Default: no queue (the trainer starts at once).
     */
    kueueQueue: dnsLabel.optional(),
    /**
     * Where pods send DNS queries: `{kind: kube-dns}` (the kube-dns pods), `{kind: node-local}`
     * (NodeLocal DNSCache, GKE Autopilot's default), or `{kind: selector, namespace, podLabels}`.
     * The preflight checks it against the cluster. Default: kube-dns.
     */
    dns: dnsTarget.default({ kind: "kube-dns" }),
    /**
     * The team (of the cluster stack, `clusterStack`) whose namespaces the run deploys into
     * (`<team>-training`, `-ingress`, `-envs`, `-sandboxes`): the stack then makes no namespace and
     * nothing cluster-wide, its objects' names carry the stack prefix (a team's namespaces hold several
     * run stacks), and the team's quotas and claim-lifetime bound apply. Default: none (the stack makes
     * its own namespaces, `namespacePrefix`).
     */
    team: dnsLabel.max(40).optional(),
});

const dockerTarget = z.strictObject({
    kind: z.literal("docker"),
    /** Docker daemon address of the GPU host (`unix:///var/run/docker.sock` or `ssh://user@host`). */
    host: z
        .string()
        .regex(/^(unix|ssh|tcp):\/\/.+/, "must start with unix://, ssh:// or tcp://")
        .default("unix:///var/run/docker.sock"),
    /** Directory on the host holding model cache, checkpoints, TLS files and secret files. */
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
    /**
     * vLLM OpenAI server image (black box `vllm serve`, vllm >= 0.22). Deployed only where vLLM runs
     * in its own container: black box on Docker, or on Kubernetes with gpuSharing `isolated`.
     * Default: DEFAULT_VLLM_IMAGE.
     */
    vllm: imageRef.optional(),
    /**
     * Trainer image: TRL 1.16 and your training script (`training.command`), plus vLLM where the
     * layout runs it from this image. Required: no public image holds your script (a default one
     * would start, find nothing to run and exit at once while `up` reported success).
     */
    trainer: imageRef.optional(),
    /** nginx image for the ingress proxy and the env routers (unprivileged build). */
    nginx: imageRef.default("nginxinc/nginx-unprivileged:1.27-alpine"),
    /**
     * nginx-prometheus-exporter beside each ingress proxy, reading its stub_status on loopback
     * (observability.enabled; its image runs as uid 1001, from scratch). Default: nginx/nginx-prometheus-exporter:1.4.0.
     */
    nginxExporter: imageRef.default("nginx/nginx-prometheus-exporter:1.4.0"),
    /**
     * mtail beside each ingress proxy, turning its JSON access log into per-status and per-key series
     * (observability.enabled with the ingress). Required then: google/mtail publishes binaries, no image.
     */
    mtail: imageRef.optional(),
});

const volume = z.strictObject({
    /** Whether to create the volume. */
    enabled: z.boolean().default(true),
    /** Requested size. */
    size: quantity,
});

const ipv4Cidr = z.string().regex(/^(\d{1,3}\.){3}\d{1,3}\/\d{1,2}$/, "must be an IPv4 CIDR such as 10.0.0.1/32");

const trainerEgress = z.strictObject({
    /**
     * Lock the trainer pod's egress down to what it needs (Kubernetes): cluster DNS, the env
     * routers, the ingress and the sandboxes of this stack, the API server (black box on
     * agent-sandbox), and public addresses on 443 (the Hub). false: no egress policy at all, the
     * switch for clusters where these rules cannot be written.
     */
    restrict: z.boolean().default(true),
    /**
     * The API server's addresses (`kubectl get endpoints kubernetes -o jsonpath='{.subsets[*].addresses[*].ip}'`,
     * each as /32). Unset: the trainer may reach ports 443 and 6443 on any private address, wherever the
     * API server is.
     */
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

/** The vLLM server's own settings, where one runs (layouts whitebox-server and blackbox). */
const vllmServer = z.strictObject({
    /**
     * Extra `vllm serve` flags (e.g. `--enable-prefix-caching`, `--max-num-seqs 64`, LoRA flags), appended
     * after the platform's. Flags the platform renders or the weight sync needs are refused
     * (components/config/vllm-settings.ts RESERVED_VLLM_FLAGS).
     */
    extraArgs: z.array(z.string()).default([]),
    /** Extra env vars of the vLLM server (reserved names and NCCL_* refused: NCCL_* go in training.extraEnv); a secret only as `{ secret: envSecret-<name> }`. */
    extraEnv: envVars.default({}),
    /**
     * vLLM's `--tool-call-parser` (black box): the agent's tool calls are parsed by vLLM, per model family.
     * Default: hermes for Qwen models, qwen3_coder for Qwen3-Coder; required for other models.
     */
    toolCallParser: z.string().min(1).optional(),
});

const training = z.strictObject({
    /** Which of the three layouts runs on the node. */
    layout: z.enum(LAYOUTS),
    /** GPUs on the training node (with nodes > 1: on each GPU node, trainer and vLLM nodes alike). */
    gpusOnNode: posInt,
    /**
     * Trainer nodes. 1: vLLM and the trainer share one node (every layout). More than 1 (layouts
     * whitebox-server and blackbox, Kubernetes only): the trainer runs as a JobSet, one pod per node,
     * and vLLM runs on a node of its own.
     */
    nodes: posInt.default(1),
    /** GPUs for vLLM (0 in colocate: vLLM runs inside the trainer). Default: 0 colocate, 1 on one node, gpusOnNode with nodes > 1. */
    vllmGpus: nonNegInt.optional(),
    /** GPUs for the trainer (with nodes > 1: on each trainer node). Default: the rest of the node (nodes > 1: gpusOnNode). */
    trainerGpus: posInt.optional(),
    /** Trainer processes (with nodes > 1: on each trainer node). Default: trainerGpus. */
    numProcesses: posInt.optional(),
    /** TRL per_device_train_batch_size. */
    perDeviceTrainBatchSize: posInt.default(8),
    /** TRL gradient_accumulation_steps. */
    gradientAccumulationSteps: posInt.default(1),
    /** TRL steps_per_generation. Default: gradientAccumulationSteps (TRL's own default). */
    stepsPerGeneration: posInt.optional(),
    /** TRL num_generations (completions per prompt). */
    numGenerations: posInt.default(8),
    /** TRL per_device_eval_batch_size. */
    perDeviceEvalBatchSize: posInt.default(8),
    /** Training problems/prompts: required, never defaulted (the seeds' scripts differ). */
    datasetSize: posInt,
    /** Held-out eval problems; 0 disables eval. */
    evalSize: nonNegInt.default(0),
    /** Training steps; default: the script's own. Refused for a program with no step flag. */
    maxSteps: posInt.optional(),
    /**
     * The training program the trainer image runs, whose own command line the platform renders
     * (components/config/programs.ts: its flags, file and source): `train_coding_whitebox_eval`,
     * `train_coding_whitebox`, `train_wordle_whitebox` (the seeds' white-box scripts),
     * `opencode_hf_sandbox` (TRL's black-box opencode trainer), or `custom`: your own script in
     * `training.command`, given the TrlParser flag contract (docs/reference/training-node.md "The trainer program").
     * Default: custom.
     */
    program: z.enum([...PROGRAM_NAMES, CUSTOM_PROGRAM]).default(CUSTOM_PROGRAM),
    /**
     * Run the program's own argument parser over the rendered command line at pod start, before the
     * model loads (`/opt/agentrl/args_check.py`, which trainer/*\/Dockerfile puts in the image): a
     * flag the program does not take fails the pod in seconds with the parser's message. Default:
     * true for a named program, false for custom (your image may not carry the check).
     */
    argsCheck: z.boolean().optional(),
    /** Command that starts your script inside the trainer image (program custom only; a named program brings its own). */
    command: z.array(z.string()).min(1).optional(),
    /** Extra arguments appended to the trainer command (a named program's own flags only, none the platform renders). */
    extraArgs: z.array(z.string()).default([]),
    /**
     * accelerate config file inside the trainer image (`accelerate launch --config_file`), e.g. the FSDP2
     * config trainer/blackbox/Dockerfile puts at /app/fsdp2.yaml; a named program with more than one
     * trainer process only.
     */
    accelerateConfig: z.string().regex(/^\//, "must be an absolute path inside the trainer image").optional(),
    /** Optimizer (`--optim`, a transformers OptimizerNames value, e.g. paged_adamw_8bit); default: the program's. */
    optim: z
        .string()
        .regex(/^[a-z0-9_]+$/, "must be a transformers optimizer name such as paged_adamw_8bit")
        .optional(),
    /** Gradient checkpointing (`--gradient-checkpointing`); default: the program's. */
    gradientCheckpointing: z.boolean().optional(),
    /** Longest completion in tokens (`--max-completion-length`); default: the program's. */
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
    /** Extra env vars for the trainer; a secret only as `{ secret: envSecret-<name> }`. */
    extraEnv: envVars.default({}),
    /**
     * How vLLM and the trainer share the node's GPUs, which decides the NCCL transport of the
     * weight update (layouts with a separate vLLM only). `shared`: each role's process sees every
     * training GPU and is held to its own set by CUDA_VISIBLE_DEVICES, so NCCL uses P2P (NVLink)
     * (Docker: both containers get the devices; Kubernetes: one container with every GPU, a small
     * supervisor starts vLLM, then the trainer). `isolated`: each container sees only its own GPUs;
     * NCCL goes over the pod's shared memory (NCCL_P2P_DISABLE=1, NCCL_CUMEM_ENABLE=0), about 7x
     * slower. Default: shared.
     */
    gpuSharing: z.enum(GPU_SHARING).optional(),
    /**
     * Run the NCCL weight-sync check (a 1 GiB broadcast between the two roles' GPUs with the
     * rendered NCCL settings) before vLLM loads, so a broken setup fails in seconds. Needs
     * gpuSharing `shared` (both roles' GPUs visible to one process tree).
     */
    ncclCheck: z.boolean().default(false),
    /**
     * Black box: the one dtype of the trainer and vLLM (AsyncGRPOConfig `--dtype` for a custom script,
     * `vllm serve --dtype`): TRL 1.16's AsyncGRPO trains in float32 by default and asks for vLLM in the
     * same dtype. Default: the program's (float32). Refused in the white-box layouts.
     */
    dtype: z.enum(DTYPES).optional(),
    /** The vLLM server's extra flags, env and tool-call parser (refused in whitebox-colocate: no server). */
    vllm: vllmServer.prefault({}),
    /** Max model length for vLLM (--max-model-len). */
    maxModelLen: posInt.optional(),
    /** vLLM --gpu-memory-utilization. */
    gpuMemoryUtilization: z.number().gt(0).lte(1).default(0.9),
    /**
     * The GPU memory check (components/config/gpu-memory.ts, docs/design/gpu-memory.md): each role's
     * estimated peak per GPU against the GPU's memory, refused before deploy when it cannot fit.
     */
    gpuMemory: z
        .strictObject({
            /**
             * The GPU the run is sized for, as its `nvidia.com/gpu.product` label (e.g. NVIDIA-H200,
             * NVIDIA-A100-SXM4-80GB). Default: target.gpuProduct (Kubernetes). Its memory comes from
             * the table in components/config/gpu-products.ts.
             */
            product: z.string().min(1).optional(),
            /** Usable memory of one GPU in GiB (what torch reports as total), for a product the table lacks; wins over product. */
            gib: z.number().positive().optional(),
            /**
             * false: an estimate above the GPU's memory is a warning in plan.md instead of a refusal
             * (for a setup the estimate does not know, e.g. CPU offload). Default: true.
             */
            enforce: z.boolean().optional(),
            /** Prompt tokens per sequence, added to the completion length for the trainer's activations. Default: the program's. */
            promptTokens: posInt.optional(),
            /** A model the table does not know: the numbers of its config.json. */
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
                    /** max_position_embeddings: vLLM's max model length when training.maxModelLen is unset. */
                    maxPositions: posInt,
                })
                .optional(),
        })
        .prefault({}),
    /** Seconds vLLM may take to load the model before its startup probe gives up. */
    modelLoadSeconds: posInt.min(60).default(1200),
    /** Hard limit on the whole run (Job activeDeadlineSeconds). */
    activeDeadlineSeconds: posInt.default(6 * 3600),
    /** Retries of a failed run (Job backoffLimit). */
    backoffLimit: nonNegInt.default(0),
    /** Size of the memory-backed /dev/shm. */
    shmSize: quantity.default("16Gi"),
    /** Model cache volume, so weights are not downloaded every run. */
    modelCache: volume.prefault({ size: "200Gi" }),
    /**
     * Checkpoint/output volume, shared by the stack's runs (each writes `/checkpoints/<runId>`); the
     * check refuses a size below what one run writes (components/config/checkpoints.ts).
     */
    checkpoints: volume
        .extend({
            /** Checkpoints a custom script keeps (`--save_total_limit`). Default: 2. Refused for a named program (no flag). */
            keepLast: posInt.optional(),
            /** The model's parameter count, for the size check. Default: known for the recipes' models (Qwen3 1.7B/4B/8B/32B). */
            parameters: z.number().positive().optional(),
            /** The dtype the trainer holds its weights in, for the size check. Default: the program's (custom: float32). */
            dtype: z.enum(WEIGHT_DTYPES).optional(),
        })
        .prefault({ size: "100Gi" }),
    /**
     * Resume (a custom script: `--resume_from_checkpoint`): false; true, this run's latest complete
     * checkpoint (a restarted run); `<runId>`, that run's latest complete one (a new run continuing a
     * failed one); `<runId>/checkpoint-<step>`, exactly that one. A restarted run prefers its own
     * latest complete checkpoint. Refused for a program that cannot resume.
     */
    resumeFromCheckpoint: z
        .union([z.boolean(), z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\/checkpoint-[0-9]+)?$/, "must be a run id or <runId>/checkpoint-<step>")])
        .default(false),
    /** Push the trained model to the Hub under this repo id (needs the hfToken secret). */
    hubRepoId: z
        .string()
        .regex(/^[\w.-]+\/[\w.-]+$/, "must be <owner>/<name>")
        .optional(),
    /** trackio project for metrics. */
    trackioProject: z.string().optional(),
    /** trackio Space id to sync metrics to. */
    trackioSpaceId: z.string().optional(),
    /** Rollouts in flight at once (black box `--max-inflight`). */
    maxInflight: posInt.default(8),
    /** Egress of the trainer pod (Kubernetes). */
    egress: trainerEgress.prefault({}),
    /** CPU request = limit of the trainer container. */
    trainerCpu: quantity.default("8"),
    /** Memory request = limit of the trainer container. */
    trainerMemory: quantity.default("64Gi"),
    /** CPU request = limit of the vLLM container. */
    vllmCpu: quantity.default("8"),
    /** Memory request = limit of the vLLM container. */
    vllmMemory: quantity.default("64Gi"),
});

const resources = z.strictObject({
    /** CPU request = limit per replica. */
    cpu: quantity.default("2"),
    /** Memory request = limit per replica. */
    memory: quantity.default("4Gi"),
});

const envServer = z.strictObject({
    /** Catalog entry (`coding`, `textarena`, ...) or `custom` for any OpenEnv-contract image. */
    catalog: z.enum([...CATALOG_NAMES, "custom"]),
    /** Image override (required for custom); pin by digest. */
    image: imageRef.optional(),
    /** Custom env only: whether the server holds several sessions per process. */
    concurrentSessions: z.boolean().optional(),
    /** Sessions per replica (MAX_CONCURRENT_ENVS). Default: the catalog's. */
    sessionsPerReplica: posInt.optional(),
    /** Replicas. Default: enough for the demand plus `headroomReplicas`. */
    replicas: posInt.optional(),
    /** Spare replicas beyond the demand, so a node drain keeps capacity. */
    headroomReplicas: nonNegInt.default(1),
    /**
     * The env's own settings (e.g. TEXTARENA_ENV_ID), as env vars: plain text, or (Kubernetes) a
     * reference to a key of an existing Secret in the env's namespace, `{ secretKeyRef: { name, key } }`,
     * the only way a secret reaches an env (the value never enters the stack, the plan or the manifest).
     */
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
    /** CPU/memory per replica. */
    resources: resources.prefault({}),
    /** Seconds open websocket sessions get to finish when a replica stops. */
    terminationGraceSeconds: posInt.default(300),
    /** What replicas may reach: `dns` only, or DNS + public `internet` addresses (never private ranges or the metadata service). Default: the catalog's (custom: dns). */
    egress: z.enum(["dns", "internet"]).optional(),
    /** Read-only root filesystem (scratch on a sized emptyDir at /tmp). Default: true for envs that run model-written code (coding), else false. */
    readOnlyRootFilesystem: z.boolean().optional(),
    /** Size of the /tmp scratch dir of a read-only replica. */
    scratchSize: quantity.default("1Gi"),
    /**
     * The replicas' server-side websocket keepalive, rendered as UVICORN_WS_PING_INTERVAL /
     * UVICORN_WS_PING_TIMEOUT (the uvicorn CLI reads them; a custom image must run the uvicorn CLI
     * or honour them itself). A client that stops answering pings for intervalSeconds +
     * timeoutSeconds loses its session, which frees a half-open client's slot (the catalog's
     * images have no idle reaper). Default: 60 / 300 with layout whitebox-colocate (vLLM in the
     * trainer process starves the client's event loop, so pongs come late), else uvicorn's 20 / 20.
     */
    wsPing: z.strictObject({ intervalSeconds: posInt, timeoutSeconds: posInt }).optional(),
    /**
     * Run the replicas as uid/gid 65532 instead of the image's user (the OpenEnv images have no USER:
     * root): implies a read-only root filesystem unless set otherwise, and HOME at the /tmp scratch
     * dir (caches, NLTK data). Default: true for envs that run model-written code (coding), else
     * false. `false` on such an env is the explicit opt-out: it runs as root, and the plan warns
     * what contains it (docs/design/env-hardening.md).
     */
    runAsNonRoot: z.boolean().optional(),
    /** Ephemeral storage (writable layer, logs, scratch) request = limit per replica. */
    ephemeralStorage: quantity.default("8Gi"),
    /** RuntimeClass of the replicas (e.g. gvisor) on Kubernetes; it must exist on the cluster. */
    runtimeClassName: dnsLabel.optional(),
    /** Use an existing server instead of deploying one (e.g. a hosted Space). */
    external: z
        .strictObject({
            /** Base URL of the env server (https:// for anything outside the cluster). */
            url: z.url({ protocol: /^https?$/, error: "must be an http(s) URL such as https://org-wordle.hf.space" }),
            /** Sessions the external server holds at once. */
            sessions: posInt,
        })
        .optional(),
});

const sandboxes = z.strictObject({
    /** Where black-box sandboxes run: agent-sandbox (Kubernetes), none; docker (fixed pool) and hf (hosted) are refused for the black box (validate.ts says why). Default: by target and layout. */
    provider: z.enum(SANDBOX_PROVIDER_NAMES).optional(),
    /**
     * Sandbox image; pin by digest. agent-sandbox: required, the image python/Dockerfile builds (the
     * stock OpenEnv opencode sandbox + the runtime on 8888). docker / hf: default STOCK_SANDBOX_IMAGE.
     */
    image: imageRef.optional(),
    /** CPU request = limit per sandbox. */
    cpu: quantity.default("1"),
    /** Memory request = limit per sandbox. */
    memory: quantity.default("2Gi"),
    /** RuntimeClass for stronger isolation (gVisor `gvisor`, Kata `kata`). */
    runtimeClassName: z.string().optional(),
    /** uid (and gid) sandboxes run as: a high, unused one (65532, distroless's `nonroot`), not the well-known 1000 a host user may have. */
    runAsUser: z.number().int().min(1000).max(2147483647).default(65532),
    /** Warm sandboxes kept ready beyond the rollouts in flight. */
    headroom: nonNegInt.default(2),
    /** Warm pool size (or Docker pool size). Default: the run's burst (maxInflight x rollout workers, pool-size.ts) + headroom. */
    poolSize: posInt.optional(),
    /** Hard maximum lifetime of a claimed sandbox, in seconds. */
    maxLifetimeSeconds: posInt.default(3600),
    /** Longest a warm sandbox may wait unclaimed, in seconds (adds to its pod deadline). */
    maxWarmWaitSeconds: posInt.default(6 * 3600),
    /** PriorityClass of the sandbox pods (below the training pod's). Default: the cluster stack's, else none. */
    priorityClassName: z.string().optional(),
    /** Hosted sandboxes only: the hardware flavor. */
    hfFlavor: z.string().default("cpu-basic"),
});

/**
 * The Harbor path: a Harbor agent trained black box on Harbor tasks, each trial a claim of the warm
 * pool of its task's image (docs/guides/harbor.md). Shapes only here; harbor.ts checks the list.
 */
const harbor = z.strictObject({
    /** The Harbor agent the run trains: a harness openenv 0.10 rates validated (openenv/harbor/seams.py). */
    agent: z.enum(HARBOR_AGENTS),
    /** The images of the Harbor tasks the run trains on: one SandboxTemplate + SandboxWarmPool each. */
    taskImages: z
        .array(
            z.strictObject({
                /** A task's image (`[environment].docker_image` of its task.toml), with the pool's runtime and forwarder in it; pin by digest. */
                image: z.string().min(1),
                /** Names its pool's objects. Default: the image's repository name and a hash of the image. */
                name: dnsLabel.max(30).optional(),
            }),
        )
        .default([]),
});

const ingress = z.strictObject({
    /** Deploy the authenticated vLLM ingress. Default: on for black box, off for white box. */
    enabled: z.boolean().optional(),
    /** Names of the bearer keys; each generated unless supplied as secret `ingressKey-<name>`. */
    keys: z.array(dnsLabel.max(30)).min(1).default(["sandboxes", "operators"]),
    /** Which key the sandboxes use (handed to the trainer). */
    sandboxKey: dnsLabel.default("sandboxes"),
    /** Also allow POST /v1/completions. */
    allowCompletions: z.boolean().default(false),
    /** Allow GET /health without a key (for load balancers). */
    healthUnauthenticated: z.boolean().default(false),
    /** How the proxy is reached: in-cluster ClusterIP only, a LoadBalancer Service, or a Gateway API HTTPRoute. */
    exposure: z.enum(["cluster", "loadbalancer", "httproute"]).default("cluster"),
    /** Public host name for external exposure (certificate subject). */
    host: z.string().regex(DNS_SUBDOMAIN, "must be a DNS host name such as vllm.example.com (no scheme, no port)").optional(),
    /**
     * TLS: `secret` (a Kubernetes TLS Secret you provide), `cert-manager` (the stack requests a
     * cert-manager Certificate from `issuer` for the proxy's names), `files` (Docker host files),
     * `none` (plain HTTP, in-cluster only).
     */
    tls: z
        .strictObject({
            /** Where the certificate comes from. */
            mode: z.enum(["secret", "cert-manager", "files", "none"]).default("none"),
            /** Kubernetes TLS Secret name in the ingress namespace (mode secret: required; cert-manager: where the Certificate writes, default `vllm-ingress-tls`). */
            secretName: z.string().regex(DNS_SUBDOMAIN, "must be a Kubernetes Secret name (lower-case DNS subdomain)").optional(),
            /** cert-manager (mode cert-manager): the Issuer (in the ingress namespace) or ClusterIssuer that signs the certificate. */
            issuer: z
                .strictObject({
                    /** Issuer / ClusterIssuer name. */
                    name: z.string().regex(DNS_SUBDOMAIN, "must be a Kubernetes object name"),
                    /** `Issuer` (namespaced, in the ingress namespace) or `ClusterIssuer`. */
                    kind: z.enum(["Issuer", "ClusterIssuer"]).default("ClusterIssuer"),
                    /** API group of the issuer (external issuers have their own). */
                    group: z.string().default("cert-manager.io"),
                })
                .optional(),
            /** Docker: certificate file on the host. */
            certFile: z.string().regex(/^\//, "must be an absolute path on the Docker host").optional(),
            /** Docker: key file on the host. */
            keyFile: z.string().regex(/^\//, "must be an absolute path on the Docker host").optional(),
            /** The certificate is publicly trusted (required for hosted sandboxes). */
            publiclyTrusted: z.boolean().default(false),
        })
        .prefault({}),
    /** Gateway API parent for exposure `httproute`. */
    gateway: z.strictObject({ name: z.string(), namespace: z.string(), sectionName: z.string().optional() }).optional(),
    /** Proxy replicas (Kubernetes). */
    replicas: posInt.default(2),
    /** Largest request body accepted (nginx size). */
    maxBodySize: z
        .string()
        .regex(/^[0-9]+[kKmM]?$/, "must be an nginx size such as 4m")
        .default(INGRESS_LIMIT_DEFAULTS.maxBodySize),
    /** Requests per second allowed per key, per proxy replica. */
    rateLimitPerSecond: posInt.default(INGRESS_LIMIT_DEFAULTS.rateLimitPerSecond),
    /** Burst above the rate per key. */
    rateLimitBurst: nonNegInt.default(INGRESS_LIMIT_DEFAULTS.rateLimitBurst),
    /** Seconds nginx waits for vLLM's response (long generations). */
    readTimeoutSeconds: posInt.default(INGRESS_LIMIT_DEFAULTS.readTimeoutSeconds),
});

/** A Prometheus duration: a number and one unit (s, m, h), e.g. 30s, 5m, 2h. */
const promDuration = z.string().regex(/^[1-9][0-9]*(s|m|h)$/, "must be a Prometheus duration such as 30s, 5m or 2h (one number, one unit: s, m, h)");
const fraction = z.number().gt(0).lte(1);
const labelMap = z.record(
    z.string().regex(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, "must be a Kubernetes label key"),
    z.string().max(63),
);

/**
 * Metrics, alerts and dashboards (components/observability/, docs/guides/observability.md). Off by
 * default. Every threshold below is an alert's condition; each has its default stated.
 */
const observability = z.strictObject({
    /** Scrape targets, monitors, rules and dashboards for every part the stack runs. Default: false. */
    enabled: z.boolean().default(false),
    /**
     * `operator`: Prometheus Operator objects (PodMonitor, PrometheusRule; monitoring.coreos.com/v1).
     * `annotations`: `prometheus.io/scrape|port|path` pod annotations, the fallback for a Prometheus
     * that discovers pods itself (kubernetes_sd_configs role pod); rules and dashboards are then
     * ConfigMaps to load by hand. Kubernetes only. Default: operator.
     */
    form: z.enum(["operator", "annotations"]).default("operator"),
    /** The Prometheus pods the NetworkPolicies admit on the metrics ports (and nowhere else). */
    scraper: z
        .strictObject({
            /** Namespace of the Prometheus pods. Default: monitoring. */
            namespace: dnsLabel.default("monitoring"),
            /** Labels of the Prometheus pods. Default: app.kubernetes.io/name=prometheus (the Operator's Prometheus pods carry it). */
            podLabels: labelMap.default({ "app.kubernetes.io/name": "prometheus" }),
        })
        .prefault({}),
    /** Labels on the PodMonitors and PrometheusRules (what the Prometheus's podMonitorSelector / ruleSelector match). Default: none. */
    monitorLabels: labelMap.default({}),
    /** Labels on the dashboard ConfigMaps (the Grafana dashboard sidecar's label). Default: grafana_dashboard=1. */
    dashboardLabels: labelMap.default({ grafana_dashboard: "1" }),
    /** Scrape interval of the monitors (Docker: of prometheus.yml's job). Default: 30s. */
    scrapeInterval: promDuration.default("30s"),
    /**
     * Docker: the first host port of the metrics ports, published on 127.0.0.1 only: +0 vLLM's listener,
     * +1 and +2 the ingress's exporter and mtail, then two per deployed env in name order from +10 (its
     * router's responder, its replicas' relay). Default: 19400.
     */
    hostPortBase: z.number().int().min(1024).max(65535).default(19400),
    /** Alert thresholds. */
    alerts: z
        .strictObject({
            /** How long a condition holds before its alert fires (`for`). Default: 5m. */
            for: promDuration.default("5m"),
            /** Env sessions in use above this fraction of capacity. Default: 0.9. */
            envSessionsFraction: fraction.default(0.9),
            /** Ingress 401 responses per second (a wrong or revoked key). Default: 1. */
            ingressUnauthorizedPerSecond: z.number().positive().default(1),
            /** Ingress 429 responses per second (the rate limit is too low for the run). Default: 1. */
            ingressRateLimitedPerSecond: z.number().positive().default(1),
            /** vLLM KV-cache usage above this fraction. Default: 0.9. */
            vllmKvCacheUsage: fraction.default(0.9),
            /** vLLM waiting requests growing for this long. Default: 10m. */
            vllmQueueGrowingFor: promDuration.default("10m"),
            /** No trainer step for this long. Default: 15m. */
            trainerStalledFor: promDuration.default("15m"),
            /** Sandbox claim-to-ready latency (p90) above this many seconds. Default: 30. */
            sandboxClaimLatencySeconds: z.number().positive().default(30),
            /**
             * How long the warm pool may hold fewer ready sandboxes than the run's burst (its refill after a burst)
             * before the pool-drain alert fires. Default: 1m.
             */
            warmPoolRefillFor: promDuration.default("1m"),
        })
        .prefault({}),
});

export const platformSchema = z.strictObject({
    /** Recipe the stack starts from (applied before parsing; recorded for the plan). */
    recipe: z.string().optional(),
    /** Run id: names the Job, labels sandboxes; a new run is a new id. */
    runId: dnsLabel.max(24),
    /**
     * The cluster stack (`<org>/<project>/<stack>`, e.g. `organization/agent-rl-infra/cluster` on a
     * self-managed backend) whose PriorityClasses, RuntimeClasses, agent-sandbox install and
     * cert-manager issuer this run stack uses. Default: none (the cluster has them already).
     */
    clusterStack: z
        .string()
        .regex(/^[\w.-]+\/[\w.-]+\/[\w.-]+$/, "must be <org>/<project>/<stack>, e.g. organization/agent-rl-infra/cluster")
        .optional(),
    /**
     * Whether prod rules apply (images pinned by digest, model revision pinned), checked by the config.
     * The policy pack's prod config is a separate step the command must name (docs/design/security-model.md "The
     * policy pack"). Default: true for a stack named `prod` or `prod-*`.
     */
    prod: z.boolean().optional(),
    /**
     * Check the live target before anything registers (the checks of `npm run preflight`):
     * `off`, `warn` (log what is missing and go on) or `enforce` (stop the up when a check fails).
     */
    preflight: z.enum(["off", "warn", "enforce"]).default("off"),
    /** Where it runs. */
    target: z.discriminatedUnion("kind", [kubernetesTarget, dockerTarget]),
    /** The model trained and served. */
    model: z.strictObject({
        /** Hugging Face model id. */
        name: z.string().regex(/^[\w.-]+\/[\w.-]+$/, "must be <owner>/<name> such as Qwen/Qwen3-1.7B"),
        /** Model revision (commit sha or tag) for reproducible runs. */
        revision: z.string().min(1).default("main"),
    }),
    /** Images. */
    images: images.prefault({}),
    /** The training node. */
    training: training,
    /** OpenEnv environment servers by name. */
    envs: z.record(dnsLabel.max(20), envServer).default({}),
    /** Sandboxes for black-box rollouts. */
    sandboxes: sandboxes.prefault({}),
    /** The Harbor path (black box, Kubernetes, agent-sandbox): the agent and one warm pool per task image. Default: off. */
    harbor: harbor.optional(),
    /** The authenticated vLLM ingress. */
    ingress: ingress.prefault({}),
    /** Metrics, alerts and dashboards (off by default). */
    observability: observability.prefault({}),
});

/** The config as written (before defaults). */
export type PlatformConfigInput = z.input<typeof platformSchema>;
/** The config after zod parsing. */
export type ParsedConfig = z.output<typeof platformSchema>;
