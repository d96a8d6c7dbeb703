/**
 * TrainingNode under Pulumi mocks, every layout x every target: the literal vLLM and
 * trainer command lines, GPUs, probes, shm, secrets, privacy of ports 8000/51216, and
 * every Kubernetes object against the 1.36 schema, strictly.
 * Run: node --import tsx --test test/training/training-node.test.ts
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { ConfigError, platformNames, type PlatformConfig, type PlatformNames } from "../../components/config";
import { configProblems, parseDockerPoolConfig, parseWithTestImages as parsePlatformConfig, TEST_IMAGES } from "../helpers/config";
import { CHECKPOINT_SELECT_PY } from "../../components/training/checkpoint-select";
import { resolveSandboxPool } from "../../components/sandbox";
import { gpuDeviceRequests, ncclCheckSource, quantityToMiB, resolveTrainingNode, TrainingNode, type TrainingLinks } from "../../components/training";
import { dockerEnv, ofType, runBoth, single, type MockRunResult, type RecordedResource } from "../helpers/mock";
import { loadManifestSchemas, validateManifestStrict } from "../helpers/k8s-schema";
import { manifests } from "../helpers/manifests";
import { isSecret, unwrapSecrets } from "../helpers/secrets";

const HF_SENTINEL = "hf_SENTINEL_TOKEN_do_not_leak_0123456789";
type Target = "kubernetes" | "docker";
type Layout = "whitebox-colocate" | "whitebox-server" | "blackbox";

function rawConfig(layout: Layout, target: Target, extra: Record<string, unknown> = {}): Record<string, unknown> {
    const targetRaw =
        target === "kubernetes"
            ? {
                  kind: "kubernetes",
                  context: "test",
                  gpuProduct: "NVIDIA-H200",
                  nodeSelector: { pool: "gpu" },
                  tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
                  priorityClassName: "training",
                  storageClassName: "fast",
              }
            : { kind: "docker", dataDir: "/srv/agent-rl" };
    const base =
        layout === "blackbox"
            ? // A black box on Docker is refused by the config (DOCKER_BLACKBOX_REFUSED; the Platform refuses it too): the
              // TrainingNode's own Docker code, usable alone, is tested on the docker-pool config (setup parses it with parseDockerPoolConfig).
              { recipe: "opencode-blackbox" }
            : {
                  model: { name: "Qwen/Qwen3-1.7B", revision: "abc123" },
                  training: {
                      layout,
                      gpusOnNode: layout === "whitebox-server" ? 2 : 1,
                      perDeviceTrainBatchSize: 8,
                      gradientAccumulationSteps: 2,
                      numGenerations: 4,
                      perDeviceEvalBatchSize: 8,
                      datasetSize: 170,
                      evalSize: 64,
                      maxModelLen: 8192,
                      program: "train_coding_whitebox_eval",
                  },
                  envs: { coding: { catalog: "coding" } },
              };
    const training = { ...((base as { training?: object }).training ?? {}), ...((extra.training as object | undefined) ?? {}) };
    return { ...base, runId: "run-007", target: targetRaw, ...extra, ...(Object.keys(training).length > 0 ? { training } : {}) };
}

/** `tweak` edits the parsed config: a config the validation refuses, for the components' own code paths. */
function setup(
    layout: Layout,
    target: Target,
    extra: Record<string, unknown> = {},
    tweak: (c: PlatformConfig) => PlatformConfig = (c) => c,
): { config: PlatformConfig; names: PlatformNames; links: TrainingLinks } {
    const parse = layout === "blackbox" && target === "docker" ? parseDockerPoolConfig : parsePlatformConfig;
    const config = tweak(parse(rawConfig(layout, target, extra), "test"));
    const names = platformNames(config);
    const envUrls = Object.fromEntries(Object.entries(names.envs).map(([k, v]) => [k, v.url]));
    // The pool's env for the trainer, as the Platform links it: the agent-sandbox pool's on Kubernetes; on Docker no
    // provider renders a pool (docker and hf are refused), so a stand-in env, named as such.
    const trainerEnv = target === "kubernetes" ? resolveSandboxPool(config, names).trainerEnv : { SANDBOX_POOL: "stand-in-pool" };
    const links: TrainingLinks = layout === "blackbox" ? { envUrls, sandbox: { url: names.ingress.sandboxUrl, trainerEnv } } : { envUrls };
    return { config, names, links };
}

async function build(layout: Layout, target: Target, extra: Record<string, unknown> = {}, tweak?: (c: PlatformConfig) => PlatformConfig) {
    const { config, names, links } = setup(layout, target, extra, tweak);
    const description = resolveTrainingNode(config, names, links);
    let node: TrainingNode | undefined;
    const runs = await runBoth(() => {
        node = new TrainingNode("training", {
            description,
            hfToken: HF_SENTINEL,
            network: target === "docker" ? names.networks.training : undefined,
        });
        return { jobName: node.jobName, internalUrl: node.internalUrl, upstreamAddress: node.upstreamAddress };
    });
    return { config, names, links, description, node: node!, ...runs };
}

const envOf = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).filter((e: any) => "value" in e).map((e: any) => [e.name, e.value]));

// ---- the literal command lines -------------------------------------------------------------
/** The pinned revision abc123 reaches the seed script (no revision flag) as a downloaded directory. */
/** The role runner each role of the shared container runs under (components/training/role-runner.ts). */
const RUNNER = "python3 -I -B /opt/agentrl/observability/role_runner.py";
const PINNED_DIR = "/cache/models/Qwen--Qwen3-1.7B@abc123";
const DOWNLOAD = ["/bin/sh", "-c", `hf download Qwen/Qwen3-1.7B --revision abc123 --local-dir ${PINNED_DIR} --quiet && exec "$@"`, "agentrl-model-download"];
/** The args check (training.argsCheck, on for a named program) runs the script's own parser first. */
const ARGS_CHECK = ["python", "/usr/local/lib/agentrl/args_check.py", "--then-exec"];
/** train_coding_whitebox_eval.py's own dashed flags (components/config/programs.ts). */
const WHITEBOX_TRAINER_COMMON = [
    "python",
    "/app/train_coding_whitebox_eval.py",
    "--model",
    PINNED_DIR,
    "--env-url",
    "ENV_URL",
    "--dataset-size",
    "170",
    "--eval-size",
    "64",
    "--per-device-train-batch-size",
    "8",
    "--gradient-accumulation-steps",
    "2",
    "--num-generations",
    "4",
    "--per-device-eval-batch-size",
    "8",
    "--output-dir",
    "/checkpoints/run-007",
];
const EXPECTED = {
    "whitebox-colocate": {
        vllm: undefined,
        trainer: [...DOWNLOAD, ...ARGS_CHECK, ...WHITEBOX_TRAINER_COMMON, "--vllm-mode", "colocate"],
        gpus: { vllm: [] as number[], trainer: [0] },
    },
    "whitebox-server": {
        // What trl 1.16's deprecated `trl vllm-serve` execs (trl/scripts/vllm_serve.py build_command).
        vllm: [
            "vllm",
            "serve",
            "Qwen/Qwen3-1.7B",
            "--revision",
            "abc123",
            "--host",
            "0.0.0.0",
            "--port",
            "8000",
            "--tensor-parallel-size",
            "1",
            "--data-parallel-size",
            "1",
            "--gpu-memory-utilization",
            "0.9",
            "--max-model-len",
            "8192",
            "--served-model-name",
            "Qwen/Qwen3-1.7B",
            PINNED_DIR,
            "--weight-transfer-config",
            '{"backend": "nccl"}',
            "--logprobs-mode",
            "processed_logprobs",
            "--max-logprobs",
            "-1",
        ],
        trainer: [...DOWNLOAD, ...ARGS_CHECK, ...WHITEBOX_TRAINER_COMMON, "--vllm-mode", "server", "--vllm-server-url", "http://localhost:8000"],
        gpus: { vllm: [0], trainer: [1] },
    },
    blackbox: {
        vllm: [
            "vllm",
            "serve",
            "Qwen/Qwen3-8B",
            "--revision",
            "main",
            "--host",
            "0.0.0.0",
            "--port",
            "8000",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--logprobs-mode",
            "processed_logprobs",
            "--return-tokens-as-token-ids",
            "--max-model-len",
            "32768",
            "--weight-transfer-config",
            '{"backend":"nccl"}',
            "--gpu-memory-utilization",
            "0.9",
            "--dtype",
            "float32",
        ],
        // TRL's opencode_hf_sandbox.py flags (components/config/programs.ts).
        trainer: [
            ...ARGS_CHECK,
            "python",
            "/app/opencode_hf_sandbox.py",
            "--model",
            "Qwen/Qwen3-8B",
            "--n-prompts",
            "32",
            "--gradient-accumulation-steps",
            "1",
            "--num-generations",
            "8",
            "--output-dir",
            "/checkpoints/run-007",
            "--vllm-url",
            "http://localhost:8000",
            "--sandbox-vllm-url",
            "SANDBOX_URL",
            "--sandbox-image",
            "SANDBOX_IMAGE",
            "--max-inflight",
            "8",
            "--max-steps",
            "10",
            "--max-completion-length",
            "4096",
            "--optim",
            "paged_adamw_8bit",
            "--gradient-checkpointing",
        ],
        gpus: { vllm: [0], trainer: [1] },
    },
} as const;

function expectedTrainer(layout: Layout, names: PlatformNames, links?: TrainingLinks, config?: PlatformConfig): string[] {
    const swap: Record<string, string> = {
        // What the agent calls: the pool's forwarder where the pool's env names one (agent-sandbox), else the ingress.
        SANDBOX_URL: links?.sandbox?.trainerEnv.SANDBOX_UPSTREAM_URL ?? names.ingress.sandboxUrl,
        ENV_URL: names.envs.coding?.url ?? "",
        SANDBOX_IMAGE: config?.sandboxes.image ?? TEST_IMAGES.sandbox,
    };
    return EXPECTED[layout].trainer.map((a) => swap[a] ?? a);
}

before(async () => {
    await loadManifestSchemas();
});

for (const layout of ["whitebox-colocate", "whitebox-server", "blackbox"] as const) {
    // The two-container Kubernetes pod (gpuSharing isolated); the default one-container pod is
    // tested under "GPU sharing" below.
    describe(`${layout} on kubernetes (two containers: gpuSharing isolated)`, () => {
        let b: Awaited<ReturnType<typeof build>>;
        before(async () => {
            b = await build(layout, "kubernetes", layout === "whitebox-colocate" ? {} : { training: { gpuSharing: "isolated" } });
        });

        /** The Job's pod spec in each run (update, preview). */
        const jobPods = () => [b.update, b.preview].map((run) => single(run.resources, "kubernetes:batch/v1:Job").inputs.spec.template.spec);

        test("the Job's one container is the trainer, with its literal command line", () => {
            for (const pod of jobPods()) {
                const trainer = pod.containers[0];
                assert.equal(pod.containers.length, 1);
                assert.equal(trainer.name, "trainer");
                assert.deepEqual([...(trainer.command ?? []), ...trainer.args], expectedTrainer(layout, b.names, b.links));
            }
        });

        test("vLLM is a native sidecar (restartPolicy Always) with its literal command line on 8000; colocate has none", () => {
            for (const pod of jobPods()) {
                const expectedVllm = EXPECTED[layout].vllm;
                if (expectedVllm === undefined) {
                    assert.equal(pod.initContainers, undefined, "colocate: vLLM runs inside the trainer, no sidecar");
                } else {
                    assert.equal(pod.initContainers.length, 1);
                    const vllm = pod.initContainers[0];
                    assert.equal(vllm.name, "vllm");
                    assert.equal(vllm.restartPolicy, "Always");
                    assert.deepEqual([...vllm.command, ...vllm.args], [...expectedVllm]);
                    assert.deepEqual(vllm.ports, [{ name: "http", containerPort: 8000, protocol: "TCP" }]);
                    assert.equal(vllm.image, layout === "blackbox" ? b.config.images.vllm : b.config.images.trainer);
                }
            }
        });

        test("vLLM never gets --api-key; its dev mode (weight updates) for every vLLM server, never the trainer's", () => {
            for (const pod of jobPods()) {
                if (EXPECTED[layout].vllm !== undefined) {
                    const vllm = pod.initContainers[0];
                    assert.ok(!JSON.stringify(vllm).includes("--api-key"), "vLLM never gets --api-key");
                    // trl 1.16's vllm-serve sets it too (trl/scripts/vllm_serve.py main): the trainer's weight updates need it.
                    assert.equal(envOf(vllm).VLLM_SERVER_DEV_MODE, "1");
                }
                assert.equal(envOf(pod.containers[0]).VLLM_SERVER_DEV_MODE, undefined, "dev mode is vLLM's, never the trainer's");
            }
        });

        test("trainer env: run, env URLs, sandbox link; secrets only by secretKeyRef", () => {
            const job = single(b.update.resources, "kubernetes:batch/v1:Job").inputs;
            const trainer = job.spec.template.spec.containers[0];
            const env = envOf(trainer);
            assert.equal(env.RUN_ID, "run-007");
            assert.equal(env.OUTPUT_DIR, "/checkpoints/run-007");
            assert.equal(env.HF_HOME, "/cache/huggingface");
            assert.equal(env.VLLM_URL, "http://localhost:8000");
            if (layout === "blackbox") {
                // The pool's env, every entry as linked (SANDBOX_PROVIDER among them: the pool's, not the training node's).
                const pool = b.links.sandbox!.trainerEnv;
                assert.equal(pool.SANDBOX_PROVIDER, "agent-sandbox");
                for (const [k, v] of Object.entries(pool)) assert.equal(env[k], v, k);
            } else {
                assert.equal(env.ENV_CODING_URL, b.names.envs.coding.url);
            }
            const refs = (trainer.env as any[]).filter((e) => e.valueFrom).map((e) => [e.name, e.valueFrom.secretKeyRef.name, e.valueFrom.secretKeyRef.key]);
            const expectedRefs: string[][] = [["HF_TOKEN", b.names.training.hfSecret, "HF_TOKEN"]];
            // Black box on the agent-sandbox pool: the ingress key is the sandbox forwarder's alone, never the trainer's.
            assert.deepEqual(refs, expectedRefs);
        });

        test("the HF token appears only in its Secret's stringData", () => {
            for (const run of [b.update, b.preview]) {
                for (const r of run.resources) {
                    const text = JSON.stringify(r.inputs);
                    for (const [sentinel, secretName] of [[HF_SENTINEL, b.names.training.hfSecret]]) {
                        if (!text.includes(sentinel)) continue;
                        assert.equal(r.type, "kubernetes:core/v1:Secret", `${sentinel.slice(0, 12)} leaked into ${r.type} ${r.name}`);
                        assert.equal(r.inputs.metadata.name, secretName);
                        const { stringData, ...rest } = r.inputs;
                        assert.ok(!JSON.stringify(rest).includes(sentinel), "only inside stringData");
                        assert.ok(isSecret(stringData), "stringData stays a Pulumi secret");
                        assert.ok(JSON.stringify(unwrapSecrets(stringData)).includes(sentinel));
                    }
                }
                const secrets = ofType(run.resources, "kubernetes:core/v1:Secret")
                    .map((s) => s.inputs.metadata.name)
                    .sort();
                // Black box on the agent-sandbox pool: no container references the ingress key, so no Secret holds a copy here.
                assert.deepEqual(secrets, [b.names.training.hfSecret]);
            }
        });

        test("GPUs: requests == limits with the configured resource name, one container per GPU group", () => {
            const pod = single(b.update.resources, "kubernetes:batch/v1:Job").inputs.spec.template.spec;
            const trainer = pod.containers[0];
            assert.equal(trainer.resources.requests["nvidia.com/gpu"], String(EXPECTED[layout].gpus.trainer.length));
            assert.deepEqual(trainer.resources.requests, trainer.resources.limits);
            if (pod.initContainers) {
                const vllm = pod.initContainers[0];
                assert.equal(vllm.resources.requests["nvidia.com/gpu"], "1");
                assert.deepEqual(vllm.resources.requests, vllm.resources.limits);
            }
            assert.deepEqual(b.node.gpuLayout, EXPECTED[layout].gpus);
            assert.deepEqual(pod.nodeSelector, { pool: "gpu", "nvidia.com/gpu.product": "NVIDIA-H200" });
            assert.deepEqual(pod.tolerations, [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }]);
            assert.equal(pod.priorityClassName, "training");
        });

        test("startup probe covers the model load time; liveness and readiness exist; health route per server", () => {
            const pod = single(b.update.resources, "kubernetes:batch/v1:Job").inputs.spec.template.spec;
            if (layout === "whitebox-colocate") {
                assert.equal(pod.containers[0].startupProbe, undefined);
                return;
            }
            const vllm = pod.initContainers[0];
            const path = "/health"; // trl 1.16 vllm-serve execs vllm serve: /health/ only redirects
            for (const p of [vllm.startupProbe, vllm.livenessProbe, vllm.readinessProbe]) assert.deepEqual(p.httpGet, { path, port: 8000 });
            assert.ok(vllm.startupProbe.periodSeconds * vllm.startupProbe.failureThreshold >= b.config.training.modelLoadSeconds);
            assert.equal(b.config.training.modelLoadSeconds, 1200);
        });

        test("Job: run id in the name, skipAwait, backoffLimit, deadline, podFailurePolicy on the trainer, restartPolicy Never", () => {
            const job = single(b.update.resources, "kubernetes:batch/v1:Job").inputs;
            assert.match(job.metadata.name, /^train-run-007-[0-9a-f]{8}$/, "the run's name plus a hash of its pod template");
            assert.equal(job.metadata.namespace, "arl-test-training");
            assert.equal(job.metadata.annotations["pulumi.com/skipAwait"], "true");
            assert.equal(job.spec.backoffLimit, 0);
            assert.equal(job.spec.activeDeadlineSeconds, 6 * 3600);
            assert.deepEqual(job.spec.podFailurePolicy.rules[0], {
                action: "FailJob",
                onExitCodes: { containerName: "trainer", operator: "NotIn", values: [0] },
            });
            assert.equal(job.spec.template.spec.restartPolicy, "Never");
            assert.deepEqual(job.spec.template.metadata.labels, {
                "app.kubernetes.io/name": "trainer",
                "app.kubernetes.io/instance": "train-run-007",
                "app.kubernetes.io/part-of": "agent-rl-infra",
            });
        });

        test("/dev/shm is a memory-backed emptyDir with a size limit, mounted in both containers; volumes per run", () => {
            const pod = single(b.update.resources, "kubernetes:batch/v1:Job").inputs.spec.template.spec;
            assert.deepEqual(
                pod.volumes.find((v: any) => v.name === "dshm"),
                { name: "dshm", emptyDir: { medium: "Memory", sizeLimit: "16Gi" } },
            );
            for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
                assert.ok(
                    c.volumeMounts.some((m: any) => m.name === "dshm" && m.mountPath === "/dev/shm"),
                    `${c.name} mounts /dev/shm`,
                );
                assert.ok(
                    c.volumeMounts.some((m: any) => m.name === "model-cache" && m.mountPath === "/cache"),
                    `${c.name} mounts the model cache`,
                );
            }
            assert.ok(pod.containers[0].volumeMounts.some((m: any) => m.name === "checkpoints" && m.mountPath === "/checkpoints"));
            const pvcs = ofType(b.update.resources, "kubernetes:core/v1:PersistentVolumeClaim").map((p) => [
                p.inputs.metadata.name,
                p.inputs.spec.storageClassName,
                p.inputs.spec.resources.requests.storage,
            ]);
            // The black-box setup is the opencode recipe, sized by the rule (components/config/checkpoints.ts); the others keep the default.
            assert.deepEqual(pvcs, [
                ["model-cache", "fast", "200Gi"],
                ["checkpoints", "fast", layout === "blackbox" ? "110Gi" : "100Gi"],
            ]);
        });

        test("nothing public: no LoadBalancer/NodePort, no HTTPRoute; black box only a ClusterIP on 8000 admitted from the ingress", () => {
            for (const run of [b.update, b.preview]) {
                assert.equal(run.resources.filter((r) => r.type.includes("HTTPRoute") || r.type.includes("Ingress:") || r.type.includes("Gateway")).length, 0);
                const services = ofType(run.resources, "kubernetes:core/v1:Service");
                for (const s of services) assert.equal(s.inputs.spec.type, "ClusterIP");
                const policy = ofType(run.resources, "kubernetes:networking.k8s.io/v1:NetworkPolicy").find(
                    (p) => p.inputs.metadata.name === "train-run-007",
                )!.inputs;
                assert.deepEqual(policy.spec.podSelector.matchLabels, single(run.resources, "kubernetes:batch/v1:Job").inputs.spec.template.metadata.labels);
                if (layout === "blackbox") {
                    assert.equal(services.length, 1);
                    const svc = services[0].inputs;
                    assert.equal(svc.metadata.name, b.names.training.vllmService);
                    assert.deepEqual(svc.spec.ports, [{ name: "http", port: 8000, targetPort: 8000, protocol: "TCP" }]);
                    assert.deepEqual(svc.spec.selector, policy.spec.podSelector.matchLabels);
                    assert.deepEqual(policy.spec.ingress, [
                        {
                            from: [
                                {
                                    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "arl-test-ingress" } },
                                    podSelector: {
                                        matchLabels: {
                                            "app.kubernetes.io/name": "vllm-ingress",
                                            "app.kubernetes.io/instance": "vllm-ingress",
                                            "app.kubernetes.io/part-of": "agent-rl-infra",
                                        },
                                    },
                                },
                            ],
                            ports: [{ protocol: "TCP", port: 8000 }],
                        },
                    ]);
                    assert.ok(!JSON.stringify(policy).includes("51216"));
                } else {
                    assert.equal(services.length, 0, "white box: no Service at all");
                    assert.deepEqual(policy.spec.ingress, [], "white box: nothing may reach the pod");
                }
            }
        });

        test("ServiceAccount: token mounted only for a black-box trainer claiming agent-sandboxes", () => {
            const sa = single(b.update.resources, "kubernetes:core/v1:ServiceAccount").inputs;
            assert.equal(sa.metadata.name, "trainer");
            assert.equal(sa.automountServiceAccountToken, false);
            const pod = single(b.update.resources, "kubernetes:batch/v1:Job").inputs.spec.template.spec;
            assert.equal(pod.serviceAccountName, "trainer");
            assert.equal(pod.automountServiceAccountToken, false, "never for the whole pod");
            const tokenMount = (c: any) => (c.volumeMounts ?? []).find((m: any) => m.mountPath === "/var/run/secrets/kubernetes.io/serviceaccount");
            assert.deepEqual(
                tokenMount(pod.containers[0]),
                layout === "blackbox" ? { name: "api-token", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount", readOnly: true } : undefined,
                "the trainer gets the token only when it claims sandboxes",
            );
            for (const c of pod.initContainers ?? []) assert.equal(tokenMount(c), undefined, "never the vLLM sidecar");
            if (layout === "blackbox") {
                const vol = pod.volumes.find((v: any) => v.name === "api-token");
                assert.deepEqual(
                    vol.projected.sources.map((s: any) => Object.keys(s)[0]),
                    ["serviceAccountToken", "configMap", "downwardAPI"],
                );
            }
            for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
                assert.deepEqual(c.securityContext, { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } });
            }
        });

        test("trainer egress: DNS, this stack's peers, the API server only when claiming sandboxes, public 443; never the metadata service", () => {
            const egress = ofType(b.update.resources, "kubernetes:networking.k8s.io/v1:NetworkPolicy").find(
                (p) => p.inputs.metadata.name === "train-run-007-egress",
            )!.inputs;
            assert.deepEqual(egress.spec.policyTypes, ["Egress"]);
            const rules = egress.spec.egress as any[];
            assert.deepEqual(rules[0].ports, [
                { protocol: "UDP", port: 53 },
                { protocol: "TCP", port: 53 },
            ]);
            const internet = rules[rules.length - 1];
            assert.equal(internet.to[0].ipBlock.cidr, "0.0.0.0/0");
            assert.ok(internet.to[0].ipBlock.except.includes("169.254.0.0/16") && internet.to[0].ipBlock.except.includes("10.0.0.0/8"));
            assert.deepEqual(internet.ports, [{ protocol: "TCP", port: 443 }]);
            const api = rules.find((r) => r.ports?.some((p: any) => p.port === 6443));
            assert.equal(api !== undefined, layout === "blackbox", "API server only for the black-box trainer (it claims sandboxes)");
        });

        test("outputs: internal URL, upstream address only in black box", async () => {
            assert.match(String(b.update.outputs?.jobName), /^train-run-007-[0-9a-f]{8}$/);
            assert.equal(b.update.outputs?.internalUrl, "http://localhost:8000");
            assert.equal(b.update.outputs?.upstreamAddress, layout === "blackbox" ? "vllm-run-007.arl-test-training.svc.cluster.local:8000" : undefined);
        });

        test("every Kubernetes object passes the 1.36 schema strictly (unknown fields are errors)", () => {
            for (const run of [b.update, b.preview]) {
                const objs = manifests(run.resources);
                assert.ok(objs.length >= 5);
                for (const o of objs) assert.deepEqual(validateManifestStrict(o), [], `${o.kind} ${o.metadata?.name}`);
            }
        });
    });

    describe(`${layout} on docker`, () => {
        let b: Awaited<ReturnType<typeof build>>;
        before(async () => {
            b = await build(layout, "docker");
        });
        const containers = (rs: readonly RecordedResource[]) => ofType(rs, "docker:index/container:Container");

        /** The run's containers: the trainer (named after the run's job) and, unless colocated, vLLM. */
        const roles = (run: MockRunResult) => {
            const cs = containers(run.resources);
            const trainer = cs.find((c) => c.inputs.name === b.names.training.job)!;
            assert.ok(trainer, "trainer container named after the run's job");
            return { cs, trainer, vllm: cs.find((c) => c.inputs.name === b.names.training.vllm)! };
        };
        const colocated = EXPECTED[layout].vllm === undefined;

        test("containers hold the literal command lines (colocate: only the trainer)", () => {
            for (const run of [b.update, b.preview]) {
                const { cs, trainer, vllm } = roles(run);
                assert.deepEqual([...(trainer.inputs.entrypoints ?? []), ...trainer.inputs.command], expectedTrainer(layout, b.names, b.links));
                const vllmArgs = EXPECTED[layout].vllm;
                if (vllmArgs === undefined) {
                    assert.equal(cs.length, 1, "colocate: only the trainer");
                } else {
                    assert.equal(cs.length, 2);
                    assert.deepEqual([...vllm.inputs.entrypoints, ...vllm.inputs.command], [...vllmArgs]);
                }
            }
        });

        test("GPUs: colocate takes GPU 0; shared, both get every training GPU and CUDA_VISIBLE_DEVICES splits them", () => {
            for (const run of [b.update, b.preview]) {
                const { trainer, vllm } = roles(run);
                if (colocated) {
                    assert.deepEqual(trainer.inputs.deviceRequests, [{ driver: "nvidia", deviceIds: ["0"], capabilities: ["gpu"] }]);
                } else {
                    // gpuSharing shared (the default): both get every training GPU, CUDA_VISIBLE_DEVICES splits them.
                    for (const c of [vllm, trainer])
                        assert.deepEqual(c.inputs.deviceRequests, [{ driver: "nvidia", deviceIds: ["0", "1"], capabilities: ["gpu"] }]);
                    assert.equal(dockerEnv(vllm).CUDA_VISIBLE_DEVICES, "0");
                    assert.equal(dockerEnv(trainer).CUDA_VISIBLE_DEVICES, "1");
                    assert.equal(vllm.inputs.gpus, undefined);
                }
            }
        });

        test("only the private training network (the trainer joins vLLM's); no port published on the host", () => {
            for (const run of [b.update, b.preview]) {
                const { cs, trainer, vllm } = roles(run);
                if (colocated) {
                    assert.deepEqual(trainer.inputs.networksAdvanced, [{ name: b.names.networks.training }]);
                } else {
                    assert.deepEqual(vllm.inputs.networksAdvanced, [
                        { name: b.names.networks.training, aliases: layout === "blackbox" ? [b.names.training.vllmService] : [] },
                    ]);
                    // By vLLM's container id (what dockerd stores; test/stack/docker-lifecycle.test.ts): unknown in a preview.
                    if (run === b.preview) assert.equal(trainer.inputs.networkMode?.__pulumiUnknown, true);
                    else assert.equal(trainer.inputs.networkMode, `container:${vllm.name}-id`);
                    assert.equal(trainer.inputs.networksAdvanced, undefined);
                }
                for (const c of cs) assert.equal(c.inputs.ports, undefined, "no port published on the host");
            }
        });

        test("labels a log shipper keys on: role, container, part-of and the run on each container", () => {
            for (const run of [b.update, b.preview]) {
                const { trainer, vllm } = roles(run);
                const want = (role: string, c: { inputs: { name?: string } }) => [
                    { label: "app.kubernetes.io/name", value: role },
                    { label: "app.kubernetes.io/instance", value: c.inputs.name },
                    { label: "app.kubernetes.io/part-of", value: "agent-rl-infra" },
                    { label: "agentrl.dev/run", value: b.config.runId },
                ];
                assert.deepEqual(trainer.inputs.labels, want("trainer", trainer));
                if (!colocated) assert.deepEqual(vllm.inputs.labels, want("vllm", vllm));
            }
        });

        test("16 GiB of shared memory; the trainer shares vLLM's IPC namespace", () => {
            for (const run of [b.update, b.preview]) {
                const { trainer, vllm } = roles(run);
                if (colocated) {
                    assert.equal(trainer.inputs.shmSize, 16384);
                } else {
                    assert.equal(vllm.inputs.ipcMode, "shareable");
                    assert.equal(vllm.inputs.shmSize, 16384);
                    // By vLLM's container id, as the network: unknown in a preview.
                    if (run === b.preview) assert.equal(trainer.inputs.ipcMode?.__pulumiUnknown, true);
                    else assert.equal(trainer.inputs.ipcMode, `container:${vllm.name}-id`);
                }
            }
        });

        if (!colocated) {
            test("vLLM first: created only once /health answers, with time to load the model", () => {
                for (const run of [b.update, b.preview]) {
                    const { vllm } = roles(run);
                    assert.equal(vllm.inputs.wait, true);
                    assert.ok(vllm.inputs.waitTimeout >= b.config.training.modelLoadSeconds);
                    const hc = vllm.inputs.healthcheck;
                    assert.ok(hc.tests.join(" ").includes("http://localhost:8000/health'"));
                    assert.equal(hc.startPeriod, "1200s");
                }
            });
        }

        test("vLLM's dev mode (weight updates) for every vLLM server, never an --api-key; the trainer has no dev mode", () => {
            for (const run of [b.update, b.preview]) {
                const { trainer, vllm } = roles(run);
                if (!colocated) {
                    assert.equal(dockerEnv(vllm).VLLM_SERVER_DEV_MODE, "1");
                    assert.ok(!JSON.stringify(vllm.inputs).includes("--api-key"));
                }
                assert.equal(dockerEnv(trainer).VLLM_SERVER_DEV_MODE, undefined);
            }
        });

        test("the trainer runs once: never restarted, not required to keep running", () => {
            for (const run of [b.update, b.preview]) {
                const { trainer } = roles(run);
                assert.equal(trainer.inputs.mustRun, false);
                assert.equal(trainer.inputs.restart, "no");
            }
        });

        test("pinned images pulled once each and kept; volumes under the data dir", () => {
            const images = ofType(b.update.resources, "docker:index/remoteImage:RemoteImage").map((r) => [r.inputs.name, r.inputs.keepLocally]);
            const expected =
                layout === "blackbox"
                    ? [
                          [b.config.images.vllm, true],
                          [b.config.images.trainer, true],
                      ]
                    : [[b.config.images.trainer, true]];
            assert.deepEqual(images, expected);
            const trainer = containers(b.update.resources).find((c) => c.inputs.name === b.names.training.job)!;
            assert.deepEqual(trainer.inputs.volumes, [
                { hostPath: "/srv/agent-rl/arl-test-model-cache", containerPath: "/cache" },
                { hostPath: "/srv/agent-rl/arl-test-checkpoints", containerPath: "/checkpoints" },
            ]);
        });

        test("secrets: only in the containers' env, as HF_TOKEN; the sandbox key in no container", () => {
            for (const run of [b.update, b.preview]) {
                for (const r of run.resources) {
                    const text = JSON.stringify(r.inputs);
                    if (!text.includes(HF_SENTINEL)) continue;
                    assert.equal(r.type, "docker:index/container:Container", `secret leaked into ${r.type}`);
                    const { envs, ...rest } = r.inputs;
                    assert.ok(!JSON.stringify(rest).includes(HF_SENTINEL));
                    assert.ok(isSecret(envs), "the env list stays a Pulumi secret");
                    assert.ok((unwrapSecrets(envs) as string[]).every((e) => !e.includes("SENTINEL") || e === `HF_TOKEN=${HF_SENTINEL}`));
                }
            }
            const trainer = containers(b.update.resources).find((c) => c.inputs.name === b.names.training.job)!;
            assert.equal(dockerEnv(trainer).HF_TOKEN, HF_SENTINEL);
            // The black box's sandbox key is the sandbox side's (the forwarder's on Kubernetes), never the trainer's env.
            assert.equal(dockerEnv(trainer).SANDBOX_API_KEY, undefined);
        });
    });
}

describe("resolveTrainingNode", () => {
    test("resume (a custom script): wraps the trainer so it picks this run's checkpoint on the shared volume (or the one named)", () => {
        const { config, names, links } = setup("whitebox-colocate", "kubernetes", {});
        const custom = { ...config.training, program: "custom" as const, command: ["python", "/app/train.py"], argsCheck: false, resumeFromCheckpoint: true };
        const resumed = resolveTrainingNode({ ...config, training: custom }, names, links);
        assert.deepEqual(resumed.trainer.command?.slice(0, 8), ["python", "-c", CHECKPOINT_SELECT_PY, "resume", "/checkpoints", config.runId, "", "--"]);
        assert.deepEqual(resumed.trainer.command?.slice(8, 12), ["python", "/app/train.py", "--model_name_or_path", "Qwen/Qwen3-1.7B"]);
        const named = resolveTrainingNode({ ...config, training: { ...custom, resumeFromCheckpoint: "r0/checkpoint-20" } }, names, links);
        assert.equal(named.trainer.command?.[6], "r0/checkpoint-20");
    });

    test("several trainer processes turn python into accelerate launch --num_processes", () => {
        const { config, names, links } = setup("whitebox-server", "kubernetes", {});
        const c = { ...config, training: { ...config.training, gpusOnNode: 3, trainerGpus: 2, numProcesses: 2 } };
        const d = resolveTrainingNode(c, names, links);
        const launch = d.trainer.command!.slice(DOWNLOAD.length + ARGS_CHECK.length, DOWNLOAD.length + ARGS_CHECK.length + 5);
        assert.deepEqual(launch, ["accelerate", "launch", "--num_processes", "2", "/app/train_coding_whitebox_eval.py"]);
        assert.deepEqual(d.gpuLayout, { vllm: [0], trainer: [1, 2] });
        assert.deepEqual(gpuDeviceRequests(d.gpuLayout.trainer), [{ driver: "nvidia", deviceIds: ["1", "2"], capabilities: ["gpu"] }]);
    });

    test("every problem at once, each naming the field and the fix", () => {
        const { config, names } = setup("blackbox", "kubernetes", {});
        const c = {
            ...config,
            training: { ...config.training, program: "custom", command: undefined, numProcesses: 2, extraEnv: { HF_TOKEN: "x", RUN_ID: "y" } },
        } as const;
        assert.deepEqual(
            configProblems(() => resolveTrainingNode(c, names, { envUrls: {} })),
            [
                "training.layout: the black-box trainer needs the ingress URL sandboxes reach vLLM through: the Platform must pass links.sandbox",
                "training.command: required: the command that starts the training script baked into the trainer image (e.g. [python, /app/train.py]; 2 processes need 'accelerate launch <script>')",
                "training.extraEnv.HF_TOKEN: HF_TOKEN is set by the platform (a secret): remove it from extraEnv",
                "training.extraEnv.RUN_ID: RUN_ID is set by the platform (from the run's config and links): remove it from extraEnv",
            ],
        );
    });

    test("a trainer that mints rollout keys without the verifier's admin key fails before any resource registers", async () => {
        const { config, names, links } = setup("blackbox", "kubernetes");
        const description = resolveTrainingNode(config, names, { ...links, sandbox: { ...links.sandbox!, mintsRolloutKeys: true } });
        assert.ok(description.requiredSecrets.includes("rolloutAdminKey"));
        assert.ok(
            !(description.requiredSecrets as readonly string[]).includes("sandboxKey"),
            "the trainer never needs the sandbox key: each pod's forwarder holds it",
        );
        await assert.rejects(
            runBoth(() => {
                new TrainingNode("training", { description, hfToken: HF_SENTINEL });
            }),
            /rolloutAdminKey: the trainer mints a key per rollout at the ingress's verifier/,
        );
    });

    test("quantities convert to Docker megabytes", () => {
        assert.equal(quantityToMiB("16Gi"), 16384);
        assert.equal(quantityToMiB("512Mi"), 512);
        assert.equal(quantityToMiB("1G"), 954);
    });
});

describe("validateManifestStrict", () => {
    test("catches a `startupprobe` typo and a wrong type", () => {
        const job = {
            apiVersion: "batch/v1",
            kind: "Job",
            metadata: { name: "t" },
            spec: {
                template: {
                    spec: { restartPolicy: "Never", containers: [{ name: "c", image: "i", startupprobe: { httpGet: { path: "/health", port: 8000 } } }] },
                },
            },
        };
        const problems = validateManifestStrict(job);
        assert.equal(problems.length, 1);
        assert.match(problems[0], /^\/spec\/template\/spec\/containers\/0\/startupprobe: unknown field "startupprobe"/);
        assert.deepEqual(
            validateManifestStrict({ ...job, spec: { ...job.spec, backoffLimit: "0" } }).filter((p) => p.includes("backoffLimit")),
            ['/spec/backoffLimit: must be integer {"type":"integer"}'],
        );
        const fixed = structuredClone(job) as any;
        fixed.spec.template.spec.containers[0].startupProbe = fixed.spec.template.spec.containers[0].startupprobe;
        delete fixed.spec.template.spec.containers[0].startupprobe;
        assert.deepEqual(validateManifestStrict(fixed), []);
    });
});

// ---- GPU sharing and the NCCL weight sync (issue: weight sync under container GPU isolation) ----
describe("GPU sharing: every layout x target renders its sharing and NCCL settings", () => {
    const jobPod = (rs: readonly RecordedResource[]) => single(rs, "kubernetes:batch/v1:Job").inputs.spec.template.spec;
    const dockerContainers = (rs: readonly RecordedResource[]) => ofType(rs, "docker:index/container:Container");

    for (const layout of ["whitebox-server", "blackbox"] as const) {
        describe(`${layout} on kubernetes, default shared`, () => {
            let b: Awaited<ReturnType<typeof build>>;
            before(async () => {
                b = await build(layout, "kubernetes");
            });
            /** The Job's one container in each run (update, preview). */
            const jobContainers = () => [b.update, b.preview].map((run) => jobPod(run.resources).containers[0]);

            test("the description says shared, over P2P", () => {
                assert.equal(b.description.gpuSharing.mode, "shared");
                assert.match(b.description.gpuSharing.transport, /^P2P/);
            });

            test("one container named trainer, no sidecar: the trainer image runs both roles", () => {
                for (const run of [b.update, b.preview]) {
                    const pod = jobPod(run.resources);
                    assert.equal(pod.initContainers, undefined, "no sidecar: vLLM runs under the supervisor");
                    assert.equal(pod.containers.length, 1);
                    const c = pod.containers[0];
                    assert.equal(c.name, "trainer", "podFailurePolicy and kubectl logs -c trainer still name it");
                    assert.equal(c.image, b.config.images.trainer, "one image runs both roles");
                }
            });

            test("the container takes every GPU, requests = limits", () => {
                for (const c of jobContainers()) {
                    assert.deepEqual(c.resources.requests["nvidia.com/gpu"], "2");
                    assert.deepEqual(c.resources.requests, c.resources.limits);
                    assert.equal(c.resources.requests.cpu, "16");
                    assert.equal(c.resources.requests.memory, "128Gi");
                }
            });

            test("the supervisor starts vLLM and the trainer (its literal args) each on its own GPU; vLLM never sees the sandbox key", () => {
                for (const c of jobContainers()) {
                    assert.deepEqual(c.command.slice(0, 2), ["/bin/sh", "-c"]);
                    const script: string = c.command[2];
                    assert.ok(
                        script.includes(
                            `CUDA_VISIBLE_DEVICES=0 VLLM_SERVER_DEV_MODE=1 ${RUNNER} --role vllm -- vllm serve ${layout === "blackbox" ? "Qwen/Qwen3-8B" : "Qwen/Qwen3-1.7B"}`,
                        ),
                        script,
                    );
                    // Observability off: each role still under the role runner (its lines prefixed), no metrics flags.
                    assert.ok(script.includes(`env CUDA_VISIBLE_DEVICES=1 ${RUNNER} --role trainer -- `), "the trainer gets its own GPU set");
                    assert.doesNotMatch(script, /--metrics-listen|--vllm-health-url/);
                    assert.ok(c.volumeMounts.some((m: any) => m.name === "metrics-programs" && m.mountPath === "/opt/agentrl/observability" && m.readOnly));
                    for (const arg of expectedTrainer(layout, b.names, b.links))
                        assert.ok(script.includes(/[{"$ ]/.test(arg) ? `'${arg}'` : arg), `trainer arg ${arg}`);
                    // The agent-sandbox pool's forwarders hold the ingress key: none in the training pod at all.
                    if (layout === "blackbox") assert.ok(!JSON.stringify(c.env ?? []).includes("SANDBOX_API_KEY"), "no sandbox key in the training pod");
                }
            });

            test("NCCL on loopback with P2P on; GPU sets and dev mode per process, not for the container", () => {
                for (const c of jobContainers()) {
                    const env = envOf(c);
                    assert.equal(env.NCCL_SOCKET_IFNAME, "lo");
                    assert.equal(env.CUDA_DEVICE_ORDER, "PCI_BUS_ID");
                    assert.equal(env.CUDA_VISIBLE_DEVICES, undefined, "set per process by the supervisor, not for the container");
                    assert.equal(env.NCCL_P2P_DISABLE, undefined, "P2P stays on");
                    assert.equal(env.VLLM_SERVER_DEV_MODE, undefined, "dev mode only on vLLM's command line");
                }
            });

            test("the container starts up on vLLM's /health and exposes its port 8000; no liveness probe (the supervisor watches vLLM)", () => {
                for (const c of jobContainers()) {
                    assert.deepEqual(c.startupProbe.httpGet, { path: "/health", port: 8000 });
                    assert.deepEqual(c.readinessProbe.httpGet, { path: "/health", port: 8000 });
                    // A kubelet kill here takes the trainer with it and FailJob ends the run: a busy vLLM must not.
                    assert.equal(c.livenessProbe, undefined);
                    assert.match(c.command[2], /has not answered http:\/\/127\.0\.0\.1:8000\/health for 300 s/);
                    assert.deepEqual(c.ports, [{ name: "http", containerPort: 8000, protocol: "TCP" }]);
                }
            });

            test("every Kubernetes object passes the 1.36 schema strictly", () => {
                for (const o of manifests(b.update.resources)) assert.deepEqual(validateManifestStrict(o), [], `${o.kind} ${o.metadata?.name}`);
            });
        });

        test(`${layout} on kubernetes, isolated: vLLM sidecar + trainer, both with NCCL over shared memory`, async () => {
            const b = await build(layout, "kubernetes", { training: { gpuSharing: "isolated" } });
            const pod = jobPod(b.update.resources);
            for (const c of [pod.initContainers[0], pod.containers[0]]) {
                const env = envOf(c);
                assert.deepEqual([env.NCCL_P2P_DISABLE, env.NCCL_CUMEM_ENABLE, env.NCCL_SOCKET_IFNAME], ["1", "0", "lo"], c.name);
                assert.equal(env.CUDA_VISIBLE_DEVICES, undefined, "the device plugin already isolates");
                assert.equal(c.resources.requests["nvidia.com/gpu"], "1");
            }
            assert.match(b.description.gpuSharing.transport, /^SHM/);
        });

        test(`${layout} on docker: shared gives both containers every GPU; isolated their own, with SHM settings`, async () => {
            const shared = await build(layout, "docker");
            const isolated = await build(layout, "docker", { training: { gpuSharing: "isolated" } });
            const byName = (b: typeof shared) => {
                const cs = dockerContainers(b.update.resources);
                return { vllm: cs.find((c) => c.inputs.name === b.names.training.vllm)!, trainer: cs.find((c) => c.inputs.name === b.names.training.job)! };
            };
            const s = byName(shared);
            for (const [c, own] of [
                [s.vllm, "0"],
                [s.trainer, "1"],
            ] as const) {
                assert.deepEqual(c.inputs.deviceRequests, [{ driver: "nvidia", deviceIds: ["0", "1"], capabilities: ["gpu"] }]);
                const env = dockerEnv(c);
                assert.deepEqual(
                    [env.CUDA_VISIBLE_DEVICES, env.CUDA_DEVICE_ORDER, env.NCCL_SOCKET_IFNAME, env.NCCL_P2P_DISABLE],
                    [own, "PCI_BUS_ID", "lo", undefined],
                );
            }
            const i = byName(isolated);
            for (const [c, own] of [
                [i.vllm, "0"],
                [i.trainer, "1"],
            ] as const) {
                assert.deepEqual(c.inputs.deviceRequests, [{ driver: "nvidia", deviceIds: [own], capabilities: ["gpu"] }]);
                const env = dockerEnv(c);
                assert.deepEqual([env.CUDA_VISIBLE_DEVICES, env.NCCL_P2P_DISABLE, env.NCCL_CUMEM_ENABLE, env.NCCL_SOCKET_IFNAME], [undefined, "1", "0", "lo"]);
            }
        });
    }

    test("colocate: no weight update between roles, no NCCL settings; gpuSharing and ncclCheck refused with the fix", () => {
        const { config, names, links } = setup("whitebox-colocate", "kubernetes");
        const d = resolveTrainingNode(config, names, links);
        assert.equal(d.gpuSharing.mode, "none");
        assert.equal(d.trainer.env.NCCL_SOCKET_IFNAME, undefined);
        assert.throws(
            () => parsePlatformConfig(rawConfig("whitebox-colocate", "kubernetes", { training: { gpuSharing: "shared", ncclCheck: true } }), "test"),
            (e: unknown) => {
                assert.ok(e instanceof ConfigError);
                assert.ok(
                    e.problems.includes(
                        "training.gpuSharing: the whitebox-colocate layout runs vLLM inside the trainer process, so there is no weight update between two roles to share GPUs for: remove gpuSharing, or use layout whitebox-server or blackbox",
                    ),
                    e.problems.join("\n"),
                );
                assert.ok(e.problems.includes("training.ncclCheck: the whitebox-colocate layout has no NCCL weight update to check: remove ncclCheck"));
                return true;
            },
        );
    });

    test("ncclCheck with isolated GPUs is refused, naming the fix", () => {
        assert.throws(
            () => parsePlatformConfig(rawConfig("blackbox", "kubernetes", { training: { gpuSharing: "isolated", ncclCheck: true } }), "test"),
            (e: unknown) =>
                e instanceof ConfigError &&
                e.problems.some(
                    (p) => p.startsWith("training.ncclCheck: the check runs both ranks before vLLM loads") && p.includes("set gpuSharing to 'shared'"),
                ),
        );
    });

    test("a user's NCCL_* in extraEnv wins on both roles; CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER stay the platform's", () => {
        const { config, names, links } = setup("whitebox-server", "docker", {
            training: { gpuSharing: "isolated", extraEnv: { NCCL_SOCKET_IFNAME: "eth0", NCCL_DEBUG: "INFO" } },
        });
        const d = resolveTrainingNode(config, names, links);
        for (const c of [d.vllm!, d.trainer]) {
            assert.equal(c.env.NCCL_SOCKET_IFNAME, "eth0", c.name);
            assert.equal(c.env.NCCL_DEBUG, "INFO", c.name);
            assert.equal(c.env.NCCL_P2P_DISABLE, "1", c.name);
        }
        const bad = setup("whitebox-server", "docker", { training: { extraEnv: { CUDA_VISIBLE_DEVICES: "0,1", CUDA_DEVICE_ORDER: "FASTEST_FIRST" } } });
        assert.deepEqual(
            configProblems(() => resolveTrainingNode(bad.config, bad.names, bad.links)),
            [
                "training.extraEnv.CUDA_VISIBLE_DEVICES: CUDA_VISIBLE_DEVICES is set by the platform (from the run's config and links): remove it from extraEnv",
                "training.extraEnv.CUDA_DEVICE_ORDER: gpuSharing 'shared' splits the GPUs by host index and needs PCI_BUS_ID order: remove it from extraEnv",
            ],
        );
    });

    test("ncclCheck on kubernetes: the script in a ConfigMap, mounted read-only, run by the supervisor before vLLM", async () => {
        const b = await build("blackbox", "kubernetes", { training: { ncclCheck: true } });
        // Beside the pod's programs ConfigMap (the role runner, docs/guides/observability.md "Logs").
        const cm = b.update.resources.find((r) => r.type === "kubernetes:core/v1:ConfigMap" && r.inputs.metadata.name === "train-run-007-nccl-check")!.inputs;
        assert.equal(cm.data["nccl_check.py"], ncclCheckSource());
        const pod = jobPod(b.update.resources);
        const c = pod.containers[0];
        assert.deepEqual(
            c.volumeMounts.find((m: any) => m.name === "nccl-check"),
            { name: "nccl-check", mountPath: "/opt/agentrl/nccl", readOnly: true },
        );
        assert.deepEqual(
            pod.volumes.find((v: any) => v.name === "nccl-check"),
            { name: "nccl-check", configMap: { name: "train-run-007-nccl-check", defaultMode: 0o555 } },
        );
        const script: string = c.command[2];
        const check = script.indexOf(
            "python3 /opt/agentrl/nccl/nccl_check.py --spawn --vllm-devices 0 --trainer-devices 1 --size-gib 1 --timeout 120 --port 29531",
        );
        assert.ok(check > 0 && check < script.indexOf("vllm serve"), "the check runs before vLLM starts");
        for (const o of manifests(b.update.resources)) assert.deepEqual(validateManifestStrict(o), [], `${o.kind} ${o.metadata?.name}`);
    });

    test("ncclCheck on docker: the script uploaded into vLLM's container, run before vLLM execs", async () => {
        const b = await build("whitebox-server", "docker", { training: { ncclCheck: true } });
        const vllm = dockerContainers(b.update.resources).find((c) => c.inputs.name === b.names.training.vllm)!;
        assert.deepEqual(vllm.inputs.uploads, [{ file: "/opt/agentrl/nccl/nccl_check.py", content: ncclCheckSource(), executable: true }]);
        assert.deepEqual(vllm.inputs.entrypoints.slice(0, 2), ["/bin/sh", "-c"]);
        assert.equal(
            vllm.inputs.entrypoints[2],
            'python3 /opt/agentrl/nccl/nccl_check.py --spawn --vllm-devices 0 --trainer-devices 1 --size-gib 1 --timeout 120 --port 29531 && exec "$@"',
        );
        assert.deepEqual(vllm.inputs.entrypoints.slice(3), ["agentrl-nccl-check", "vllm", "serve"]);
    });
});

describe("the Job's name under the same run id", () => {
    const jobName = async (extra: Record<string, unknown>, hf?: string) => {
        const { config, names, links } = setup("blackbox", "kubernetes", extra);
        const description = resolveTrainingNode(config, names, links);
        const runs = await runBoth(() => {
            new TrainingNode("training", { description, hfToken: hf });
            return {};
        });
        return single(runs.update.resources, "kubernetes:batch/v1:Job").inputs.metadata.name as string;
    };

    test("the same spec gives the same name; any pod-template change (extraArgs, hfToken set later) a new one, so the replacement never meets the terminating Job", async () => {
        const base = await jobName({});
        assert.equal(await jobName({}), base, "deterministic");
        assert.notEqual(await jobName({ training: { extraArgs: ["--sandbox-flavor", "cpu-upgrade"] } }), base);
        assert.notEqual(await jobName({}, HF_SENTINEL), base, "HF_TOKEN appears in the pod template");
        for (const n of [base, await jobName({}, HF_SENTINEL)]) assert.match(n, /^train-run-007-[0-9a-f]{8}$/);
    });
});
