/**
 * Multi-node training on Kubernetes under Pulumi mocks (issue 18): the trainer as a JobSet, one pod
 * per node with its rank and the rank-0 address from JobSet's labels, vLLM as the same JobSet's first
 * replicated job behind its Service (the trainers wait for it, the run completes on the trainers), the all-or-nothing failure policy, exclusive placement, the Kueue option on the
 * JobSet and on the one-node Job, and every object against its schema (JobSet v0.12.0, Kubernetes 1.36).
 * Run: node --import tsx --test test/training/training-multinode.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { MULTI_NODE_RECIPE_NAMES } from "../../components/config";
import { JOBSET_LABELS, KUEUE_QUEUE_LABEL, MAIN_PROCESS_PORT, TRL_GROUP_PORT, VLLM_UNANSWERED_SECONDS } from "../../components/training/model";
import { planToDir, REPO_ROOT, type PlanResult } from "../../scripts/lib/plan";
import { validateAnyManifest } from "../helpers/crd-schema";
import { loadManifestSchemas } from "../helpers/k8s-schema";
import { scaled } from "../helpers/waits";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-multinode-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
before(async () => {
    await loadManifestSchemas();
});

let n = 0;
async function plan(source: Parameters<typeof planToDir>[0], override?: Record<string, unknown>): Promise<PlanResult> {
    return planToDir(source, { outDir: path.join(tmp, String(n++)), platformOverride: override });
}
const RECIPE = { recipe: "opencode-blackbox-32b", target: "kubernetes" } as const;
/** A white-box run on two trainer nodes (vLLM on a third). */
const SERVER_OVERRIDE = {
    model: { name: "Qwen/Qwen3-32B" },
    training: {
        layout: "whitebox-server",
        nodes: 2,
        gpusOnNode: 8,
        perDeviceTrainBatchSize: 2,
        gradientAccumulationSteps: 2,
        numGenerations: 8,
        evalSize: 64,
        perDeviceEvalBatchSize: 4,
        // Your own script with TrlParser flags (the seeds' scripts are one-GPU programs).
        program: "custom",
        command: ["python", "/app/train_grpo.py"],
        // 32.8B in fp32 with AdamW fits no 80 GB GPU unsharded (the GPU memory check refuses it): FSDP over the trainer GPUs.
        accelerateConfig: "/app/fsdp2.yaml",
        // 32.8B in fp32 with AdamW, 2 kept + 1 being written + the final model (components/config/checkpoints.ts): 1467Gi.
        checkpoints: { size: "1500Gi" },
    },
};

const one = (p: PlanResult, kind: string) => {
    const found = p.manifests.filter((m) => m.kind === kind);
    assert.equal(found.length, 1, `exactly one ${kind}: ${found.map((m) => m.metadata.name).join(", ")}`);
    return found[0];
};
const replicatedJob = (jobSet: Record<string, any>, name: string) => jobSet.spec.replicatedJobs.find((r: any) => r.name === name);
const trainerPod = (jobSet: Record<string, any>) => replicatedJob(jobSet, "node").template.spec.template.spec;
const envByName = (c: any) => Object.fromEntries((c.env ?? []).map((e: any) => [e.name, e]));

describe("multi-node: the trainer JobSet", () => {
    let p: PlanResult;
    before(async () => {
        p = await plan(RECIPE);
    });

    test("a JobSet and no Job or Deployment: vLLM's replicated job first, then the trainers' of 2 one-pod Jobs, Indexed, no pod retries inside a node", () => {
        assert.equal(p.manifests.filter((m) => m.kind === "Job").length, 0);
        assert.equal(p.manifests.filter((m) => m.kind === "Deployment" && m.metadata.namespace === p.plan.names.namespaces.training).length, 0);
        const js = one(p, "JobSet");
        assert.equal(js.apiVersion, "jobset.x-k8s.io/v1alpha2");
        assert.deepEqual(
            js.spec.replicatedJobs.map((r: any) => r.name),
            ["vllm", "node"],
        );
        const rj = replicatedJob(js, "node");
        assert.equal(rj.name, "node");
        assert.equal(rj.replicas, 2);
        assert.deepEqual(
            { parallelism: rj.template.spec.parallelism, completions: rj.template.spec.completions, backoffLimit: rj.template.spec.backoffLimit },
            { parallelism: 1, completions: 1, backoffLimit: 0 },
        );
        assert.equal(rj.template.spec.completionMode, "Indexed");
        assert.equal(rj.template.spec.activeDeadlineSeconds, 21600);
        assert.equal(trainerPod(js).restartPolicy, "Never");
    });

    test("the run-id name with a hash of its spec, skipAwait, and exclusive placement per node", () => {
        const js = one(p, "JobSet");
        assert.match(js.metadata.name, /^train-demo-[0-9a-f]{8}$/);
        assert.equal(js.metadata.annotations["pulumi.com/skipAwait"], "true");
        assert.equal(js.metadata.annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"], "kubernetes.io/hostname");
        assert.deepEqual(js.spec.network, { enableDNSHostnames: true, publishNotReadyAddresses: true });
        assert.equal(js.spec.suspend, undefined, "no queue: starts at once");
    });

    test("all or nothing: a node's failure restarts every node; the trainer's own exit and the deadline end it; a drain restarts it free", () => {
        const js = one(p, "JobSet");
        assert.deepEqual(js.spec.failurePolicy, {
            maxRestarts: 0,
            rules: [
                {
                    name: "nodeDisrupted",
                    action: "RestartJobSetAndIgnoreMaxRestarts",
                    onJobFailureReasons: ["PodFailurePolicy"],
                    onJobFailureMessagePatterns: ["DisruptionTarget"],
                },
                // Before the trainer rule: when vLLM dies the trainers fail too, and vLLM's failure is the cause.
                { name: "vllmFailed", action: "RestartJobSet", targetReplicatedJobs: ["vllm"] },
                { name: "trainerFailed", action: "FailJobSet", onJobFailureReasons: ["PodFailurePolicy"], targetReplicatedJobs: ["node"] },
                { name: "deadlineExceeded", action: "FailJobSet", onJobFailureReasons: ["DeadlineExceeded"], targetReplicatedJobs: ["node"] },
            ],
        });
        // The run is the trainers': it completes when they all succeed (vLLM's Job never does).
        assert.deepEqual(js.spec.successPolicy, { operator: "All", targetReplicatedJobs: ["node"] });
        const pfp = replicatedJob(js, "node").template.spec.podFailurePolicy.rules;
        assert.deepEqual(pfp[0], { action: "FailJob", onExitCodes: { containerName: "trainer", operator: "NotIn", values: [0] } });
        assert.deepEqual(pfp[1], { action: "FailJob", onPodConditions: [{ type: "DisruptionTarget", status: "True" }] });
    });

    test("accelerate launch over every node: total processes, this pod's rank and rank 0's DNS name from JobSet's labels", () => {
        const c = trainerPod(one(p, "JobSet")).containers[0];
        // The args check runs TRL's script's own parser first, then execs the launcher.
        assert.deepEqual(c.command.slice(0, 3), ["python", "/usr/local/lib/agentrl/args_check.py", "--then-exec"]);
        assert.deepEqual(c.command.slice(3, 3 + 15), [
            "accelerate",
            "launch",
            "--num_machines",
            "2",
            "--machine_rank",
            "$(MACHINE_RANK)",
            "--main_process_ip",
            "$(MAIN_PROCESS_IP)",
            "--main_process_port",
            String(MAIN_PROCESS_PORT),
            "--num_processes",
            "16",
            "--config_file",
            "/app/fsdp2.yaml",
            "/app/opencode_hf_sandbox.py",
        ]);
        const env = envByName(c);
        assert.equal(env.JOBSET_NAME.valueFrom.fieldRef.fieldPath, `metadata.labels['${JOBSET_LABELS.jobSetName}']`);
        assert.equal(env.MACHINE_RANK.valueFrom.fieldRef.fieldPath, `metadata.labels['${JOBSET_LABELS.jobIndex}']`);
        assert.equal(env.MAIN_PROCESS_IP.value, "$(JOBSET_NAME)-node-0-0.$(JOBSET_NAME)");
        const order = c.env.map((e: any) => e.name);
        assert.ok(order.indexOf("JOBSET_NAME") < order.indexOf("MAIN_PROCESS_IP"), "a $(VAR) expands only from a var listed before it");
        assert.equal(c.resources.limits["nvidia.com/gpu"], "8");
        assert.equal(
            c.env.some((e: any) => e.name === "NCCL_SOCKET_IFNAME"),
            false,
            "across nodes NCCL must not be pinned to loopback",
        );
    });

    test("the trainer reaches vLLM at its Service; no vLLM in the trainer pod", () => {
        const js = one(p, "JobSet");
        const pod = trainerPod(js);
        assert.equal(pod.initContainers, undefined);
        assert.equal(pod.containers.length, 1);
        const args: string[] = pod.containers[0].command;
        const url = args[args.indexOf("--vllm-url") + 1];
        assert.equal(url, "http://vllm-demo.arl-opencode-blackbox-32b-k8s-training.svc.cluster.local:8000");
        assert.equal(envByName(pod.containers[0]).VLLM_URL.value, url);
    });

    test("vLLM: the JobSet's one-pod replicated job with 8 GPUs and TP 8, never restarted in place; the trainers wait for it to be Ready", () => {
        const js = one(p, "JobSet");
        const vllm = replicatedJob(js, "vllm");
        assert.equal(vllm.replicas, 1);
        assert.deepEqual(
            { parallelism: vllm.template.spec.parallelism, completions: vllm.template.spec.completions, backoffLimit: vllm.template.spec.backoffLimit },
            { parallelism: 1, completions: 1, backoffLimit: 0 },
        );
        assert.deepEqual(vllm.template.spec.podFailurePolicy.rules, [{ action: "FailJob", onPodConditions: [{ type: "DisruptionTarget", status: "True" }] }]);
        const pod = vllm.template.spec.template.spec;
        assert.equal(pod.restartPolicy, "Never");
        const c = pod.containers[0];
        assert.equal(c.resources.limits["nvidia.com/gpu"], "8");
        assert.deepEqual(c.args.slice(c.args.indexOf("--tensor-parallel-size"), c.args.indexOf("--tensor-parallel-size") + 2), ["--tensor-parallel-size", "8"]);
        assert.equal(c.image, "vllm/vllm-openai:v0.29.0");
        // Ready = the readiness probe on /health passed: the model is loaded.
        assert.deepEqual(c.readinessProbe.httpGet, { path: "/health", port: 8000 });
        assert.deepEqual(replicatedJob(js, "node").dependsOn, [{ name: "vllm", status: "Ready" }]);
        assert.equal(vllm.template.spec.template.metadata.labels["app.kubernetes.io/name"], "vllm");
        assert.deepEqual(
            pod.volumes.map((v: any) => v.name),
            ["dshm", "model-cache"],
        );
    });

    test("vLLM's liveness probe ends the run only on point 8's bound (300 s without an answer), not after a minute of a busy vLLM", async () => {
        for (const planned of [p, await plan({ recipe: "mbpp-whitebox", target: "kubernetes" }, SERVER_OVERRIDE)]) {
            const c = replicatedJob(one(planned, "JobSet"), "vllm").template.spec.template.spec.containers[0];
            const l = c.livenessProbe;
            assert.deepEqual(l.httpGet, { path: "/health", port: 8000 });
            // A kill fails vLLM's Job and restarts the whole JobSet (the trainers' weight-sync group goes with vLLM),
            // counted against training.backoffLimit (0: the run ends): 30 failures 10 s apart, each waiting at most 10 s.
            assert.deepEqual(
                { periodSeconds: l.periodSeconds, timeoutSeconds: l.timeoutSeconds, failureThreshold: l.failureThreshold },
                { periodSeconds: 10, timeoutSeconds: 10, failureThreshold: 30 },
            );
            assert.equal(l.periodSeconds * l.failureThreshold, VLLM_UNANSWERED_SECONDS, "the supervisor's bound (components/training/model.ts)");
            assert.ok(l.timeoutSeconds <= l.periodSeconds, "a hung probe does not stretch the bound past period x threshold");
        }
    });

    test("vLLM's Service selects this JobSet's vLLM replicated job by JobSet's own pod labels, which the ingress proxies to", () => {
        const js = one(p, "JobSet");
        const svc = p.manifests.find((m) => m.kind === "Service" && m.metadata.name === "vllm-demo")!;
        assert.deepEqual(svc.spec.selector, {
            ...replicatedJob(js, "vllm").template.spec.template.metadata.labels,
            [JOBSET_LABELS.jobSetName]: js.metadata.name,
            [JOBSET_LABELS.replicatedJobName]: "vllm",
        });
    });

    test("claims are ReadWriteMany, under their own names (an access mode is immutable)", () => {
        const claims = p.manifests.filter((m) => m.kind === "PersistentVolumeClaim");
        assert.deepEqual(claims.map((c) => [c.metadata.name, c.spec.accessModes]).sort(), [
            ["checkpoints-rwx", ["ReadWriteMany"]],
            ["model-cache-rwx", ["ReadWriteMany"]],
        ]);
    });

    test("NetworkPolicies: trainer pods from each other and from vLLM (every port); vLLM from the trainer pods and the ingress on 8000", () => {
        const pols = Object.fromEntries(p.manifests.filter((m) => m.kind === "NetworkPolicy").map((m) => [m.metadata.name, m.spec]));
        const trainerSel = { "app.kubernetes.io/instance": "train-demo", "app.kubernetes.io/name": "trainer", "app.kubernetes.io/part-of": "agent-rl-infra" };
        const vllmSel = { "app.kubernetes.io/instance": "vllm-demo-server", "app.kubernetes.io/name": "vllm", "app.kubernetes.io/part-of": "agent-rl-infra" };
        const ns = { "kubernetes.io/metadata.name": "arl-opencode-blackbox-32b-k8s-training" };
        assert.deepEqual(pols["train-demo"].ingress, [
            {
                from: [
                    { namespaceSelector: { matchLabels: ns }, podSelector: { matchLabels: trainerSel } },
                    { namespaceSelector: { matchLabels: ns }, podSelector: { matchLabels: vllmSel } },
                ],
            },
        ]);
        assert.equal(pols["train-demo-vllm"].ingress.length, 2);
        assert.deepEqual(pols["train-demo-vllm"].ingress[0], { from: [{ namespaceSelector: { matchLabels: ns }, podSelector: { matchLabels: trainerSel } }] });
        assert.deepEqual(pols["train-demo-vllm"].ingress[1].ports, [{ protocol: "TCP", port: 8000 }]);
        assert.equal(pols["train-demo-vllm"].ingress[1].from[0].podSelector.matchLabels["app.kubernetes.io/name"], "vllm-ingress");
        assert.deepEqual(pols["train-demo-egress"].egress[1], {
            to: [
                { namespaceSelector: { matchLabels: ns }, podSelector: { matchLabels: trainerSel } },
                { namespaceSelector: { matchLabels: ns }, podSelector: { matchLabels: vllmSel } },
            ],
        });
        assert.deepEqual(pols["train-demo-vllm-egress"].egress[1], {
            to: [{ namespaceSelector: { matchLabels: ns }, podSelector: { matchLabels: trainerSel } }],
        });
    });

    test("the ingress proxy's egress goes to vLLM's own pods on 8000 (not to the trainer's)", () => {
        const pol = p.manifests.find((m) => m.kind === "NetworkPolicy" && m.metadata.name === "vllm-ingress")!;
        const toVllm = pol.spec.egress.filter((r: any) =>
            (r.to ?? []).some((peer: any) => peer.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "vllm"),
        );
        assert.equal(toVllm.length, 1, JSON.stringify(pol.spec.egress));
        assert.deepEqual(toVllm[0].ports, [{ protocol: "TCP", port: 8000 }]);
        assert.equal(
            pol.spec.egress.some((r: any) => (r.to ?? []).some((peer: any) => peer.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "trainer")),
            false,
        );
    });

    test("every object holds to its schema (JobSet v0.12.0 CRD, Kubernetes 1.36 strictly)", () => {
        const problems = p.manifests.flatMap((m) => validateAnyManifest(m).map((x) => `${m.kind} ${m.metadata?.name}: ${x}`));
        assert.deepEqual(problems, []);
    });

    test("a changed trainer setting is a new JobSet name (replicated jobs are immutable); the same config keeps its name", async () => {
        const again = await plan(RECIPE);
        assert.equal(one(again, "JobSet").metadata.name, one(p, "JobSet").metadata.name);
        const changed = await plan(RECIPE, { training: { maxSteps: 11 } });
        assert.notEqual(one(changed, "JobSet").metadata.name, one(p, "JobSet").metadata.name);
    });

    test("plan.md shows the nodes, the rank-0 address and the GPU-node count", () => {
        const md = fs.readFileSync(path.join(tmp, "0", "plan.md"), "utf8");
        assert.match(md, /\| trainer: the same JobSet's `node` \(2 nodes x 8 processes = 16\), started once vLLM is Ready \|/);
        assert.match(md, /\| vLLM \(`vllm serve`\), the JobSet's replicated job `vllm` on its own node, started first \|/);
        assert.match(md, /the run completes when every trainer succeeds, and the JobSet then deletes vLLM's Job, freeing its node/);
        assert.match(md, /\| trainer ranks -> rank 0 \(accelerate --main_process_ip\) \| <jobset>-node-0-0\.<jobset>:29500 /);
        assert.match(md, /\| GPU nodes \| 2 trainer nodes \+ 1 vLLM node \| 3 \| 24 GPUs in all/);
        // AsyncGRPO (the black box) has no batch rule: no batch row claims one (test/stack/plan-truth.test.ts scans every plan).
        assert.doesNotMatch(md, /\| generation batch \|/);
        assert.match(md, /No batch row: TRL's rule .* does not bind layout blackbox/);
    });
});

describe("multi-node: white box (vllm serve on its own node)", () => {
    test("the trainer joins the NCCL group at vLLM's Service; vLLM runs TP over its node", async () => {
        const at = n;
        const p = await plan({ recipe: "mbpp-whitebox", target: "kubernetes" }, SERVER_OVERRIDE);
        // GRPOTrainer's batch rule counts every node's processes.
        assert.match(
            fs.readFileSync(path.join(tmp, String(at), "plan.md"), "utf8"),
            /\| generation batch \| perDeviceTrainBatchSize 2 x numProcesses 8 x nodes 2 x stepsPerGeneration 2 \| 64 \| divisible by numGenerations 8: 8 prompts per generation \|/,
        );
        const js = one(p, "JobSet");
        const c = trainerPod(js).containers[0];
        const args: string[] = c.args;
        assert.equal(args[args.indexOf("--vllm_server_base_url") + 1], "http://vllm-demo.arl-mbpp-whitebox-k8s-training.svc.cluster.local:8000");
        assert.equal(args[args.indexOf("--vllm_group_port") + 1], String(TRL_GROUP_PORT));
        assert.deepEqual(c.command.slice(0, 4), ["accelerate", "launch", "--num_machines", "2"]);
        assert.equal(c.command[c.command.indexOf("--num_processes") + 1], "16");
        const v = replicatedJob(js, "vllm").template.spec.template.spec.containers[0];
        // What trl 1.16's deprecated vllm-serve execs.
        assert.deepEqual(v.command, ["vllm", "serve"]);
        assert.equal(v.args[v.args.indexOf("--tensor-parallel-size") + 1], "8");
        // White box has no ingress: vLLM admits the trainer pods alone.
        const pol = p.manifests.find((m) => m.kind === "NetworkPolicy" && m.metadata.name === "train-demo-vllm")!;
        assert.equal(pol.spec.ingress.length, 1);
        const problems = p.manifests.flatMap((m) => validateAnyManifest(m).map((x) => `${m.kind} ${m.metadata?.name}: ${x}`));
        assert.deepEqual(problems, []);
    });
});

describe("multi-node: prerequisites the stack names but does not create", () => {
    test("JobSet, the GPU nodes with pod-to-pod TCP, ReadWriteMany storage, and Kueue's LocalQueue when queued", async () => {
        const { externalPrerequisites } = await import("../../components/platform/prerequisites");
        const p = await plan(RECIPE, { target: { kueueQueue: "team-a" } });
        const rows = externalPrerequisites(p.plan.config, p.plan.names);
        const whats = rows.map((r) => r.what);
        assert.ok(
            whats.includes("the JobSet controller and CRD, v0.10 or later (tested: v0.12.0; jobset.x-k8s.io/v1alpha2), with its webhooks"),
            whats.join("\n"),
        );
        assert.ok(
            whats.some((w) =>
                /^3 GPU nodes with 8 nvidia\.com\/gpu each \(2 for the trainer, one for vLLM\), with TCP open between pods on every port/.test(w),
            ),
        );
        assert.ok(whats.some((w) => /^ReadWriteMany volumes from the default StorageClass/.test(w)));
        const kueue = rows.find((r) => r.field === "target.kueueQueue")!;
        assert.match(
            kueue.what,
            /^Kueue v0\.17\.0 \(the cluster stack's kueue\.install, or its release manifest\) with its jobset\.x-k8s\.io\/jobset integration \(on in the manifest's default configuration\), and LocalQueue team-a in arl-opencode-blackbox-32b-k8s-training,/,
        );
        assert.equal(kueue.check, "kubectl -n arl-opencode-blackbox-32b-k8s-training get localqueue team-a");
        assert.match(kueue.otherwise, /JobSet stays suspended for ever/);
        const one = await plan({ recipe: "opencode-blackbox", target: "kubernetes" });
        assert.equal(
            externalPrerequisites(one.plan.config, one.plan.names).some((r) => r.field === "training.nodes" || r.field === "target.kueueQueue"),
            false,
        );
    });
});

describe("Kueue option (target.kueueQueue)", () => {
    test("the JobSet carries the queue label and is created suspended; plan.md names the queue", async () => {
        const p = await plan(RECIPE, { target: { kueueQueue: "team-a" } });
        const js = one(p, "JobSet");
        assert.equal(js.metadata.labels[KUEUE_QUEUE_LABEL], "team-a");
        assert.equal(js.spec.suspend, true);
        for (const rj of js.spec.replicatedJobs)
            assert.equal(rj.template.metadata.labels[KUEUE_QUEUE_LABEL], undefined, "the label is Kueue's on the JobSet itself");
        const md = fs.readFileSync(path.join(tmp, String(n - 1), "plan.md"), "utf8");
        assert.match(
            md,
            /Kueue queue: \*\*team-a\*\* \(target\.kueueQueue\)\. The trainer's JobSet carries `kueue\.x-k8s\.io\/queue-name: team-a` and is created suspended/,
        );
    });

    test("the one-node Job carries it too, suspended; without a queue the Job is as before", async () => {
        const queued = await plan({ recipe: "opencode-blackbox", target: "kubernetes" }, { target: { kueueQueue: "team-a" } });
        const job = one(queued, "Job");
        assert.equal(job.metadata.labels[KUEUE_QUEUE_LABEL], "team-a");
        assert.equal(job.spec.suspend, true);
        assert.deepEqual(validateAnyManifest(job), []);
        const plain = one(await plan({ recipe: "opencode-blackbox", target: "kubernetes" }), "Job");
        assert.equal(plain.spec.suspend, undefined);
        assert.equal(plain.metadata.labels[KUEUE_QUEUE_LABEL], undefined);
        assert.equal(plain.metadata.name, job.metadata.name, "the queue changes no pod template: same Job name");
    });
});

describe("multi-node recipes", () => {
    test("a stack file naming the recipe plans with `npm run plan -- <stack file>`", () => {
        const dir = fs.mkdtempSync(path.join(tmp, "stack-"));
        const file = path.join(dir, "Pulumi.gpu-team.yaml");
        fs.writeFileSync(
            file,
            [
                "config:",
                "  agent-rl-infra:platform:",
                "    recipe: opencode-blackbox-32b",
                "    runId: big-001",
                "    images:",
                "      trainer: registry.example.com/agent-rl/trl-opencode-trainer:0.1.0",
                "    target:",
                "      kind: kubernetes",
                "      context: gpu-cluster",
                "      kueueQueue: team-a",
                "      tolerations:",
                "        - { key: nvidia.com/gpu, operator: Exists, effect: NoSchedule }",
                "    sandboxes:",
                "      image: registry.example.com/agent-rl/opencode-sandbox:0.1.0",
                "",
            ].join("\n"),
        );
        const r = spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "scripts", "plan.ts"), file, "--out", path.join(dir, "out")], {
            cwd: REPO_ROOT,
            encoding: "utf8",
            timeout: scaled(120_000),
        });
        assert.equal(r.status, 0, r.stderr);
        const manifests = fs.readdirSync(path.join(dir, "out", "manifests"));
        assert.ok(
            manifests.some((f) => /-jobset-.*train-big-001-[0-9a-f]{8}\.yaml$/.test(f)),
            manifests.join("\n"),
        );
        assert.match(fs.readFileSync(path.join(dir, "out", "plan.md"), "utf8"), /Kueue queue: \*\*team-a\*\*/);
    });

    for (const recipe of MULTI_NODE_RECIPE_NAMES) {
        test(`${recipe} plans on kubernetes and is refused on docker`, async () => {
            const p = await plan({ recipe, target: "kubernetes" });
            assert.ok(p.manifests.some((m) => m.kind === "JobSet"));
            await assert.rejects(plan({ recipe, target: "docker" }), /training\.nodes: the docker target is one GPU host/);
        });
    }
});
