/**
 * The words of the configuration reference: for every field of a stack's config (`platformSchema`,
 * schema.ts) and of a cluster stack's (`clusterSchema`, cluster-schema.ts), its default as a person
 * states it and what it means. Data only. The reference (docs/reference/configuration.md) and the
 * stack file's JSON Schema (schema/stack-config.schema.json, the editor's hover text) are generated
 * from the zod schemas with these words (`npm run schema`, scripts/schema.ts); test/tooling/schema-docs.test.ts
 * fails when a schema field has no entry here (its own or an ancestor's), when an entry names a field
 * the schema lacks, when a default written here is not the one zod applies, and when a generated file
 * differs from what the script writes. Links are relative to docs/reference/.
 */

/** One field: its default as written for a person (`-`: none; `required`), and what it means. */
export interface FieldDoc {
    readonly default: string;
    readonly meaning: string;
}

/** The top-level sections of the reference, in order, with a line each (a stack's config). */
export const PLATFORM_SECTIONS: Readonly<Record<string, string>> = {
    "": "The run itself: its recipe, id, prod rules and cluster stack.",
    target: "Where it runs: a Kubernetes cluster (`kind: kubernetes`) or one Docker GPU host (`kind: docker`). (k8s) and (docker) mark fields of one kind.",
    model: "The model trained and served.",
    images: "The images the stack deploys.",
    training: "The training node: layout, GPUs, batch, the program's settings, vLLM, volumes.",
    envs: "OpenEnv environment servers, by name (`envs.<name>`).",
    sandboxes: "Sandboxes for black-box rollouts.",
    harbor: "The Harbor path: a Harbor agent trained black box, one warm pool per task image ([guide](../guides/harbor.md)).",
    ingress: "The authenticated vLLM ingress.",
    observability: "Metrics, alerts and dashboards (off by default).",
};

/** The top-level sections of a cluster stack's config (`agent-rl-infra:cluster`). */
export const CLUSTER_SECTIONS: Readonly<Record<string, string>> = {
    "": "What every run on one cluster shares, provisioned once by the platform team.",
};

/** Every field of `agent-rl-infra:platform`, by path (`envs.<name>.image`). */
export const PLATFORM_FIELD_DOCS: Readonly<Record<string, FieldDoc>> = {
    recipe: {
        default: "-",
        meaning:
            "start from a recipe ([recipes](stack-file.md#recipes)): every field but `runId` and `target` comes from it, and the stack overrides what it writes; applied before the config is parsed, and recorded in the plan",
    },
    runId: {
        default: "required",
        meaning: "DNS label, <= 24 chars; names the Job and labels sandboxes; a new run is a new id",
    },
    preflight: {
        default: "`off`",
        meaning:
            "check the live target before anything registers (the checks of `npm run preflight`): `off`, `warn` (log what is missing and go on) or `enforce` (stop the up when a check fails) (see [Preflight](preflight.md))",
    },
    clusterStack: {
        default: "- (the cluster has those objects already)",
        meaning:
            "(k8s) `<org>/<project>/<stack>` (e.g. `organization/agent-rl-infra/cluster` on a self-managed backend) of the [cluster stack](../guides/platform-teams.md#the-cluster-stack) this run uses: its PriorityClasses (where the run names none), RuntimeClasses, agent-sandbox install and cert-manager issuer; references it lacks are refused",
    },
    prod: {
        default: "`true` for stacks `prod` / `prod-*`",
        meaning:
            "prod rules, checked by the config before anything registers: every deployed image pinned by digest, the model revision pinned. The policy pack is a separate step: its policies block an update only when the command names it, `pulumi up --policy-pack policy --policy-pack-config policy/config.prod.json` ([The policy pack](../design/security-model.md#the-policy-pack)); nothing checks that it ran; shown in plan.md",
    },
    "target.kind": {
        default: "required",
        meaning: "`kubernetes` or `docker`",
    },
    "target.namespacePrefix": {
        default: "`arl-<stack>`",
        meaning:
            "(k8s) namespaces are `<prefix>-training`, `-ingress`, `-envs`, `-sandboxes`; with `target.team`, the prefix of the stack's object names instead",
    },
    "target.team": {
        default: "- (the stack makes its own namespaces, `namespacePrefix`)",
        meaning:
            "(k8s, needs `clusterStack`) deploy into the team's namespaces the cluster stack made (`<team>-training`, `-ingress`, `-envs`, `-sandboxes`): the stack makes no namespace and nothing cluster-wide, its object names carry `namespacePrefix` (a team's namespaces hold several run stacks), the team's quotas and claim-lifetime bound apply. See [Teams](../guides/platform-teams.md#teams-a-run-stack-in-a-teams-namespaces)",
    },
    "target.kubeconfig": {
        default: "- (this or `context`: required but on `dev` / `dev-*` stacks)",
        meaning:
            "(k8s) kubeconfig file of the cluster (default: the ambient one). One of `kubeconfig` and `context` must be set on every stack but `dev` / `dev-*`, so staging and prod never deploy to whatever kubectl points at",
    },
    "target.context": {
        default: "- (this or `kubeconfig`: required but on `dev` / `dev-*` stacks)",
        meaning:
            "(k8s) kubeconfig context of the cluster. One of `kubeconfig` and `context` must be set on every stack but `dev` / `dev-*`, so staging and prod never deploy to whatever kubectl points at",
    },
    "target.nodeSelector": {
        default: "`{}`",
        meaning: "(k8s) placement of the GPU training pod: its nodeSelector",
    },
    "target.tolerations": {
        default: "`[]`",
        meaning: "(k8s) placement of the GPU training pod: its tolerations",
    },
    "target.gpuResourceName": {
        default: "`nvidia.com/gpu`",
        meaning: "(k8s) extended resource of the GPU device plugin",
    },
    "target.gpuProduct": {
        default: "-",
        meaning: "(k8s) pins `nvidia.com/gpu.product` (e.g. `NVIDIA-H200`)",
    },
    "target.priorityClassName": {
        default: "-",
        meaning: "(k8s) priority of the training pod",
    },
    "target.storageClassName": {
        default: "cluster default",
        meaning: "(k8s) class of the model-cache and checkpoint volumes (with `training.nodes` > 1 it must provide ReadWriteMany)",
    },
    "target.kueueQueue": {
        default: "- (no queue: the trainer starts at once)",
        meaning:
            "(k8s) Kueue LocalQueue (in the training namespace) the trainer is submitted to: its Job / JobSet carries `kueue.x-k8s.io/queue-name` and is created suspended until Kueue admits it against the queue's quota. See [Kueue: queued runs](../guides/multi-node.md#kueue-queued-runs)",
    },
    "target.dns": {
        default: "`{kind: kube-dns}`; node-local: `addresses` [169.254.20.10]",
        meaning:
            "(k8s) where the stack's pods send DNS queries: `{kind: kube-dns}` (the kube-dns / CoreDNS pods in kube-system, label `k8s-app: kube-dns`), `{kind: node-local, addresses?}` (NodeLocal DNSCache, GKE Autopilot's default: a cache on every node at a link-local address, Kubernetes' nodelocaldns addon, default `169.254.20.10`, plus the kube-dns pods it forwards to and pods fall back to; `addresses` lists every address pods query, so add the kube-dns Service IP where the cache also listens there, kube-proxy iptables mode), or `{kind: selector, namespace, podLabels}`; each NetworkPolicy allows exactly that on 53 UDP+TCP (single addresses as `/32`; the metadata address refused); the preflight checks it against the cluster. See [Network paths](../design/network-paths.md)",
    },
    "target.host": {
        default: "`unix:///var/run/docker.sock`",
        meaning: "(docker) Docker daemon address of the GPU host: `unix://`, `ssh://` (`ssh://user@gpu-host`) or `tcp://`",
    },
    "target.dataDir": {
        default: "`/srv/agent-rl`",
        meaning: "(docker) host dir for model cache, checkpoints, TLS and secret files",
    },
    "model.name": {
        default: "required",
        meaning: "Hugging Face model id",
    },
    "model.revision": {
        default: "`main`",
        meaning: "commit sha or tag, for reproducible runs; prod requires a pinned revision",
    },
    "images.vllm": {
        default: "`vllm/vllm-openai:v0.29.0`",
        meaning:
            "vLLM image for black box where vLLM has its own container (Docker, or Kubernetes with `gpuSharing: isolated`); refused where it would not be deployed. The default is the lock's vLLM, the trainer images' (TRL 1.16 takes `vllm>=0.22,<=0.31`, openenv 0.10 beside it at most 0.29), so the weight-transfer client and server are one version",
    },
    "images.trainer": {
        default: "required",
        meaning:
            "trainer image: TRL 1.16 and the training program (`trainer/*/Dockerfile` builds it for the named programs; required, since no public image holds your script and a default one would start, find nothing to run and exit at once while `up` reported success), plus vLLM where the layout runs vLLM from it (white box; black box on Kubernetes with `gpuSharing: shared`): TRL 1.16 takes 0.22-0.31, and beside openenv 0.10 only up to 0.29 (vLLM 0.30 needs `mcp>=2`, openenv's fastmcp `mcp<2`). The example registry `registry.example.com` is warned in plan.md and refused by a real `pulumi up`",
    },
    "images.nginx": {
        default: "`nginxinc/nginx-unprivileged:1.27-alpine`",
        meaning: "nginx (an unprivileged build) of the ingress proxy and the env routers; with `observability` on also vLLM's metrics-only listener",
    },
    "images.nginxExporter": {
        default: "`nginx/nginx-prometheus-exporter:1.4.0`",
        meaning: "`observability` on: the exporter beside each ingress proxy, reading its `stub_status` on loopback (the image runs as uid 1001, from scratch)",
    },
    "images.mtail": {
        default: "- (required with `observability` on and the ingress deployed)",
        meaning:
            "`observability` on: mtail beside each ingress proxy, reading its JSON access log. google/mtail publishes binaries only: `npm run images -- <stack>` builds `images/mtail/Dockerfile` (Debian bookworm's mtail) and names it here by digest",
    },
    "training.layout": {
        default: "required",
        meaning: "`whitebox-colocate`, `whitebox-server`, `blackbox`",
    },
    "training.gpusOnNode": {
        default: "required",
        meaning: "GPUs on the node (with `nodes` > 1: on each GPU node, trainer and vLLM nodes alike)",
    },
    "training.nodes": {
        default: "1",
        meaning:
            "trainer nodes; 1: vLLM and the trainer share one node (every layout); > 1 (layouts `whitebox-server`, `blackbox`; Kubernetes only) runs the trainer as a JobSet, one pod per node, and vLLM on a node of its own; `trainerGpus`, `vllmGpus` default to `gpusOnNode` and `numProcesses` counts per node. See [More than one node](../guides/multi-node.md)",
    },
    "training.vllmGpus": {
        default: "0 colocate, 1 on one node, `gpusOnNode` with `nodes` > 1",
        meaning: "GPUs for vLLM (0 in colocate: vLLM runs inside the trainer)",
    },
    "training.trainerGpus": {
        default: "the rest of the node (`nodes` > 1: `gpusOnNode`)",
        meaning: "GPUs for the trainer (with `nodes` > 1: on each trainer node)",
    },
    "training.numProcesses": {
        default: "`trainerGpus`",
        meaning: "trainer processes (with `nodes` > 1: on each trainer node)",
    },
    "training.perDeviceTrainBatchSize": {
        default: "8",
        meaning: "TRL `per_device_train_batch_size`",
    },
    "training.gradientAccumulationSteps": {
        default: "1",
        meaning: "TRL `gradient_accumulation_steps`",
    },
    "training.stepsPerGeneration": {
        default: "`gradientAccumulationSteps` (TRL's own default)",
        meaning: "TRL `steps_per_generation`",
    },
    "training.numGenerations": {
        default: "8",
        meaning: "TRL `num_generations`: completions per prompt",
    },
    "training.perDeviceEvalBatchSize": {
        default: "8",
        meaning: "TRL `per_device_eval_batch_size`",
    },
    "training.datasetSize": {
        default: "**required**",
        meaning: "training problems/prompts; never defaulted (the seeds' scripts differ)",
    },
    "training.evalSize": {
        default: "0",
        meaning: "held-out eval problems; 0 turns eval (and its batch check) off",
    },
    "training.program": {
        default: "`custom` (every recipe names one)",
        meaning:
            "the training program whose own command line is rendered: `train_coding_whitebox_eval`, `train_coding_whitebox`, `train_wordle_whitebox` (the seeds' white-box scripts), `opencode_hf_sandbox` (TRL's black-box opencode trainer), or `custom` (your script in `training.command`, TrlParser flags); each named program's flags, file and source are in `components/config/programs.ts`. See [The trainer program](training-node.md#the-trainer-program)",
    },
    "training.argsCheck": {
        default: "true for a named program, false for `custom` (your image may not carry the check)",
        meaning:
            "run the program's own parser over the rendered command line at pod start, before the model loads (`/usr/local/lib/agentrl/args_check.py` in the trainer image), so a flag it does not take fails the pod in seconds with the parser's message",
    },
    "training.maxSteps": {
        default: "program's",
        meaning: "training steps; refused for a program without a step flag (the seeds' scripts: the run's length follows `datasetSize` and their one epoch)",
    },
    "training.command": {
        default: "none",
        meaning: "`custom` only: the command starting your script inside the trainer image; refused for a named program (it brings its own)",
    },
    "training.accelerateConfig": {
        default: "none",
        meaning:
            "an accelerate config file in the trainer image (`accelerate launch --config_file`), e.g. `/app/fsdp2.yaml` from `trainer/blackbox/Dockerfile`; a named program's launcher (a `custom` program's `command` starts itself)",
    },
    "training.optim": {
        default: "program's",
        meaning:
            "`--optim`: the optimizer, a transformers optimizer name (black box: the published 8B run used `paged_adamw_8bit` with gradient checkpointing)",
    },
    "training.gradientCheckpointing": {
        default: "program's",
        meaning: "`--gradient-checkpointing`: recompute activations in the backward pass (less GPU memory, slower steps)",
    },
    "training.maxCompletionLength": {
        default: "program's",
        meaning: "`--max-completion-length`: the longest completion, in tokens",
    },
    "training.learningRate": {
        default: "program's",
        meaning: "`--learning-rate` (a custom script's `--learning_rate`): the peak learning rate (the MBPP eval seed's own default 1e-6, opencode's 1e-5)",
    },
    "training.warmupSteps": {
        default: "program's",
        meaning: "transformers' `--warmup_steps`: whole steps, or a fraction of the run below 1; a custom script only (no named program has a flag for it)",
    },
    "training.temperature": {
        default: "program's",
        meaning: "`--temperature`: the rollouts' sampling temperature",
    },
    "training.lrSchedulerType": {
        default: "program's",
        meaning: "`--lr-scheduler-type`: a transformers SchedulerType such as `linear` or `cosine`",
    },
    "training.numEpochs": {
        default: "program's",
        meaning: "`--num-epochs` (a custom script's `--num_train_epochs`): passes over the dataset",
    },
    "training.seed": {
        default: "program's",
        meaning: "`--seed`: the random seed (the opencode program's dataset shuffle and TRL's)",
    },
    "training.maxStaleness": {
        default: "program's",
        meaning: "black box: `--max-staleness` (AsyncGRPO), how many policy versions old a rollout may be when trained on",
    },
    "training.extraArgs": {
        default: "`[]`",
        meaning: "more trainer arguments, appended (for a named program: its own flags only, none the platform renders)",
    },
    "training.extraEnv": {
        default: "`{}`",
        meaning:
            "more env vars of the trainer (reaches both roles: `NCCL_*` go here); may not shadow the names the platform sets. A value is plain text, or a secret as a reference `{ secret: envSecret-<name> }` to the stack secret set with `pulumi config set --secret envSecret-<name>` (Kubernetes: a Secret and `secretKeyRef`; Docker: a secret env; docs/design/secrets.md)",
    },
    "training.maxModelLen": {
        default: "model's",
        meaning: "vLLM `--max-model-len`",
    },
    "training.gpuMemory": {
        default: "`{}`",
        meaning:
            "the GPU memory check: the trainer's and vLLM's estimated peak per GPU against one GPU's memory; a clear misfit is refused with the settings that would fit (see [GPU memory](../design/gpu-memory.md))",
    },
    "training.gpuMemory.product": {
        default: "target.gpuProduct (Kubernetes), else the recipe's",
        meaning:
            "the GPU the run is sized for, as its `nvidia.com/gpu.product` label (e.g. `NVIDIA-H200`, `NVIDIA-A100-SXM4-80GB`); its memory comes from components/config/gpu-products.ts",
    },
    "training.gpuMemory.gib": {
        default: "none",
        meaning: "usable memory of one GPU in GiB (what torch reports as total), for a product the table lacks; wins over product",
    },
    "training.gpuMemory.enforce": {
        default: "true",
        meaning:
            "false: an estimate above the GPU's memory is a plan.md warning instead of a refusal (for a setup the estimate does not know, e.g. CPU offload)",
    },
    "training.gpuMemory.promptTokens": {
        default: "program's",
        meaning: "prompt tokens per sequence, added to the completion length for the trainer's activations",
    },
    "training.gpuMemory.model": {
        default: "known for the recipes' models",
        meaning:
            "a model the table does not know: the numbers of its config.json (layers, hidden, intermediate, heads, kvHeads, headDim, vocab, tiedEmbeddings, maxPositions: `max_position_embeddings`, vLLM's max model length when `training.maxModelLen` is unset)",
    },
    "training.gpuMemoryUtilization": {
        default: "0.9",
        meaning: "vLLM GPU memory fraction (server and black-box layouts; colocate keeps TRL's colocate default, 0.3, since training shares the GPU)",
    },
    "training.dtype": {
        default: "the program's: `float32` (TRL 1.16's `AsyncGRPOConfig.dtype`)",
        meaning:
            "black box only: the one dtype of the trainer and vLLM (`vllm serve --dtype`, and `--dtype` to a `custom` AsyncGRPO script); AsyncGRPO asks for vLLM in the trainer's dtype. Refused for TRL's opencode script when not `float32` (it has no dtype flag) and in the white-box layouts (GRPOConfig has no dtype flag; both roles load the model's own dtype)",
    },
    "training.vllm.toolCallParser": {
        default: "`hermes` for `Qwen/*`, `qwen3_coder` for `Qwen/Qwen3-Coder*`; required for other models",
        meaning:
            "black box: vLLM's `--tool-call-parser`, per model family (vLLM parses the agent's tool calls) (with `--enable-auto-tool-choice`), one of vLLM 0.29's parsers (`llama3_json`, `mistral`, `openai`, ...); refused in the white-box layouts",
    },
    "training.vllm.extraArgs": {
        default: "`[]`",
        meaning:
            'more `vllm serve` flags (prefix caching, LoRA, `--max-num-seqs`, ...) appended after the platform\'s (layouts `whitebox-server`, `blackbox`; refused in colocate, where vLLM runs inside the script). Refused, naming the setting to use: the flags the platform renders or the weight sync needs (`--host`, `--port`, `--api-key`, `--weight-transfer-config`, `--logprobs-mode`, `--return-tokens-as-token-ids`, `--max-model-len`, `--tensor-parallel-size`, `--dtype`, `--tool-call-parser`, `--config`, ... in `components/config/vllm-settings.ts`), the env vars `VLLM_SERVER_DEV_MODE`, `VLLM_API_KEY`, `CUDA_VISIBLE_DEVICES`, `HF_HOME`, `HF_TOKEN`, and `NCCL_*` (set those in `training.extraEnv`, which reaches both roles). plan.md lists them under "Weight sync"',
    },
    "training.vllm.extraEnv": {
        default: "`{}`",
        meaning:
            'more env vars of the vLLM server (layouts `whitebox-server`, `blackbox`; refused in colocate); a secret only as a reference `{ secret: envSecret-<name> }`, as in `training.extraEnv`. Refused, naming the setting to use: `VLLM_SERVER_DEV_MODE`, `VLLM_API_KEY`, `CUDA_VISIBLE_DEVICES`, `HF_HOME`, `HF_TOKEN`, and `NCCL_*` (set those in `training.extraEnv`, which reaches both roles). plan.md lists them under "Weight sync"',
    },
    "training.modelLoadSeconds": {
        default: "1200",
        meaning: "how long vLLM may take to load before its startup probe gives up",
    },
    "training.activeDeadlineSeconds": {
        default: "21600",
        meaning:
            "(k8s) hard limit on the run (Job `activeDeadlineSeconds`); refused on Docker (see [What each target ignores](stack-file.md#what-each-target-ignores))",
    },
    "training.backoffLimit": {
        default: "0",
        meaning:
            "(k8s) pod retries for failures other than the trainer's own exit (a non-zero trainer exit fails the Job at once; node drains are ignored); refused on Docker, which does not restart the trainer",
    },
    "training.shmSize": {
        default: "`16Gi`",
        meaning: "memory-backed `/dev/shm`",
    },
    "training.gpuSharing": {
        default: "`shared` (layouts with a separate vLLM)",
        meaning:
            "how vLLM and the trainer share the node's GPUs, which decides the NCCL transport of the weight update: `shared` (every role sees every training GPU, `CUDA_VISIBLE_DEVICES` splits them: P2P/NVLink) or `isolated` (each container only its own GPUs: NCCL over shared memory). See [GPU sharing and the weight sync](../design/gpu-sharing.md)",
    },
    "training.ncclCheck": {
        default: "`false`",
        meaning:
            "run the NCCL check (1 GiB broadcast between the two GPU sets, rendered NCCL settings) before vLLM loads, so a broken setup fails in seconds; needs `gpuSharing: shared`",
    },
    "training.modelCache": {
        default: "enabled, `200Gi`",
        meaning: "model cache volume, so weights are not downloaded every run (`enabled`: whether to create it; `size`: the requested size)",
    },
    "training.checkpoints": {
        default: "enabled, `100Gi` (recipes: at least 3 runs by the rule, never below their earlier size)",
        meaning:
            "checkpoint/output volume, shared by the stack's runs (each writes `/checkpoints/<runId>`); a size below what one run writes is refused (see [Checkpoints](../guides/operating-a-run.md#checkpoints-size-resume-retention-the-way-out))",
    },
    "training.checkpoints.keepLast": {
        default: "2 (custom script)",
        meaning: "checkpoints a custom script keeps (`--save_total_limit`); refused for a named program (no flag)",
    },
    "training.checkpoints.parameters": {
        default: "known for the recipes' models",
        meaning: "the model's parameter count, for the size check",
    },
    "training.checkpoints.dtype": {
        default: "the program's dtype (custom: float32)",
        meaning: "the trainer's weight dtype, for the size check",
    },
    "training.resumeFromCheckpoint": {
        default: "false",
        meaning:
            "resume (a custom script: `--resume_from_checkpoint`): `true`: this run's latest *complete* checkpoint (a restarted run); `<runId>`: that run's latest complete one (a new run continuing a failed one); `<runId>/checkpoint-<step>`: exactly that one. A restarted run prefers its own latest complete checkpoint. Refused for a program that cannot resume",
    },
    "training.hubRepoId": {
        default: "-",
        meaning: "push the trained model to the Hub as `<owner>/<name>` (needs the `hfToken` secret)",
    },
    "training.trackioProject": {
        default: "-",
        meaning: "trackio metrics: the project",
    },
    "training.trackioSpaceId": {
        default: "-",
        meaning: "trackio metrics: the Space they sync to",
    },
    "training.maxInflight": {
        default: "8",
        meaning: "black box: rollouts in flight at once (`--max-inflight`) (one sandbox each)",
    },
    "training.egress.restrict": {
        default: "true",
        meaning:
            "(k8s) lock the trainer pod's egress to DNS, this stack's env routers / ingress / sandboxes, the API server when it claims sandboxes (black box on agent-sandbox), and public addresses on 443 (the Hub); false: no egress policy at all, the switch for clusters where these rules cannot be written",
    },
    "training.egress.apiServerCidrs": {
        default: "- (any private address on 443/6443)",
        meaning:
            "(k8s) the API server's addresses, to narrow the trainer's API egress: `kubectl get endpoints kubernetes -o jsonpath='{.subsets[*].addresses[*].ip}'`, each as `/32`",
    },
    "training.trainerCpu": {
        default: "8",
        meaning: "CPU of the trainer container, request = limit",
    },
    "training.trainerMemory": {
        default: "64Gi",
        meaning: "memory of the trainer container, request = limit",
    },
    "training.vllmCpu": {
        default: "8",
        meaning: "CPU of the vLLM container, request = limit",
    },
    "training.vllmMemory": {
        default: "64Gi",
        meaning: "memory of the vLLM container, request = limit",
    },
    "envs.<name>.catalog": {
        default: "required",
        meaning: "`coding`, `textarena`, `opencode`, `echo` (images `ghcr.io/huggingface/openenv-<name>:sha-4026f15`), or `custom`",
    },
    "envs.<name>.image": {
        default: "catalog's",
        meaning: "image (required for custom); pin by digest",
    },
    "envs.<name>.concurrentSessions": {
        default: "catalog's",
        meaning: "custom env: serves several sessions per process",
    },
    "envs.<name>.sessionsPerReplica": {
        default: "catalog's",
        meaning: "`MAX_CONCURRENT_ENVS`; 1 for envs without concurrent sessions",
    },
    "envs.<name>.replicas": {
        default: "demand / sessions + headroom",
        meaning: "replicas",
    },
    "envs.<name>.headroomReplicas": {
        default: "1",
        meaning: "spare replicas so a node drain keeps capacity",
    },
    "envs.<name>.settings": {
        default: "catalog's",
        meaning:
            "the env's own env vars (e.g. `TEXTARENA_ENV_ID`); a secret only as `{ secretKeyRef: { name, key } }`, a key of an existing Secret in the env's namespace (Kubernetes; refused on Docker), never as text",
    },
    "envs.<name>.resources": {
        default: "2 CPU, 4Gi",
        meaning: "per replica, requests = limits",
    },
    "envs.<name>.terminationGraceSeconds": {
        default: "300",
        meaning: "time open websocket sessions get on shutdown",
    },
    "envs.<name>.external": {
        default: "-",
        meaning:
            "`{url, sessions}`: use an existing server (e.g. a hosted Space), deploy nothing; `url` its base URL (https:// for anything outside the cluster), `sessions` how many it holds at once",
    },
    "envs.<name>.egress": {
        default: "catalog's (custom: `dns`)",
        meaning:
            "what replicas may reach besides their router: `dns` only, or `internet` (DNS + public addresses, never private ranges or the metadata service)",
    },
    "envs.<name>.readOnlyRootFilesystem": {
        default: "true for `coding`",
        meaning: "read-only root with a `/tmp` scratch dir (envs that run the model's code)",
    },
    "envs.<name>.scratchSize": {
        default: "1Gi",
        meaning: "size of that `/tmp`",
    },
    "envs.<name>.wsPing": {
        default: "60 s / 300 s colocated, else 20 s / 20 s",
        meaning:
            "`{intervalSeconds, timeoutSeconds}`: the replicas' server-side websocket keepalive, rendered as `UVICORN_WS_PING_INTERVAL` / `UVICORN_WS_PING_TIMEOUT` (the uvicorn CLI reads them; a custom image must run the uvicorn CLI or honour them itself). A client that stops answering pings for their sum loses its session, which frees a half-open client's slot (the catalog's images have no idle reaper); longer when colocated, where vLLM in the trainer process starves the client's event loop and pongs come late",
    },
    "envs.<name>.runAsNonRoot": {
        default: "true for `coding` (envs that run the model's code), else false",
        meaning:
            "run the replicas as uid 65532 (read-only root, `HOME=/tmp`) instead of the image's user (the OpenEnv images have no USER: root), with `HOME` at the `/tmp` scratch dir for caches and NLTK data, and a read-only root unless `readOnlyRootFilesystem` says otherwise; `false` on `coding` is the opt-out (it runs as root, and plan.md warns what contains it; docs/design/env-hardening.md)",
    },
    "envs.<name>.ephemeralStorage": {
        default: "8Gi",
        meaning: "ephemeral storage (writable layer, logs, scratch) per replica, requests = limits",
    },
    "envs.<name>.runtimeClassName": {
        default: "-",
        meaning: "(k8s) RuntimeClass of the replicas (gVisor, Kata); it must exist",
    },
    "sandboxes.provider": {
        default: "by layout/target",
        meaning:
            "`agent-sandbox` (k8s; the black box's), `none` (the white boxes'); `docker` (the docker target's black-box default) and `hf` (hosted) are refused with their reason and render nothing: use a Kubernetes target ([why](../design/sandbox-trust.md#hosted-sandboxes-sandboxesprovider-hf)). Each name is one module (components/sandbox/providers/)",
    },
    "sandboxes.image": {
        default: "agent-sandbox: required; docker/hf: OpenEnv's opencode sandbox `:latest`",
        meaning: "agent-sandbox: the image `python/Dockerfile` builds (the stock OpenEnv opencode sandbox plus the runtime on 8888); pin by digest",
    },
    "sandboxes.runAsUser": {
        default: "65532",
        meaning: "uid and gid sandboxes run as (a high, unused one, distroless's `nonroot`, not the well-known 1000 a host user may have)",
    },
    "sandboxes.cpu": {
        default: "1",
        meaning: "CPU per sandbox, request = limit",
    },
    "sandboxes.memory": {
        default: "2Gi",
        meaning: "memory per sandbox, request = limit",
    },
    "sandboxes.runtimeClassName": {
        default: "-",
        meaning: "(k8s) RuntimeClass for gVisor/Kata isolation; refused on Docker",
    },
    "sandboxes.headroom": {
        default: "2",
        meaning: "spare warm sandboxes beyond the burst and the refill (a pod that fails to start, a claim released late)",
    },
    "sandboxes.poolSize": {
        default:
            "the run's burst + refill + headroom: the burst is `maxInflight` x rollout workers (1 for the named TRL programs, which run rollouts on the main process; every trainer process for a custom program), the refill is claim rate (burst / `rolloutSeconds`) x `refillSeconds`, rounded up; a pool below the burst is refused. plan.md shows the arithmetic",
        meaning: "warm pool size; on the Harbor path, each task image's pool's",
    },
    "sandboxes.rolloutSeconds": {
        default: "35 (the shortest whole training trial measured on the real node, issue 58)",
        meaning:
            "seconds a rollout holds its sandbox, claim to release: each in-flight slot claims again after it, so the claim rate is the burst / this. Shorter rollouts claim faster and need a larger pool",
    },
    "sandboxes.refillSeconds": {
        default: "10 (bench/results.md 6b: 6.0-9.2 s from a burst to a full pool on real pods)",
        meaning:
            "seconds from a claim to its replacement's Ready (measure it: `npm run bench -- --only claim-latency-node`, the refill column). A pool holds a ready sandbox only while its size exceeds claim rate x this",
    },
    "sandboxes.autoscale": {
        default: "off",
        meaning:
            "(k8s) a HorizontalPodAutoscaler (autoscaling/v2) on each SandboxWarmPool's `/scale`, for a claim rate that varies (several runs or teams claiming from one pool): it follows the wanted size the stack's recording rule computes from the live claims. Needs `observability.enabled` and an external metrics adapter on the cluster ([guide](../guides/platform-teams.md#a-warm-pool-that-follows-the-claim-rate))",
    },
    "sandboxes.autoscale.enabled": {
        default: "false",
        meaning:
            "render the autoscaler: its minimum is the pool's size (`poolSize`), its maximum `maxPoolSize`; the namespace quota counts the maximum, so a scaled-up pool never runs into it",
    },
    "sandboxes.autoscale.maxPoolSize": {
        default: "twice the pool's size",
        meaning:
            "the most warm sandboxes the autoscaler keeps per pool (HPA maxReplicas); at least `poolSize`. The sandboxes namespace's quota (or, in a team's namespace, the check against the team's quota) counts it in place of `poolSize`",
    },
    "sandboxes.maxLifetimeSeconds": {
        default: "3600",
        meaning: "hard maximum lifetime of a claimed sandbox, in seconds",
    },
    "sandboxes.maxWarmWaitSeconds": {
        default: "21600",
        meaning: "longest a warm sandbox waits unclaimed, in seconds (adds to its pod deadline)",
    },
    "sandboxes.maxCallsPerRollout": {
        default: "256",
        meaning:
            "the most model calls one rollout's forwarder relays (`forwarder.py --max-calls`); past it a call gets 429 naming the bound and the trace counts it in `limited`",
    },
    "sandboxes.maxTokensPerRollout": {
        default: "1048576",
        meaning:
            "the most completion tokens one rollout's forwarder lets the model sample (`forwarder.py --max-rollout-tokens`): each call's `max_tokens` is cut to what is left; with none left a call gets 429 naming the bound and the trace counts it in `limited`",
    },
    "sandboxes.priorityClassName": {
        default: "the cluster stack's, else none",
        meaning: "(k8s) PriorityClass of the sandbox pods (below training)",
    },
    harbor: {
        default: "- (off)",
        meaning:
            "train a Harbor agent black box on Harbor tasks (Kubernetes, `sandboxes.provider: agent-sandbox`; refused on Docker and on other providers): each trial is a claim of its task image's warm pool; the trainer gets `HARBOR_AGENT`, `SANDBOX_TASK_POOLS` and `HARBOR_TELEMETRY=0` ([guide](../guides/harbor.md))",
    },
    "harbor.agent": {
        default: "required (recipe `harbor-blackbox`: `opencode`)",
        meaning:
            "the Harbor agent trained: one the trial code runs, `opencode` or `mini-swe-agent` (`python/agent_rl_sandbox/harbor_trial.py` `AGENTS`, pre-installed in the task image; any other is refused at plan time); the trainer's `HARBOR_AGENT`",
    },
    "harbor.taskImages": {
        default: "`[]` (refused: list at least one)",
        meaning:
            "`{ image, name? }` per image the run's Harbor tasks run in (at most 32, each once): one SandboxTemplate + SandboxWarmPool each, each holding the whole burst (`sandboxes.poolSize`: a GRPO group is one task, so one image may take every claim at once). A task whose image no pool serves is refused before any claim, naming it",
    },
    "harbor.taskImages[].image": {
        default: "required",
        meaning:
            "a task's image, as its task.toml names it (`[environment].docker_image`), with the pool's runtime and forwarder in it and the agent pre-installed ([task images](../guides/harbor.md#task-images)); pin by digest",
    },
    "harbor.taskImages[].name": {
        default: "the image's repository name and 6 hex of its sha256",
        meaning:
            "names its pool's objects (`sandbox-pool-<runId>-<name>`) and labels its pods `agentrl.dev/harbor-task`; a DNS label of at most 30 characters, one per entry",
    },
    "ingress.enabled": {
        default: "on for black box, off for white box",
        meaning: "the authenticated vLLM ingress",
    },
    "ingress.keys": {
        default: "`[sandboxes, operators]`",
        meaning: "bearer key names, each generated unless supplied as the secret `ingressKey-<name>`; several valid at once for rotation",
    },
    "ingress.sandboxKey": {
        default: "`sandboxes`",
        meaning: "key handed to the trainer for the sandboxes",
    },
    "ingress.allowCompletions": {
        default: "false",
        meaning: "also allow `POST /v1/completions`",
    },
    "ingress.healthUnauthenticated": {
        default: "false",
        meaning: "`GET /health` without a key (load balancers)",
    },
    "ingress.exposure": {
        default: "`cluster`",
        meaning: "`cluster` (ClusterIP), `loadbalancer`, `httproute` (Gateway API)",
    },
    "ingress.host": {
        default: "-",
        meaning: "public host name for external exposure (the certificate's subject)",
    },
    "ingress.tls.mode": {
        default: "`none`",
        meaning:
            "`secret` (a k8s TLS Secret you provide), `cert-manager` (the stack requests a Certificate for the proxy's names), `files` (Docker host), `none` (in-cluster HTTP)",
    },
    "ingress.tls.issuer": {
        default: "- (its `kind`: ClusterIssuer, `group`: cert-manager.io)",
        meaning:
            "`{name, kind: Issuer|ClusterIssuer, group}`: who signs the certificate (mode `cert-manager`): an `Issuer` in the ingress namespace or a `ClusterIssuer`, and its API group (external issuers have their own)",
    },
    "ingress.tls.secretName": {
        default: "-",
        meaning: "(k8s) the TLS Secret in the ingress namespace: mode `secret` (required), or where mode `cert-manager` writes (default `vllm-ingress-tls`)",
    },
    "ingress.tls.certFile": {
        default: "-",
        meaning: "(docker) the certificate file on the host (mode `files`)",
    },
    "ingress.tls.keyFile": {
        default: "-",
        meaning: "(docker) the key file on the host (mode `files`)",
    },
    "ingress.tls.publiclyTrusted": {
        default: "false",
        meaning: "the certificate is publicly trusted (required for hosted sandboxes)",
    },
    "ingress.gateway": {
        default: "-",
        meaning: "`{name, namespace, sectionName?}` parent Gateway for `httproute`",
    },
    "ingress.replicas": {
        default: "2",
        meaning: "(k8s) proxy replicas; refused on Docker (one container)",
    },
    "ingress.maxBodySize": {
        default: "`4m`",
        meaning: "largest request body accepted (an nginx size)",
    },
    "ingress.rateLimitPerSecond": {
        default: "50",
        meaning: "requests per second per key, **per proxy replica**",
    },
    "ingress.rateLimitBurst": {
        default: "100",
        meaning: "burst above the rate per key, **per proxy replica**",
    },
    "ingress.readTimeoutSeconds": {
        default: "600",
        meaning: "seconds nginx waits for vLLM's response (long generations)",
    },
    "observability.enabled": {
        default: "false",
        meaning:
            "metrics endpoints in every pod (Docker: container) that can serve them, the scrape rule in every NetworkPolicy (k8s), monitors (k8s) or prometheus.yml (Docker), alert rules and dashboards (see [Observability](../guides/observability.md)); off, nothing of it is rendered. Turning it on or off changes the pods: the run restarts and env sessions drop, as any trainer or env change does",
    },
    "observability.form": {
        default: "`operator`",
        meaning:
            "(k8s) `operator`: PodMonitors (`monitoring.coreos.com/v1`) and PrometheusRules; `annotations`: `prometheus.io/scrape`, `port`, `path` pod annotations for a Prometheus that discovers pods itself (`kubernetes_sd_configs` role pod; rules and dashboards are then ConfigMaps to load by hand; one port per pod: see [Observability](../guides/observability.md)); refused on Docker",
    },
    "observability.scraper.namespace": {
        default: "`monitoring`",
        meaning:
            "(k8s) namespace of the Prometheus pods the NetworkPolicies admit on the metrics ports (and nowhere else); one of the stack's own namespaces is refused",
    },
    "observability.scraper.podLabels": {
        default: "`{app.kubernetes.io/name: prometheus}`",
        meaning: "(k8s) labels of those pods (the Operator's Prometheus pods carry the default); empty is refused",
    },
    "observability.monitorLabels": {
        default: "`{}`",
        meaning:
            "(k8s, form `operator`) labels on the PodMonitors and PrometheusRules, what the Prometheus's `podMonitorSelector` / `ruleSelector` match (e.g. `release: kube-prometheus-stack`)",
    },
    "observability.dashboardLabels": {
        default: '`{grafana_dashboard: "1"}`',
        meaning: "labels on the dashboard ConfigMaps (the Grafana dashboard sidecar's label)",
    },
    "observability.scrapeInterval": {
        default: "`30s`",
        meaning: "scrape interval of the monitors (and of the Docker target's prometheus.yml)",
    },
    "observability.hostPortBase": {
        default: "19400",
        meaning:
            "(Docker) the first host port of the metrics ports, all on 127.0.0.1: +0 vLLM's listener, +1 / +2 the ingress's exporter / mtail, then from +10 two per deployed env in name order (its router's responder, its replicas' relay); refused on Kubernetes; a last port above 65535, or one that is the ingress's published port, is refused (see [Observability](../guides/observability.md))",
    },
    "observability.alerts.for": {
        default: "`5m`",
        meaning: "how long an alert's condition holds before it fires",
    },
    "observability.alerts.envSessionsFraction": {
        default: "0.9",
        meaning: "env sessions in use above this fraction of a replica's capacity",
    },
    "observability.alerts.ingressUnauthorizedPerSecond": {
        default: "1",
        meaning: "ingress 401 responses per second (a wrong or revoked key)",
    },
    "observability.alerts.ingressRateLimitedPerSecond": {
        default: "1",
        meaning: "ingress 429 responses per second (the rate limit is too low for the run)",
    },
    "observability.alerts.vllmKvCacheUsage": {
        default: "0.9",
        meaning: "vLLM KV-cache usage above this fraction",
    },
    "observability.alerts.vllmQueueGrowingFor": {
        default: "`10m`",
        meaning: "vLLM's waiting requests growing for this long",
    },
    "observability.alerts.trainerStalledFor": {
        default: "`15m`",
        meaning: "no trainer step for this long",
    },
    "observability.alerts.sandboxClaimLatencySeconds": {
        default: "30",
        meaning: "sandbox claim-to-ready latency (p90) above this many seconds",
    },
    "observability.alerts.warmPoolRefillFor": {
        default: "`1m`",
        meaning:
            "how long the warm pool may hold fewer ready sandboxes than the run's burst (`maxInflight` x rollout workers, as the pool is sized) before the pool-drain alert fires: the refill after a burst takes seconds (bench/results.md section 6), a pool that stays short makes the next burst wait on cold starts",
    },
};

/** Every field of `agent-rl-infra:cluster`, by path (`teams[].quotas`). */
export const CLUSTER_FIELD_DOCS: Readonly<Record<string, FieldDoc>> = {
    "target.kind": {
        default: "required",
        meaning: "`kubernetes` only: a Docker host has nothing shared between runs to provision",
    },
    "target.context": {
        default: "required",
        meaning: "kubeconfig context of the cluster: required (never kubectl's current one)",
    },
    "target.kubeconfig": {
        default: "ambient",
        meaning:
            "kubeconfig file. When set, the kubernetes provider copies it, credentials included, to `$TMPDIR/kubeconfig<N>` (mode 0600) at every `pulumi` run and never removes it (pulumi-kubernetes `provider/pkg/provider/util.go` `writeKubeconfigToFile`, called from `provider.go`'s Configure for its Helm settings; read in the provider source the engine tests build, `provider/v4@v4.0.0-20260115033456-f47bc2d6f199`); left unset (the ambient `KUBECONFIG`), no copy is made. Where runs share a machine, run `pulumi` with `TMPDIR` on a private directory you clean",
    },
    "agentSandbox.install": {
        default: "true",
        meaning:
            "install agent-sandbox v1.0.1 (CRDs, controller, RBAC) for every run stack's warm pools; off when the cluster already has agent-sandbox from elsewhere; a cluster stack deployed on v0.5.x upgrades in place (docs/guides/platform-teams.md)",
    },
    "agentSandbox.manifest": {
        default:
            "`https://github.com/kubernetes-sigs/agent-sandbox/releases/download/v1.0.1/sandbox-with-extensions.yaml` (the v1.0.1 release asset: core and extensions in one, the controller declared once)",
        meaning: "URL or file of the release manifest (a mirrored copy on an air-gapped cluster)",
    },
    jobSet: {
        default: "not installed",
        meaning: "JobSet, which a run stack with `training.nodes > 1` runs its trainer as (jobset.x-k8s.io/v1alpha2); no other component installs it",
    },
    "jobSet.install": {
        default: "false",
        meaning:
            "install JobSet v0.12.0 (CRDs, controller, webhooks, RBAC in `jobset-system`) from its release manifest; off: install it by hand when a run trains on several nodes (`kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml`), which the preflight checks",
    },
    "jobSet.manifest": {
        default: "`https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml` (the v0.12.0 release asset)",
        meaning: "URL or file of the release manifest (a mirrored copy on an air-gapped cluster)",
    },
    kueue: {
        default: "not installed",
        meaning:
            "Kueue, which admits the trainer of a run stack with `target.kueueQueue` (its Job or JobSet is created suspended with `kueue.x-k8s.io/queue-name`); no other component installs it, and no stack makes its queues (a ResourceFlavor, a ClusterQueue with GPU quota, a LocalQueue per training namespace: quota is the platform team's policy). See [Kueue: queued runs](../guides/multi-node.md#kueue-queued-runs)",
    },
    "kueue.install": {
        default: "false",
        meaning:
            "install Kueue v0.17.0 (CRDs, controller, webhooks, RBAC in `kueue-system`) from its release manifest, whose default configuration enables the `batch/job` and `jobset.x-k8s.io/jobset` integrations a queued run uses; off: install it by hand when runs queue (`kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/releases/download/v0.17.0/manifests.yaml`), which the preflight checks",
    },
    "kueue.manifest": {
        default:
            "`https://github.com/kubernetes-sigs/kueue/releases/download/v0.17.0/manifests.yaml` (the v0.17.0 release asset, as Kueue's README gives it at v0.17.0; no test fetches it: the tests apply the CRDs from Kueue's Go module)",
        meaning: "URL or file of the release manifest (a mirrored copy on an air-gapped cluster)",
    },
    "priorityClasses.training": {
        default: "`agent-rl-training` (100000, PreemptLowerPriority)",
        meaning:
            "`{name, value, preemptionPolicy?}` (`value`: higher preempts lower, user classes stay below 1e9): the PriorityClass of the training pods of run stacks that name none; omit it to not create one",
    },
    "priorityClasses.sandboxes": {
        default: "`agent-rl-sandboxes` (1000, `Never` preempts; a class written here: PreemptLowerPriority)",
        meaning:
            "`{name, value, preemptionPolicy?}` (`value`: higher preempts lower, user classes stay below 1e9): the PriorityClass of the sandbox pods of run stacks that name none; omit it to not create one",
    },
    runtimeClasses: {
        default: "[]",
        meaning: "`{ name, handler }` per sandboxing handler the nodes' runtime has (`runsc` for gVisor, `kata`)",
    },
    certIssuer: {
        default: "- (its `kind`: ClusterIssuer, `group`: cert-manager.io)",
        meaning: "`{ name, kind }` of the cert-manager issuer run stacks' ingress certificates use (a reference: the issuer is cert-manager's config)",
    },
    teams: {
        default: "[]",
        meaning:
            "`{ name, quotas?, sandboxMaxLifetimeSeconds?, deployers? }` per team: the four role namespaces of a run, `<name>-training`, `-ingress`, `-envs`, `-sandboxes` (`name` at most 40 characters), each with its Pod Security labels and a default-deny ingress policy, a quota per role where `quotas` gives limits, and the team's sandbox-claim admission policy, so run stacks naming the team (`target.team`) deploy into them and make nothing cluster-wide. See [Teams](../guides/platform-teams.md#teams-a-run-stack-in-a-teams-namespaces)",
    },
    "teams[].quotas": {
        default: "{}",
        meaning:
            "`{ training?, ingress?, envs?, sandboxes? }`, each `{ gpus, cpu, memory, pods }` requested at once: a ResourceQuota in that role's namespace (an omitted role: no quota) (`requests.<gpuResourceName>` for GPUs); shared by every run of the team. The old one-namespace `quota` is refused with where it went",
    },
    "teams[].sandboxMaxLifetimeSeconds": {
        default: "21600",
        meaning:
            "the longest a sandbox claim in `<name>-sandboxes` may live (the admission policy's bound, any run); a run's `sandboxes.maxLifetimeSeconds` above it is refused",
    },
    "teams[].deployers": {
        default: "[] (grant the rights yourself)",
        meaning:
            "RBAC subjects (`{kind: User|Group, name}` or `{kind: ServiceAccount, name, namespace}`) who deploy the team's run stacks: a Role `agentrl-deployer` with the rights below (and, in the training namespace, what `npm run checkpoints` needs) bound in each of the team's namespaces",
    },
    gpuResourceName: {
        default: "`nvidia.com/gpu`",
        meaning: "the device plugin's resource, for team GPU quotas",
    },
    "observability.enabled": {
        default: "false",
        meaning:
            "with `agentSandbox.install`: a PodMonitor `agent-sandbox-controller` in `agent-sandbox-system` for the controller's metrics (container port `metrics` 8080, `/metrics`: claims, warm vs cold, startup latency); needs the Prometheus Operator's CRDs",
    },
    "observability.monitorLabels": {
        default: "`{}`",
        meaning: "labels of the controller's PodMonitor (what the Prometheus's `podMonitorSelector` matches)",
    },
    "observability.scrapeInterval": {
        default: "`30s`",
        meaning: "scrape interval of the controller's PodMonitor",
    },
};
