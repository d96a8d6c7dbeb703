/**
 * Cross-field checks on the resolved config: pure functions, every problem collected and
 * reported together, each naming the field and the fix. TRL's batch arithmetic follows
 * GRPOConfig (trl/trainer/grpo_config.py): the generation batch must be divisible by
 * num_generations, and so must the eval batch.
 */
import { validateCheckpoints } from "./checkpoints";
import { validateGpuMemory } from "./gpu-fit";
import { buildHint, trainerImageName } from "./built-images";
import { imageSource } from "./image-sources";
import { grpoBatchRuleApplies, programLabel, validateProgram } from "./program-rules";
import { CUSTOM_PROGRAM, PROGRAM_NAMES, programFacts } from "./programs";
import { pinnedByDigest } from "../shared/images";
import { validateVllmSettings } from "./vllm-settings";
import { validateDns } from "./dns";
import { harborProblems } from "./harbor";
import { poolAutoscaleProblems, poolSizeProblems } from "./pool-size";
import { runsSandboxPool, sandboxProviderProblems, sandboxProviderRecord } from "./sandbox-providers";
import { validateObservability } from "./observability";
import { envReferenceFix, plainEnv, secretEnvNameRule } from "./secrets";
import { envSessionProblems } from "./env-sessions";
import { isDevStack, totalProcesses } from "./resolve";
import type { PlatformConfig, ResolvedEnv } from "./types";

/** Divisors of n, for a helpful "try one of" hint. */
function divisors(n: number): number[] {
    const out: number[] = [];
    for (let d = 1; d <= n; d++) if (n % d === 0) out.push(d);
    return out;
}

export function validateGpus(c: PlatformConfig): string[] {
    const t = c.training;
    const errors: string[] = [];
    if (t.layout === "whitebox-colocate" && t.vllmGpus > 0) {
        errors.push(
            `training.vllmGpus: the whitebox-colocate layout runs vLLM inside the trainer, so it has no separate vLLM GPUs (got ${t.vllmGpus}): set vllmGpus to 0, or use layout whitebox-server`,
        );
    }
    if (t.layout !== "whitebox-colocate" && t.vllmGpus === 0) {
        errors.push(`training.vllmGpus: the ${t.layout} layout runs vLLM on its own GPUs: set vllmGpus to at least 1`);
    }
    errors.push(...validateNodes(c));
    if (t.nodes === 1 && t.vllmGpus + t.trainerGpus > t.gpusOnNode) {
        errors.push(
            `training.trainerGpus: vLLM ${t.vllmGpus} + trainer ${t.trainerGpus} = ${t.vllmGpus + t.trainerGpus} GPUs, but the node has ${t.gpusOnNode} (training.gpusOnNode): lower vllmGpus or trainerGpus, or raise gpusOnNode`,
        );
    }
    if (t.layout === "whitebox-colocate" && t.gpuSharingFromConfig !== undefined) {
        errors.push(
            `training.gpuSharing: the whitebox-colocate layout runs vLLM inside the trainer process, so there is no weight update between two roles to share GPUs for: remove gpuSharing, or use layout whitebox-server or blackbox`,
        );
    }
    if (t.ncclCheck && t.gpuSharing !== "shared") {
        errors.push(
            t.gpuSharing === "none"
                ? `training.ncclCheck: the whitebox-colocate layout has no NCCL weight update to check: remove ncclCheck`
                : t.gpuSharing === "network"
                  ? `training.ncclCheck: the check runs both roles on one node; with nodes ${t.nodes} vLLM and the trainer are on different nodes: remove ncclCheck (run nccl-tests between two GPU nodes to check the network instead)`
                  : `training.ncclCheck: the check runs both ranks before vLLM loads, which needs one process tree that sees both roles' GPUs; with gpuSharing 'isolated' each container sees only its own (and the trainer starts only once vLLM is up): set gpuSharing to 'shared', or run nccl_check.py --rank 0 / --rank 1 in the two containers by hand`,
        );
    }
    if (c.images.vllmFromConfig !== undefined && !usesVllmImage(c)) {
        errors.push(
            t.layout !== "blackbox"
                ? `images.vllm: the ${t.layout} layout never runs the vLLM image (${t.layout === "whitebox-server" ? "vllm serve runs from images.trainer" : "vLLM runs inside the trainer"}): remove images.vllm`
                : `images.vllm: not deployed: on Kubernetes with gpuSharing 'shared' one container from images.trainer runs both vLLM and the trainer (so the weight update takes NVLink): remove images.vllm and use a trainer image that has vllm, or set training.gpuSharing to 'isolated' to run vLLM from images.vllm`,
        );
    }
    if (t.numProcesses > t.trainerGpus) {
        errors.push(
            `training.numProcesses: ${t.numProcesses} trainer processes${t.nodes > 1 ? " per node" : ""} need one GPU each, but trainerGpus is ${t.trainerGpus}: lower numProcesses to ${t.trainerGpus} or raise trainerGpus`,
        );
    }
    return errors;
}

/**
 * Multi-node training (training.nodes > 1): the trainer as a JobSet, one pod per node, vLLM on a node
 * of its own. Only on Kubernetes, only for layouts with a separate vLLM, and each role must fit a node.
 */
export function validateNodes(c: PlatformConfig): string[] {
    const t = c.training;
    if (t.nodes === 1) return [];
    const errors: string[] = [];
    if (c.target.kind === "docker") {
        errors.push(
            `training.nodes: the docker target is one GPU host, so the trainer cannot span ${t.nodes} nodes: set nodes to 1 and fit the run on the host's ${t.gpusOnNode} GPUs (training.gpusOnNode), or use target.kind kubernetes, where nodes > 1 runs the trainer as a JobSet (one pod per node) and vLLM on a node of its own`,
        );
    }
    if (t.layout === "whitebox-colocate") {
        errors.push(
            `training.nodes: the whitebox-colocate layout runs vLLM inside the trainer on one node (got nodes ${t.nodes}): set nodes to 1, or use layout whitebox-server or blackbox, where vLLM runs on a node of its own and the trainer spans the nodes`,
        );
        return errors;
    }
    if (t.trainerGpus > t.gpusOnNode) {
        errors.push(
            `training.trainerGpus: each of the ${t.nodes} trainer nodes runs ${t.trainerGpus} trainer GPUs, but a node has ${t.gpusOnNode} (training.gpusOnNode): lower trainerGpus to ${t.gpusOnNode}, or raise gpusOnNode`,
        );
    }
    if (t.vllmGpus > t.gpusOnNode) {
        errors.push(
            `training.vllmGpus: vLLM runs on one node of its own (tensor parallel over its GPUs), but ${t.vllmGpus} GPUs do not fit a node of ${t.gpusOnNode} (training.gpusOnNode): lower vllmGpus to at most ${t.gpusOnNode}`,
        );
    }
    if (t.gpuSharingFromConfig !== undefined) {
        errors.push(
            `training.gpuSharing: with nodes ${t.nodes} vLLM runs on a node of its own, so the roles share no GPUs and the weight update crosses the network: remove gpuSharing`,
        );
    }
    return errors;
}

export function validateTrainer(c: PlatformConfig): string[] {
    const t = c.training;
    if (t.program !== CUSTOM_PROGRAM || t.command !== undefined) return [];
    return [
        `training.command: required with program '${CUSTOM_PROGRAM}': the command that starts your training script baked into the trainer image, e.g. [python, /app/train.py]; or set training.program to one of ${PROGRAM_NAMES.join(", ")} (every recipe names one)`,
    ];
}

export function validateBatches(c: PlatformConfig): string[] {
    const t = c.training;
    if (!grpoBatchRuleApplies(t)) return [];
    const { generationBatch, evalBatch } = c.demand;
    const errors: string[] = [];
    // TRL's num_processes is the whole run's: processes per node x nodes (shown only when nodes > 1).
    const processes = `numProcesses ${t.numProcesses}${t.nodes > 1 ? ` x nodes ${t.nodes}` : ""}`;
    if (generationBatch % t.numGenerations !== 0) {
        const fits = divisors(generationBatch).filter((d) => d > 1);
        errors.push(
            `training.numGenerations: the generation batch perDeviceTrainBatchSize ${t.perDeviceTrainBatchSize} x ${processes} x stepsPerGeneration ${t.stepsPerGeneration} = ${generationBatch} is not divisible by numGenerations ${t.numGenerations}: set numGenerations to one of ${fits.join(", ")}, or make the generation batch a multiple of ${t.numGenerations}`,
        );
    }
    if (evalBatch > 0 && evalBatch % t.numGenerations !== 0) {
        errors.push(
            `training.perDeviceEvalBatchSize: the eval batch perDeviceEvalBatchSize ${t.perDeviceEvalBatchSize} x ${processes} = ${evalBatch} is not divisible by numGenerations ${t.numGenerations}: set perDeviceEvalBatchSize to a multiple of ${t.numGenerations / gcd(t.numGenerations, totalProcesses(t))}`,
        );
    }
    return errors;
}

function gcd(a: number, b: number): number {
    return b === 0 ? a : gcd(b, a % b);
}

export function validateEnv(c: PlatformConfig, e: ResolvedEnv): string[] {
    const image = e.catalog === "custom" && !e.image ? [`envs.${e.name}.image: a custom env needs an image that follows the OpenEnv server contract`] : [];
    return [...image, ...envSessionProblems(e, c.demand)];
}

export function validateSandboxes(c: PlatformConfig): string[] {
    const problems = sandboxProviderProblems(c);
    if (runsSandboxPool(c)) problems.push(...poolSizeProblems(c.sandboxes.poolSize, c.sandboxes.sizing));
    const a = c.sandboxes.autoscale;
    problems.push(
        ...poolAutoscaleProblems({
            enabled: a.enabled,
            maxPoolSize: a.maxPoolSize,
            poolSize: c.sandboxes.poolSize,
            runsWarmPool: runsSandboxPool(c) && c.target.kind === "kubernetes",
            observability: c.observability.enabled,
        }),
    );
    return problems;
}

export function validateIngress(c: PlatformConfig): string[] {
    const i = c.ingress;
    const errors: string[] = [];
    if (c.training.layout === "blackbox" && !i.enabled) {
        errors.push(`ingress.enabled: black-box sandboxes reach vLLM only through the authenticated ingress: set enabled to true`);
    }
    if (c.training.layout !== "blackbox" && i.enabled) {
        errors.push(`ingress.enabled: a ${c.training.layout} run keeps vLLM private to the trainer and has nothing to expose: set enabled to false`);
    }
    if (!i.enabled) return errors;
    if (!i.keys.includes(i.sandboxKey)) {
        errors.push(`ingress.sandboxKey: '${i.sandboxKey}' is not one of ingress.keys (${i.keys.join(", ")}): add it to keys or pick one of them`);
    }
    if (new Set(i.keys).size !== i.keys.length) errors.push(`ingress.keys: key names must be unique (${i.keys.join(", ")})`);
    if (c.target.kind === "docker") {
        if (i.tls.mode === "secret" || i.tls.mode === "cert-manager") {
            errors.push(
                `ingress.tls.mode: '${i.tls.mode}' ${i.tls.mode === "secret" ? "is a Kubernetes TLS Secret" : "issues a Kubernetes TLS Secret"}; on the docker target use 'files' with certFile and keyFile`,
            );
        }
        if (i.exposure === "httproute")
            errors.push(`ingress.exposure: httproute needs the kubernetes target; on docker the proxy publishes its port on the host`);
    } else if (i.tls.mode === "files") {
        errors.push(
            `ingress.tls.mode: 'files' reads certificate files on a Docker host; on Kubernetes use 'secret' with secretName (e.g. issued by cert-manager)`,
        );
    }
    if (i.tls.mode === "secret" && !i.tls.secretName) {
        errors.push(
            `ingress.tls.secretName: tls mode 'secret' needs the name of a kubernetes.io/tls Secret in the ingress namespace (or use tls.mode cert-manager with tls.issuer to have one issued)`,
        );
    }
    // With a cluster stack the issuer may come from it (applyClusterStack checks that it does).
    if (i.tls.mode === "cert-manager" && !i.tls.issuer && c.clusterStack === undefined) {
        errors.push(
            `ingress.tls.issuer: tls mode 'cert-manager' needs the issuer that signs the certificate: set tls.issuer.name (and kind Issuer or ClusterIssuer; kubectl get clusterissuers lists them), or take the cluster stack's (clusterStack)`,
        );
    }
    if (i.tls.mode !== "cert-manager" && i.tls.issuer) {
        errors.push(
            `ingress.tls.issuer: only tls mode 'cert-manager' requests a certificate from an issuer (mode is '${i.tls.mode}'): remove tls.issuer or set tls.mode to cert-manager`,
        );
    }
    if (i.tls.mode === "files" && (!i.tls.certFile || !i.tls.keyFile)) {
        errors.push(`ingress.tls.certFile: tls mode 'files' needs certFile and keyFile (paths on the Docker host)`);
    }
    if (i.exposure === "loadbalancer" && i.tls.mode === "none") {
        errors.push(
            c.target.kind === "kubernetes"
                ? `ingress.tls.mode: a LoadBalancer exposes the keys' bearer tokens to the network in plain HTTP: set tls.mode to cert-manager (with tls.issuer) or secret (or use exposure httproute, where TLS ends at the Gateway)`
                : `ingress.tls.mode: a published port exposes the keys' bearer tokens to the network in plain HTTP: set tls.mode to files with certFile and keyFile`,
        );
    }
    if (i.exposure === "httproute" && !i.gateway) errors.push(`ingress.gateway: exposure httproute needs the parent Gateway (name, namespace)`);
    if (i.exposure !== "cluster" && !i.host) errors.push(`ingress.host: exposure ${i.exposure} needs the public host name sandboxes use`);
    return errors;
}

/**
 * Whether images.vllm is deployed: only black box runs it (the white-box server layout runs vllm serve from the trainer
 * image), and not on Kubernetes with gpuSharing 'shared', where one container from the trainer
 * image runs both vLLM and the trainer.
 */
export function usesVllmImage(c: PlatformConfig): boolean {
    return c.training.layout === "blackbox" && !(c.target.kind === "kubernetes" && c.training.gpuSharing === "shared");
}

/** Every image the stack deploys, with the field that sets it. */
export function deployedImages(c: PlatformConfig): Array<{ field: string; image: string }> {
    const out: Array<{ field: string; image: string }> = [{ field: "images.trainer", image: c.images.trainer }];
    if (usesVllmImage(c)) out.push({ field: "images.vllm", image: c.images.vllm });
    const routed = c.envs.some((e) => !e.external);
    if (c.ingress.enabled || routed) out.push({ field: "images.nginx", image: c.images.nginx });
    for (const e of c.envs) if (!e.external) out.push({ field: `envs.${e.name}.image`, image: e.image });
    if (runsSandboxPool(c)) out.push({ field: "sandboxes.image", image: c.sandboxes.image });
    for (const [i, t] of (c.harbor?.taskImages ?? []).entries()) out.push({ field: `harbor.taskImages[${i}].image`, image: t.image });
    // Metrics sidecars: vLLM's metrics-only listener is images.nginx (listed above with the ingress or
    // an env; else added here), the ingress's exporter and mtail beside each proxy.
    if (c.observability.enabled) {
        if (c.training.layout !== "whitebox-colocate" && !out.some((i) => i.field === "images.nginx"))
            out.push({ field: "images.nginx", image: c.images.nginx });
        if (c.ingress.enabled) {
            out.push({ field: "images.nginxExporter", image: c.images.nginxExporter });
            // A missing mtail image is reported once, by validateObservability.
            if (c.images.mtail !== undefined) out.push({ field: "images.mtail", image: c.images.mtail });
        }
    }
    return out;
}

export function validateProdPinning(c: PlatformConfig): string[] {
    if (!c.prod) return [];
    const errors: string[] = [];
    for (const { field, image } of deployedImages(c)) {
        // A missing required image is reported once, by validateRequiredImages.
        if (image !== "" && !pinnedByDigest(image)) {
            errors.push(
                `${field}: prod stacks pin every image by digest, got '${image}': use <image>@sha256:<64 hex digits> (docker buildx imagetools inspect <image> shows it)`,
            );
        }
    }
    if (c.model.revision === "main") {
        errors.push(`model.revision: prod stacks pin the model revision, got 'main': set it to a commit sha of ${c.model.name}`);
    }
    return errors;
}

/**
 * Plain-text env map entries (each of ENV_MAP_FIELDS, secrets.ts) must not carry secrets: stack files and pod
 * specs keep them in clear. Names are checked here (SECRET_ENV_NAMES), values in secrets.ts; a secret goes in
 * as the map's reference form, which passes.
 */
export function validatePlainEnv(c: PlatformConfig): string[] {
    const refsOnDocker =
        c.target.kind === "docker"
            ? c.envs.flatMap((e) =>
                  Object.keys(e.secretSettings).map(
                      (k) =>
                          `envs.${e.name}.settings.${k}: secretKeyRef names a Kubernetes Secret, and the docker target has none: use a Kubernetes target, or leave the setting out (a Docker env takes no secret)`,
                  ),
              )
            : [];
    const plain: Array<[string, Readonly<Record<string, string>>]> = [
        ["training.extraEnv", plainEnv(c.training.extraEnv)],
        ["training.vllm.extraEnv", plainEnv(c.training.vllm.extraEnv)],
        ...c.envs.map((e): [string, Readonly<Record<string, string>>] => [`envs.${e.name}.settings`, e.settings]),
    ];
    return [
        ...refsOnDocker,
        ...plain.flatMap(([field, env]) =>
            Object.keys(env).flatMap((k) => {
                const rule = secretEnvNameRule(k);
                return rule === undefined
                    ? []
                    : [
                          `${field}.${k}: looks like a secret (its name ${rule.what}: ${rule.why}), but ${field} is plain text in the stack file and the pod spec: remove the value; ${envReferenceFix(field, k)}`,
                      ];
            }),
        ),
    ];
}

/** Kubernetes stacks other than dev name their cluster: never whatever kubectl points at. */
export function validateTargetCluster(c: PlatformConfig): string[] {
    const t = c.target;
    if (t.kind !== "kubernetes" || t.context !== undefined || t.kubeconfig !== undefined || isDevStack(c.stack)) return [];
    return [
        `target.context: required for stack '${c.stack}' (only dev / dev-* stacks may use kubectl's current context, which may point at any cluster): set target.context to the context of the ${c.prod ? "prod" : "intended"} cluster (kubectl config get-contexts), or target.kubeconfig to its kubeconfig file`,
    ];
}

/** A team's namespaces are made by its cluster stack: target.team names a team of clusterStack. */
export function validateTeam(c: PlatformConfig): string[] {
    const t = c.target;
    if (t.kind !== "kubernetes" || t.team === undefined || c.clusterStack !== undefined) return [];
    return [
        `target.team: '${t.team}' names a team of a cluster stack, and this stack names none: set clusterStack to the cluster stack whose teams list '${t.team}' (it makes the team's namespaces), or remove target.team to let the stack make its own namespaces`,
    ];
}

/** Images no default can stand for: the trainer's (it holds the user's script) and the agent-sandbox pool's (it runs the runtime). */
export function validateRequiredImages(c: PlatformConfig): string[] {
    const errors: string[] = [];
    const t = c.training;
    if (c.images.trainer === "") {
        const vllm =
            t.layout !== "blackbox"
                ? ", with vLLM (TRL 1.16 takes 0.22 to 0.31; 0.29 at most beside openenv 0.10)"
                : c.target.kind === "kubernetes" && t.gpuSharing === "shared"
                  ? ", and vLLM 0.22 to 0.31 (one container runs both roles: training.gpuSharing shared)"
                  : "";
        const p = programFacts(t.program);
        if (p !== undefined) {
            errors.push(
                `images.trainer: required: the image holding ${p.file} (${programLabel(p)}) with TRL 1.16${vllm}: ${buildHint(trainerImageName(t.layout))}`,
            );
        } else {
            const script = t.command !== undefined ? ` (training.command: ${t.command.join(" ")})` : "";
            errors.push(
                `images.trainer: required: the image with TRL 1.16 and your training script${script}${vllm}; no public image holds your script: build one (trainer/whitebox/Dockerfile is a start, as npm run images builds trainer-whitebox), push it and set images.trainer (pinned by digest in prod)`,
            );
        }
    }
    if (sandboxProviderRecord(c).defaultImage === "required" && c.sandboxes.image === "") {
        errors.push(
            `sandboxes.image: required for the agent-sandbox pool: the sandbox image (OpenEnv's opencode sandbox image + the runtime every sandbox serves on 8888), pinned by digest: ${buildHint("sandbox")}; the stock image has no runtime, so its pods would never become ready`,
        );
    }
    return errors;
}

/** The example registry of the docs and the stack files: no image is there. */
export const PLACEHOLDER_REGISTRY = "registry.example.com";

/** Images that still name the example registry (plan.md warns; a real `up` refuses them, see index.ts). */
export function placeholderImages(c: PlatformConfig): Array<{ field: string; image: string }> {
    return deployedImages(c).filter((i) => i.image.split("/")[0] === PLACEHOLDER_REGISTRY);
}

export function placeholderImageWarnings(c: PlatformConfig): string[] {
    return placeholderImages(c).map(
        (i) =>
            `${i.field}: ${i.image} is the example registry (${PLACEHOLDER_REGISTRY}), which holds no image: ${imageSource(c, i.field)}; a real \`pulumi up\` refuses it`,
    );
}

/** Set to 1 only by harnesses whose pods pull nothing (the engine tests on simulated nodes). */
export const ALLOW_EXAMPLE_IMAGES_ENV = "AGENT_RL_ALLOW_EXAMPLE_IMAGES";

/** What a real `pulumi up` says of images in the example registry: each refused, with the fix. */
export function exampleImageProblems(c: PlatformConfig): string[] {
    return placeholderImages(c).map(
        (i) => `${i.field}: ${i.image} is in the example registry ${PLACEHOLDER_REGISTRY}, which holds no image: ${imageSource(c, i.field)}`,
    );
}

/** Every cross-field check, all problems together. */
export function validatePlatform(c: PlatformConfig): string[] {
    return [
        ...validateTargetCluster(c),
        ...validateTeam(c),
        ...validateDns(c),
        ...validateRequiredImages(c),
        ...validateGpus(c),
        ...validateTrainer(c),
        ...validateProgram(c),
        ...validateVllmSettings(c),
        ...validateCheckpoints(c),
        ...validateGpuMemory(c),
        ...validateBatches(c),
        ...c.envs.flatMap((e) => validateEnv(c, e)),
        ...validateSandboxes(c),
        ...harborProblems(c),
        ...validateIngress(c),
        ...validateProdPinning(c),
        ...validatePlainEnv(c),
        ...validateObservability(c),
    ];
}
