/**
 * `npm run preflight -- <stack>`: every message of every check (pure, from plans and objects
 * shaped as the API server and the docker CLI return them), the CLI's arguments and exit codes,
 * then the checks against a live target: the simulated cluster (test/helpers/cluster.ts) with
 * each prerequisite removed in turn, and a real dockerd (no NVIDIA runtime here, itself a case).
 * The live parts are skipped, with the reason, only when the engine fixtures are not built and
 * CI is not set (engineSkipReason).
 * Run: npx tsx --test test/preflight/preflight.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import YAML from "yaml";
import { deepMerge, parseClusterConfig, type PlatformConfig } from "../../components/config";
import { checkpointNeed } from "../../components/config/checkpoints";
import { type PlatformPlan, resolvePlatform } from "../../components/platform";
import { SANDBOX_API_VERSION } from "../../components/sandbox";
import { HelpRequested, UsageError } from "../../scripts/lib/cli";
import { parsePreflightArgs } from "../../scripts/preflight";
import { runPreflight } from "../../components/preflight";
import { loadStack, StackError } from "../../scripts/lib/load-stack";
import {
    checkApiVersion,
    checkDaemon,
    checkDataDir,
    checkDocker,
    checkHostCapacity,
    checkGpuCount,
    checkNvidiaRuntime,
    checkPorts,
    type DockerFacts,
    gpusNeeded,
    parsePorts,
    publishedPorts,
} from "../../components/preflight/docker";
import {
    checkClusterStack,
    clusterStackCrds,
    kubeconfigMissing,
    SANDBOX_CONTROLLER_LABEL,
    checkCertManager,
    checkCni,
    checkConnection,
    checkGateway,
    checkGpuNodes,
    checkJobSet,
    checkJobSetController,
    checkKueue,
    unansweredFacts,
    checkKubernetes,
    checkPriorityClass,
    checkQuotas,
    checkRuntimeClass,
    checkSandboxController,
    checkSandboxCrds,
    preV1SandboxMarks,
    checkStorage,
    checkTlsSecret,
    checkVersion,
    kubernetesNeeds,
    podTotals,
    sandboxCrdExpectations,
    stackRequests,
    tolerates,
} from "../../components/preflight/kubernetes";
import { exitCodeOf, type Finding, renderJson, renderTable, wrap } from "../../components/preflight/report";
import { fixtureCacheDir } from "../helpers/apiserver";
import { type Cluster, GPU_PRODUCT } from "../helpers/cluster";
import { parseWithTestImages } from "../helpers/config";
import { type Dockerd, startDockerd } from "../helpers/dockerd";
import { teardown, startHarnessCluster } from "../helpers/engine-checks";
import { engineSkipReason } from "../helpers/engine-fixtures";
import { scaled } from "../helpers/waits";

const REPO = path.resolve(__dirname, "..", "..");
/** The stacks an unknown stack's message lists (every stacks/Pulumi.<stack>.yaml). */
const KNOWN_STACKS = fs
    .readdirSync(path.join(REPO, "stacks"))
    .flatMap((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1] ?? [])
    .join(", ");
const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const GPU_SCHEDULING = {
    nodeSelector: { "nvidia.com/gpu.present": "true" },
    tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
};

/** A black-box Kubernetes stack like prod: agent-sandbox, a PriorityClass, a RuntimeClass, cert-manager TLS. */
function k8sConfig(over: Record<string, unknown> = {}, stack = "pf"): PlatformConfig {
    const raw: any = deepMerge(
        {
            recipe: "opencode-blackbox",
            runId: "pf-001",
            target: { kind: "kubernetes", context: "ctx", gpuProduct: GPU_PRODUCT, priorityClassName: "training-high", ...GPU_SCHEDULING },
            sandboxes: { runtimeClassName: "gvisor" },
            ingress: { tls: { mode: "cert-manager", issuer: { name: "internal-ca", kind: "ClusterIssuer" } } },
        },
        over,
    );
    // Another TLS mode takes no issuer.
    if (raw.ingress.tls.mode !== "cert-manager") delete raw.ingress.tls.issuer;
    return parseWithTestImages(raw, stack);
}
const planOf = (c: PlatformConfig): PlatformPlan => resolvePlatform(c, { hfToken: true });
const k8sPlan = (over: Record<string, unknown> = {}) => planOf(k8sConfig(over));

/**
 * A Docker stack: the MBPP white box on two GPUs (vLLM served on GPU 0, the trainer on GPU 1; layout whitebox-server), or
 * the recipe `over` names. A black box runs on Kubernetes only (its sandboxes are agent-sandbox's).
 */
function dockerConfig(over: Record<string, unknown> = {}): PlatformConfig {
    const base = over.recipe === undefined ? { recipe: "mbpp-whitebox", training: { layout: "whitebox-server", gpusOnNode: 2 } } : {};
    return parseWithTestImages(deepMerge(deepMerge(base, { runId: "pf-001", target: { kind: "docker" } }), over), "pf-docker");
}

function node(
    name: string,
    opts: { labels?: Record<string, string>; gpus?: number; taints?: any[]; cpu?: string; memory?: string; unschedulable?: boolean } = {},
) {
    return {
        metadata: { name, labels: opts.labels ?? {} },
        spec: { taints: opts.taints ?? [], ...(opts.unschedulable ? { unschedulable: true } : {}) },
        status: {
            allocatable: { cpu: opts.cpu ?? "192", memory: opts.memory ?? "2Ti", ...(opts.gpus ? { "nvidia.com/gpu": String(opts.gpus) } : {}) },
            conditions: [{ type: "Ready", status: "True" }],
        },
    };
}
const h200 = (gpus = 8, product = GPU_PRODUCT) =>
    node("gpu-0", {
        gpus,
        labels: { "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product },
        taints: [{ key: "nvidia.com/gpu", effect: "NoSchedule" }],
    });

function crd(name: string, spec: readonly string[], status: readonly string[], opts: { version?: string; scale?: boolean } = {}) {
    const props = (keys: readonly string[]) => Object.fromEntries(keys.map((k) => [k, { type: "object" }]));
    return {
        metadata: { name },
        spec: {
            versions: [
                {
                    name: opts.version ?? SANDBOX_API_VERSION,
                    served: true,
                    storage: true,
                    schema: { openAPIV3Schema: { properties: { spec: { properties: props(spec) }, status: { properties: props(status) } } } },
                    ...(opts.scale ? { subresources: { scale: {}, status: {} } } : {}),
                },
            ],
        },
    };
}
const sandboxCrds = (plan: PlatformPlan) => sandboxCrdExpectations(plan).map((e) => crd(e.name, e.spec, e.status, { scale: e.scale }));
const v1Crd = (name: string) => crd(name, [], [], { version: "v1" });

function only(findings: readonly Finding[], check: string): Finding {
    const f = findings.filter((x) => x.check === check);
    assert.equal(f.length, 1, `one finding '${check}', got ${JSON.stringify(findings.map((x) => x.check))}`);
    return f[0]!;
}
function assertFinding(f: Finding, status: Finding["status"], found: RegExp, fix?: RegExp): void {
    assert.equal(f.status, status, `${f.check}: ${f.status}: ${f.found} / ${f.fix}`);
    assert.match(f.found, found);
    if (fix) assert.match(f.fix, fix);
    if (status !== "ok") assert.ok(f.fix.length > 0, `${f.check}: a ${status} says what to do`);
}

// -------------------------------------------------------------------------------------------------

describe("report", () => {
    const findings: Finding[] = [
        { check: "API server", status: "ok", found: "answers", fix: "" },
        { check: "NetworkPolicy CNI", status: "warn", found: "no DaemonSet ".repeat(20).trim(), fix: "install one" },
        { check: "PriorityClass", status: "fail", found: "no PriorityClass x", fix: "create it" },
    ];
    test("the table: one row per check, the fix under what was found, a summary; colour only when asked", () => {
        const plain = renderTable({ stack: "s", target: "kubernetes context c" }, findings, { width: 80 });
        assert.match(plain, /^preflight s: kubernetes context c\n/);
        assert.match(plain, /\n {2}FAIL {2}PriorityClass +no PriorityClass x\n +fix: create it\n/);
        assert.match(plain, /3 checks: 1 ok, 1 warning, 1 failed\n$/);
        assert.ok(!plain.includes("\x1b["), "no escape codes without colour");
        assert.ok(
            plain.split("\n").every((l) => l.length <= 80),
            "wrapped to the width",
        );
        const coloured = renderTable({ stack: "s", target: "t" }, findings, { colour: true });
        assert.ok(coloured.includes("\x1b[31mFAIL\x1b[0m"), "FAIL in red");
        assert.match(renderTable({ stack: "s", target: "t" }, findings.slice(0, 1)), /1 check: 1 ok, 0 warnings, nothing failed/);
    });
    test("--json: the findings, a summary and the exit code", () => {
        const doc = JSON.parse(renderJson({ stack: "s", target: "t" }, findings));
        assert.deepEqual(doc.summary, { ok: 1, warn: 1, fail: 1 });
        assert.equal(doc.exitCode, 1);
        assert.deepEqual(doc.findings[2], findings[2]);
    });
    test("exit code 0 with warnings, 1 with a failure", () => {
        assert.equal(exitCodeOf(findings.slice(0, 2)), 0);
        assert.equal(exitCodeOf(findings), 1);
    });
    test("wrap splits at spaces and cuts a word longer than the line", () => {
        assert.deepEqual(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert.deepEqual(wrap("abcdefgh", 3), ["abc", "def", "gh"]);
    });
});

describe("CLI arguments", () => {
    test("a stack, a stack file, --json, --timeout", () => {
        assert.deepEqual(parsePreflightArgs(["staging"]), { stack: "staging", stackFile: undefined, json: false, timeoutMs: 10_000 });
        const a = parsePreflightArgs(["some/dir/Pulumi.team-a.yaml", "--json", "--timeout", "3"]);
        assert.equal(a.stack, "team-a");
        assert.equal(a.stackFile, path.resolve("some/dir/Pulumi.team-a.yaml"));
        assert.equal(a.json, true);
        assert.equal(a.timeoutMs, 3000);
        assert.equal(parsePreflightArgs(["dev", "--timeout=20"]).timeoutMs, 20_000);
    });
    for (const [argv, message] of [
        [[], /name a stack \(.*dev.*\) or a stack file/],
        [["dev", "prod"], /unexpected argument prod: give one stack/],
        [["dev", "--colour"], /unknown option --colour/],
        [["dev", "--timeout"], /--timeout needs a value/],
        [["dev", "--timeout", "--json"], /--timeout needs a value/],
        [["dev", "--timeout", "soon"], /--timeout must be a number of seconds between 1 and 600, got "soon"/],
        [["dev", "--timeout", "0"], /between 1 and 600/],
        [["dev", "--timeout=9999"], /between 1 and 600/],
        [["stacks/dev.yaml"], /a stack file must be named Pulumi.<stack>.yaml, got stacks\/dev.yaml/],
        [["a/b"], /has characters a stack name cannot have/],
    ] as const) {
        test(`${JSON.stringify(argv)}: ${message}`, () => {
            assert.throws(
                () => parsePreflightArgs(argv),
                (e: Error) => e instanceof UsageError && message.test(e.message),
            );
        });
    }
    test("--help asks for the usage (exit 0), anywhere on the line", () => {
        assert.throws(
            () => parsePreflightArgs(["--help"]),
            (e: Error) => e instanceof HelpRequested,
        );
        assert.throws(
            () => parsePreflightArgs(["dev", "-h"]),
            (e: Error) => e instanceof HelpRequested,
        );
    });
    test("the process: an unknown stack exits 2 listing the stacks; bad arguments exit 2; --help exits 0", () => {
        const run = (...args: string[]) =>
            spawnSync(process.execPath, ["--import", "tsx", "scripts/preflight.ts", ...args], { cwd: REPO, encoding: "utf8", timeout: scaled(60_000) });
        const unknown = run("nope");
        assert.equal(unknown.status, 2, unknown.stderr);
        assert.ok(unknown.stderr.includes(`no stack file stacks/Pulumi.nope.yaml: known stacks are ${KNOWN_STACKS}\n`), unknown.stderr);
        assert.match(unknown.stderr, /usage: npm run preflight/);
        const bad = run("dev", "--bogus");
        assert.equal(bad.status, 2);
        assert.match(bad.stderr, /preflight: unknown option --bogus/);
        const help = run("--help");
        assert.equal(help.status, 0);
        assert.match(help.stdout, /^usage: npm run preflight/);
        assert.equal(help.stderr, "");
    });
    test("loadStack reads stacks/Pulumi.<stack>.yaml as the plan does; a bad config is not an unknown stack", () => {
        const prod = loadStack("prod");
        assert.equal(prod.kind, "run");
        const { config, plan } = prod as Extract<typeof prod, { kind: "run" }>;
        assert.equal(config.target.kind, "kubernetes");
        assert.equal(plan.training.scheduling.priorityClassName, "training-high");
        assert.throws(
            () => loadStack("nope"),
            (e: Error) => e instanceof StackError && e.unknownStack && e.message.endsWith(`known stacks are ${KNOWN_STACKS}`),
        );
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "arl-preflight-"));
        try {
            const file = path.join(dir, "Pulumi.broken.yaml");
            fs.writeFileSync(file, "config:\n  agent-rl-infra:platform:\n    runId: x\n    target: { kind: docker }\n");
            assert.throws(
                () => loadStack("broken", file),
                (e: Error) =>
                    e instanceof StackError && !e.unknownStack && /stack broken's config is invalid \(npm run plan -- broken says the same\)/.test(e.message),
            );
            // A run stack on the cluster stack (stacks/Pulumi.cluster.yaml): the names it leaves out are the cluster stack's, as in the plan.
            const runFile = path.join(dir, "Pulumi.run-a.yaml");
            fs.writeFileSync(
                runFile,
                YAML.stringify({
                    config: {
                        "agent-rl-infra:platform": {
                            recipe: "opencode-blackbox",
                            runId: "a-001",
                            clusterStack: "org/agent-rl-infra/cluster",
                            images: { trainer: "registry.test/t:1" },
                            target: { kind: "kubernetes", context: "c" },
                            sandboxes: { image: "registry.test/s:1" },
                            ingress: { tls: { mode: "cert-manager" } },
                        },
                    },
                }),
            );
            const runStack = loadStack("run-a", runFile);
            assert.equal(runStack.kind, "run");
            const run = (runStack as Extract<typeof runStack, { kind: "run" }>).plan;
            const cluster = "the cluster stack org/agent-rl-infra/cluster's";
            assert.deepEqual(kubernetesNeeds(run).priorityClasses, {
                "agent-rl-training": [`target.priorityClassName or ${cluster}`],
                "agent-rl-sandboxes": [`sandboxes.priorityClassName or ${cluster}`],
            });
            assert.equal(kubernetesNeeds(run).issuer?.name, "internal-ca");
            const clusterFile = path.join(dir, "Pulumi.shared.yaml");
            fs.writeFileSync(clusterFile, "config:\n  agent-rl-infra:cluster:\n    target: { kind: kubernetes, context: c }\n");
            // A cluster stack is loaded as one (its own preflight), no longer refused.
            const shared = loadStack("shared", clusterFile);
            assert.equal(shared.kind, "cluster");
            assert.equal(shared.config.target.context, "c");
            // Keys that are no setting, and a platform that is not an object: clean messages, every problem at once.
            const typo = path.join(dir, "Pulumi.typo.yaml");
            fs.writeFileSync(typo, "config:\n  agent-rl-infra:plattform:\n    recipe: mbpp-whitebox\n");
            assert.throws(
                () => loadStack("typo", typo),
                (e: Error) =>
                    e instanceof StackError &&
                    !e.unknownStack &&
                    e.message.startsWith(
                        `config agent-rl-infra:platform is missing from ${path.relative(process.cwd(), typo)}, which has agent-rl-infra:plattform (did you mean agent-rl-infra:platform?)`,
                    ),
            );
            const str = path.join(dir, "Pulumi.str.yaml");
            fs.writeFileSync(str, "config:\n  agent-rl-infra:platform: not-an-object\n  agent-rl-infra:hfTokn: x\n");
            assert.throws(
                () => loadStack("str", str),
                (e: Error) =>
                    e instanceof StackError &&
                    /agent-rl-infra:hfTokn: not a setting of this project .*did you mean agent-rl-infra:hfToken\?/.test(e.message) &&
                    /agent-rl-infra:platform: must be an object .*got the string "not-an-object"/.test(e.message),
            );
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe("Kubernetes checks (pure)", () => {
    const plan = k8sPlan();
    const version = { gitVersion: "v1.36.3", major: "1", minor: "36" };
    const base = { context: "ctx", kubeconfig: "/k/config", server: "https://10.0.0.1:6443", contexts: ["ctx", "other"] };

    test("API server: answers, no such context, no current context, refused credentials, no answer, no kubeconfig", () => {
        assertFinding(
            checkConnection({ ...base, version: { ok: true, value: version } }, 10),
            "ok",
            /https:\/\/10\.0\.0\.1:6443 \(context ctx, kubeconfig \/k\/config\) answers: v1\.36\.3/,
        );
        assertFinding(
            checkConnection({ ...base, context: "gone", version: { ok: false, error: "error: context was not found for specified context: gone" } }, 10),
            "fail",
            /kubeconfig \/k\/config has no context 'gone'/,
            /set target\.context to one of: ctx, other/,
        );
        assertFinding(
            checkConnection({ ...base, context: "", version: { ok: false, error: "x" } }, 10),
            "fail",
            /has no current context and the stack names none/,
            /one of: ctx, other/,
        );
        assertFinding(
            checkConnection({ ...base, version: { ok: false, error: "error: You must be logged in to the server (Unauthorized)" } }, 10),
            "fail",
            /refused the credentials: You must be logged in/,
            /refresh the credentials of context ctx/,
        );
        assertFinding(
            checkConnection({ ...base, version: { ok: false, error: "Unable to connect to the server: dial tcp 10.0.0.1:6443: i/o timeout" } }, 7),
            "fail",
            /did not answer within 7 s: Unable to connect to the server/,
            /reachable from here \(VPN, firewall/,
        );
        assertFinding(
            checkConnection({ ...base, contexts: [], version: { ok: false, error: "error: stat /k/config: no such file or directory" } }, 10),
            "fail",
            /cannot read kubeconfig \/k\/config/,
            /set target\.kubeconfig to an existing kubeconfig file/,
        );
    });
    test("API server: no kubectl here", () => {
        assertFinding(
            checkConnection({ ...base, version: { ok: false, error: "cannot run kubectl: not installed (install kubectl, or set KUBECTL to its path)" } }, 10),
            "fail",
            /cannot run kubectl: not installed/,
            /install kubectl .*or set KUBECTL to its path/,
        );
    });
    test("when the API server does not answer, that is the only finding", () => {
        const f = checkKubernetes(plan, unansweredFacts({ ...base, version: { ok: false, error: "Unable to connect" } }));
        assert.deepEqual(
            f.map((x) => [x.check, x.status]),
            [["API server", "fail"]],
        );
    });
    test("what could not be read (RBAC) is a warning naming it, not a pass or a failure", () => {
        const forbidden = {
            ok: false as const,
            error: 'Error from server (Forbidden): nodes is forbidden: User "dev" cannot list resource "nodes"',
            forbidden: true,
        };
        const fine = { ok: true as const, value: [] as any[] };
        const f = checkKubernetes(plan, {
            ...base,
            version: { ok: true, value: version },
            nodes: forbidden,
            storageClasses: fine,
            priorityClasses: fine,
            runtimeClasses: fine,
            crds: forbidden,
            sandboxControllers: fine,
            jobSetControllers: fine,
            daemonSets: fine,
            dnsPods: { ok: true, value: 2 },
            namespaces: { ok: true, value: {} },
        });
        assertFinding(
            only(f, "GPU node"),
            "warn",
            /could not read nodes: Error from server \(Forbidden\).*\(unchecked\)/,
            /credentials that may list nodes \(read-only is enough\)/,
        );
        assertFinding(only(f, "agent-sandbox CRDs"), "warn", /could not read customresourcedefinitions/);
        assertFinding(only(f, "cert-manager"), "warn", /could not read customresourcedefinitions/);
    });
    test("version: >= 1.30 passes (a '+' minor too), older fails naming why", () => {
        assertFinding(checkVersion(version), "ok", /v1\.36\.3 \(>= 1\.30\)/);
        assertFinding(checkVersion({ gitVersion: "v1.31.2-gke.1", major: "1", minor: "31+" }), "ok", /v1\.31\.2-gke\.1/);
        assertFinding(
            checkVersion({ gitVersion: "v1.29.4", major: "1", minor: "29" }),
            "fail",
            /v1\.29\.4, older than 1\.30/,
            /upgrade the cluster to 1\.30 or newer.*ValidatingAdmissionPolicy/,
        );
    });
    test("tolerations: Kubernetes' matching rules", () => {
        const taint = { key: "nvidia.com/gpu", effect: "NoSchedule" };
        assert.ok(tolerates([{ key: "nvidia.com/gpu", operator: "Exists" }], taint), "Exists without effect tolerates every effect");
        assert.ok(tolerates([{ operator: "Exists" }], taint), "an empty key with Exists tolerates everything");
        assert.ok(!tolerates([{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoExecute" }], taint), "another effect does not");
        assert.ok(tolerates([{ key: "k", value: "v" }], { key: "k", value: "v", effect: "NoSchedule" }), "Equal is the default operator");
        assert.ok(!tolerates([{ key: "k", value: "w" }], { key: "k", value: "v", effect: "NoSchedule" }));
    });
    test("GPU node: fits; the training pod's size is both roles' GPUs, CPU and memory", () => {
        assertFinding(
            only(checkGpuNodes(plan, [h200(), node("cpu-0")]), "GPU node"),
            "ok",
            /^gpu-0 fits the training pod \(2 nvidia\.com\/gpu \(NVIDIA-H200\), 16 CPU, 128 GiB\)/,
        );
    });
    test("GPU node: none advertises the GPU resource (no device plugin)", () => {
        assertFinding(
            only(checkGpuNodes(plan, [node("cpu-0"), node("cpu-1")]), "GPU node"),
            "fail",
            /no node has allocatable nvidia\.com\/gpu \(2 nodes\); the training pod needs 2 nvidia\.com\/gpu/,
            /install the GPU device plugin .* or set target\.gpuResourceName/,
        );
        assertFinding(only(checkGpuNodes(plan, []), "GPU node"), "fail", /the cluster has no nodes/);
    });
    test("GPU node: too small", () => {
        assertFinding(
            only(checkGpuNodes(plan, [h200(1)]), "GPU node"),
            "fail",
            /no node fits the training pod .*: gpu-0: 1 nvidia\.com\/gpu allocatable, the pod needs 2/,
            /lower training\.gpusOnNode \(with vllmGpus\/trainerGpus\) to at most 1, or add a node with 2 nvidia\.com\/gpu/,
        );
    });
    test("GPU node: the wrong product for a pinned gpuProduct", () => {
        assertFinding(
            only(checkGpuNodes(plan, [h200(8, "NVIDIA-A100-SXM4-80GB")]), "GPU node"),
            "fail",
            /gpu-0: label nvidia\.com\/gpu\.product=NVIDIA-H200 wanted, node has nvidia\.com\/gpu\.product=NVIDIA-A100-SXM4-80GB/,
            /pin target\.gpuProduct to a product the nodes have \(NVIDIA-A100-SXM4-80GB\) or add NVIDIA-H200 nodes/,
        );
    });
    test("GPU node: a taint the tolerations do not tolerate, a nodeSelector no node matches, a cordoned node, too little memory", () => {
        const untolerated = planOf(k8sConfig({ target: { tolerations: [] } }));
        assertFinding(
            only(checkGpuNodes(untolerated, [h200()]), "GPU node"),
            "fail",
            /taint nvidia\.com\/gpu:NoSchedule not tolerated/,
            /add a toleration for each taint to target\.tolerations/,
        );
        const selector = planOf(k8sConfig({ target: { nodeSelector: { pool: "a100" } } }));
        assertFinding(only(checkGpuNodes(selector, [h200()]), "GPU node"), "fail", /label pool=a100 wanted, node has none/, /change target\.nodeSelector/);
        assertFinding(
            only(checkGpuNodes(plan, [{ ...h200(), spec: { ...h200().spec, unschedulable: true } }]), "GPU node"),
            "fail",
            /cordoned/,
            /uncordon the node/,
        );
        const small = h200();
        small.status.allocatable.memory = "64Gi";
        assertFinding(only(checkGpuNodes(plan, [small]), "GPU node"), "fail", /64 GiB memory allocatable, the pod needs 128 GiB/, /trainerMemory/);
    });
    test("multi-node (training.nodes > 1): a trainer pod per node on distinct nodes, vLLM's pod, the JobSet CRD", () => {
        const multi = k8sPlan({ recipe: "opencode-blackbox-32b", target: { gpuProduct: undefined } });
        const m = multi.training.multiNode!;
        const gpus = multi.training.trainer.gpus;
        const nodes = Array.from({ length: m.nodes + 1 }, (_, i) => ({ ...h200(8), metadata: { ...h200(8).metadata, name: `gpu-${i}` } }));
        const f = checkGpuNodes(multi, nodes);
        assertFinding(
            only(f, "GPU nodes: trainers"),
            "ok",
            new RegExp(`fit ${m.nodes} trainer pods \\(one per node\\) \\(${gpus} nvidia\\.com/gpu.*\\(${m.nodes} needed, one each\\)`),
        );
        assertFinding(only(f, "GPU node: vLLM"), "ok", /fit the vLLM pod/);
        const one = checkGpuNodes(multi, nodes.slice(0, 1));
        assertFinding(only(one, "GPU nodes: trainers"), "fail", /only gpu-0 fits .*\(2 needed, one each\)/, /add GPU nodes, or lower training\.nodes to 1/);
        assert.equal(stackRequests(multi)[multi.training.namespace]!.pods, String(m.nodes + 1), "a pod per node and vLLM's");
        assert.ok(kubernetesNeeds(multi).crds.includes("jobsets.jobset.x-k8s.io"));
        assertFinding(
            checkJobSet([]),
            "fail",
            /jobsets\.jobset\.x-k8s\.io missing: training\.nodes > 1 runs the trainer as a JobSet/,
            /install JobSet .*or train on one node/,
        );
        assertFinding(checkJobSet([crd("jobsets.jobset.x-k8s.io", [], [], { version: "v1alpha2" })]), "ok", /serves v1alpha2/);
    });
    test("JobSet controller (training.nodes > 1): none, none available, available", () => {
        assertFinding(
            checkJobSetController([]),
            "fail",
            /no Deployment labelled app\.kubernetes\.io\/part-of=jobset,app\.kubernetes\.io\/component=manager .*never get pods/,
            /install JobSet v0\.12\.0/,
        );
        const dep = (available: number) => ({
            metadata: { name: "jobset-controller-manager", namespace: "jobset-system" },
            spec: { replicas: 1 },
            status: { availableReplicas: available },
        });
        assertFinding(checkJobSetController([dep(0)]), "fail", /jobset-system\/jobset-controller-manager: 0 of 1 replicas available/, /describe deployment/);
        assertFinding(checkJobSetController([dep(1)]), "ok", /jobset-system\/jobset-controller-manager available \(1\/1\)/);
        const queued = planOf(k8sConfig({ target: { kueueQueue: "team-a" } }));
        assert.deepEqual(kubernetesNeeds(queued).kueue, { queue: "team-a", namespace: queued.names.namespaces.training });
        assert.ok(kubernetesNeeds(queued).crds.includes("localqueues.kueue.x-k8s.io"));
        assert.equal(kubernetesNeeds(planOf(k8sConfig())).kueue, undefined, "no queue: Kueue is not looked for");
    });
    test("Kueue (target.kueueQueue): not installed; no LocalQueue; the namespace not made yet; present", () => {
        const kueue = { queue: "team-a", namespace: "arl-pf-training" };
        const crds = [crd("localqueues.kueue.x-k8s.io", [], [], { version: "v1beta1" })];
        assertFinding(
            checkKueue(kueue, [], undefined, true),
            "fail",
            /Kueue is not installed .*nothing would ever admit it/,
            /^install Kueue v0\.17\.0 with the cluster stack \(kueue\.install: true\) or by hand \(kubectl apply --server-side -f https:\/\/github\.com\/kubernetes-sigs\/kueue\/releases\/download\/v0\.17\.0\/manifests\.yaml; its default configuration enables the batch\/job and jobset\.x-k8s\.io\/jobset integrations\), then create the queues \(docs\/guides\/multi-node\.md, "Kueue: queued runs"\); or remove target\.kueueQueue$/,
        );
        assertFinding(
            checkKueue(kueue, crds, undefined, true),
            "fail",
            /no LocalQueue arl-pf-training\/team-a/,
            /^create LocalQueue team-a in arl-pf-training pointing at a ClusterQueue with GPU quota \(docs\/guides\/multi-node\.md, "Kueue: queued runs": a ResourceFlavor, the ClusterQueue, the LocalQueue\)$/,
        );
        assertFinding(checkKueue(kueue, crds, undefined, false), "warn", /namespace arl-pf-training does not exist yet/, /right after the first up/);
        assertFinding(checkKueue(kueue, crds, { metadata: { name: "team-a" } }, true), "ok", /LocalQueue arl-pf-training\/team-a exists/);
    });
    test("StorageClass: the default one; none default; a named one missing; several defaults", () => {
        const sc = (name: string, def: boolean, reclaimPolicy = "Retain") => ({
            metadata: {
                name,
                annotations: def ? { "storageclass.kubernetes.io/is-default-class": "true" } : {},
                creationTimestamp: `2026-01-0${name.length}T00:00:00Z`,
            },
            provisioner: "csi.example",
            reclaimPolicy,
        });
        const fine = checkStorage(plan, [sc("standard", true), sc("fast", false)]);
        assertFinding(only(fine, "StorageClass"), "ok", /^default standard \(provisioner csi\.example, reclaimPolicy Retain\)/);
        assertFinding(only(fine, "Checkpoint reclaim policy"), "ok", /reclaimPolicy Retain, checkpoints outlive their claim/);
        assertFinding(
            only(checkStorage(plan, [sc("fast", false)]), "StorageClass"),
            "fail",
            /no default StorageClass \(target\.storageClassName is unset\); the cluster has: fast/,
            /set target\.storageClassName to one of them, or mark one default: kubectl patch storageclass/,
        );
        assertFinding(only(checkStorage(plan, []), "StorageClass"), "fail", /the cluster has: none/, /install a CSI driver/);
        const named = planOf(k8sConfig({ target: { storageClassName: "premium" } }));
        assertFinding(
            only(checkStorage(named, [sc("standard", true)]), "StorageClass"),
            "fail",
            /no StorageClass premium \(target\.storageClassName\); the cluster has: standard/,
            /set target\.storageClassName to one of them, or create premium/,
        );
        assertFinding(
            only(checkStorage(plan, [sc("aa", true), sc("bbbb", true)]), "StorageClass"),
            "warn",
            /2 default classes \(aa, bbbb\); claims get the newest, bbbb/,
        );
    });
    test("Checkpoint reclaim policy: Delete warns (checkpoints go with their claim)", () => {
        const del = {
            metadata: { name: "standard", annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
            provisioner: "p",
            reclaimPolicy: "Delete",
        };
        assertFinding(
            only(checkStorage(plan, [del]), "Checkpoint reclaim policy"),
            "warn",
            /StorageClass standard has reclaimPolicy Delete: deleting the checkpoints claim \(or its namespace\) deletes the checkpoints/,
            /use a class with reclaimPolicy Retain for checkpoints/,
        );
        const noCheckpoints = planOf(k8sConfig({ training: { checkpoints: { enabled: false, size: "100Gi" } } }));
        assert.equal(
            checkStorage(noCheckpoints, [del]).some((f) => f.check === "Checkpoint reclaim policy"),
            false,
            "not checked without checkpoints",
        );
    });
    test("PriorityClass and RuntimeClass: found or missing, naming the config field", () => {
        assertFinding(
            checkPriorityClass("training-high", ["target.priorityClassName"], [{ metadata: { name: "training-high" }, value: 1000000 }]),
            "ok",
            /training-high \(value 1000000\)/,
        );
        assertFinding(
            checkPriorityClass("training-high", ["target.priorityClassName"], []),
            "fail",
            /no PriorityClass training-high \(target\.priorityClassName\): those pods are refused/,
            /kubectl create priorityclass training-high --value=1000000.*or name an existing one/,
        );
        const both = kubernetesNeeds(k8sPlan({ sandboxes: { priorityClassName: "sandbox-low" } }));
        assert.deepEqual(both.priorityClasses, { "training-high": ["target.priorityClassName"], "sandbox-low": ["sandboxes.priorityClassName"] });
        assertFinding(
            checkRuntimeClass("gvisor", ["sandboxes.runtimeClassName"], [{ metadata: { name: "gvisor" }, handler: "runsc" }]),
            "ok",
            /gvisor \(handler runsc; .*not checked\)/,
        );
        assertFinding(
            checkRuntimeClass("gvisor", ["sandboxes.runtimeClassName", "envs.coding.runtimeClassName"], []),
            "fail",
            /no RuntimeClass gvisor \(sandboxes\.runtimeClassName, envs\.coding\.runtimeClassName\)/,
            /create the RuntimeClass.*"name":"gvisor".*or unset sandboxes\.runtimeClassName and envs\.coding\.runtimeClassName/,
        );
        const withEnv = kubernetesNeeds(
            planOf(k8sConfig({ envs: { coding: { catalog: "coding", runtimeClassName: "gvisor" }, echo: { catalog: "echo", runtimeClassName: "kata" } } })),
        );
        assert.deepEqual(withEnv.runtimeClasses, {
            gvisor: ["sandboxes.runtimeClassName", "envs.coding.runtimeClassName"],
            kata: ["envs.echo.runtimeClassName"],
        });
    });
    test("agent-sandbox CRDs: the v1.0.1 schema; missing; an older schema", () => {
        const crds = sandboxCrds(plan);
        assertFinding(checkSandboxCrds(plan, crds), "ok", /4 CRDs serve v1beta1 with the v1\.0\.1 fields the stack and the trainer use/);
        assertFinding(
            checkSandboxCrds(plan, []),
            "fail",
            /agent-sandbox is not installed \(sandboxes\.agents\.x-k8s\.io, .* missing\)/,
            /install agent-sandbox v1\.0\.1 .*kubectl apply --server-side -f https:\/\/github\.com\/kubernetes-sigs\/agent-sandbox\/releases\/download\/v1\.0\.1\/sandbox-with-extensions\.yaml/,
        );
        const older = crds.map((c) =>
            c.metadata.name.startsWith("sandboxtemplates.")
                ? crd(
                      c.metadata.name,
                      Object.keys(c.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties).filter((k) => k !== "volumeClaimTemplatesPolicy"),
                      [],
                  )
                : c,
        );
        assertFinding(
            checkSandboxCrds(plan, older),
            "fail",
            /the schema does not match v1\.0\.1: sandboxtemplates\.extensions\.agents\.x-k8s\.io v1beta1 has no spec\.volumeClaimTemplatesPolicy/,
        );
        const alphaOnly = crds.map((c) => (c.metadata.name.startsWith("sandboxclaims.") ? crd(c.metadata.name, ["warmpool"], [], { version: "v1alpha1" }) : c));
        assertFinding(
            checkSandboxCrds(plan, alphaOnly),
            "fail",
            /an agent-sandbox release before v1\.0 is installed: sandboxclaims\.extensions\.agents\.x-k8s\.io serves v1alpha1$/,
        );
        const noScale = crds.map((c) =>
            c.metadata.name.startsWith("sandboxwarmpools.") ? crd(c.metadata.name, ["replicas", "sandboxTemplateRef", "updateStrategy"], []) : c,
        );
        assertFinding(checkSandboxCrds(plan, noScale), "fail", /sandboxwarmpools\.extensions\.agents\.x-k8s\.io v1beta1 has no scale subresource/);
        assertFinding(checkSandboxCrds(plan, []), "fail", /agent-sandbox is not installed/, /with the cluster stack \(agentSandbox\.install\)/);
    });
    test("agent-sandbox CRDs: a v0.5.x install (v1alpha1 served, conversion webhook, objects stored as v1alpha1) is refused, naming the migration", () => {
        // What agent-sandbox v0.5.6's k8s/crds say on every CRD: v1beta1 (storage) and v1alpha1 served, conversion through the controller's webhook.
        const v05 = (c: any, stored: readonly string[] = ["v1beta1"]) => ({
            ...c,
            spec: {
                ...c.spec,
                versions: [...c.spec.versions, { name: "v1alpha1", served: true, storage: false, schema: { openAPIV3Schema: { properties: {} } } }],
                conversion: { strategy: "Webhook", webhook: { conversionReviewVersions: ["v1"] } },
            },
            status: { storedVersions: stored },
        });
        const crds = sandboxCrds(plan);
        const f = checkSandboxCrds(
            plan,
            crds.map((c) => v05(c)),
        );
        assertFinding(
            f,
            "fail",
            /^an agent-sandbox release before v1\.0 is installed: sandboxes\.agents\.x-k8s\.io serves v1alpha1; sandboxes\.agents\.x-k8s\.io converts through a webhook; /,
            /^agent-sandbox v0\.5\.x is not supported: upgrade to v1\.0\.1: `pulumi up` the cluster stack \(agentSandbox\.install; docs\/guides\/platform-teams\.md, "Upgrading agent-sandbox from v0\.5\.x"\) or by hand \(kubectl apply --server-side --force-conflicts -f https:\/\/github\.com\/kubernetes-sigs\/agent-sandbox\/releases\/download\/v1\.0\.1\/sandbox-with-extensions\.yaml, then delete the v0\.5\.x webhook Service, Secret, Role and RoleBinding in agent-sandbox-system\)$/,
        );
        assert.doesNotMatch(f.fix, /storedVersions/, "nothing stored as v1alpha1: no storage migration asked for");
        // Objects still stored as v1alpha1: the v0.5 storage migration comes first (a v1.0 CRD cannot be applied over them).
        const stored = crds.map((c) => (c.metadata.name.startsWith("sandboxclaims.") ? v05(c, ["v1alpha1", "v1beta1"]) : v05(c)));
        assertFinding(
            checkSandboxCrds(plan, stored),
            "fail",
            /sandboxclaims\.extensions\.agents\.x-k8s\.io has objects stored as v1alpha1/,
            /^agent-sandbox v0\.5\.x is not supported: first migrate the stored objects to v1beta1 and prune v1alpha1 from each CRD's status\.storedVersions \(agent-sandbox v0\.5\.2 docs\/api-migration-guide\.md\), then upgrade to v1\.0\.1/,
        );
        // The v1.0 CRDs (v1beta1 only, no conversion, stored v1beta1) pass.
        assertFinding(
            checkSandboxCrds(
                plan,
                crds.map((c) => ({ ...c, status: { storedVersions: ["v1beta1"] } })),
            ),
            "ok",
            /4 CRDs serve v1beta1/,
        );
        assert.deepEqual(preV1SandboxMarks({ metadata: { name: "x" }, spec: { versions: [{ name: "v1beta1", served: true }] } }), []);
    });
    test("agent-sandbox controller: none, not available, without --extensions, available", () => {
        const dep = (available: number, args = ["--leader-elect=true", "--extensions"]) => ({
            metadata: { name: "agent-sandbox-controller", namespace: "agent-sandbox-system" },
            spec: { replicas: 1, template: { spec: { containers: [{ name: "c", args }] } } },
            status: { availableReplicas: available },
        });
        assertFinding(
            checkSandboxController([]),
            "fail",
            /no Deployment labelled app=agent-sandbox-controller in any namespace/,
            /sandbox-with-extensions\.yaml/,
        );
        assertFinding(
            checkSandboxController([dep(0)]),
            "fail",
            /agent-sandbox-system\/agent-sandbox-controller: 0 of 1 replicas available/,
            /kubectl -n agent-sandbox-system describe deployment agent-sandbox-controller/,
        );
        assertFinding(checkSandboxController([dep(1, ["--leader-elect=true"])]), "fail", /runs without --extensions/);
        assertFinding(checkSandboxController([dep(1)]), "ok", /agent-sandbox-system\/agent-sandbox-controller available \(1\/1\), with --extensions/);
    });
    test("Gateway API: CRDs, the named Gateway, its listener and whether it admits the ingress namespace", () => {
        const p = k8sPlan({
            ingress: { exposure: "httproute", host: "vllm.example.com", gateway: { name: "public", namespace: "gw" }, tls: { mode: "none" } },
        });
        const ns = p.names.namespaces.ingress;
        const crds = ["gateways.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io"].map(v1Crd);
        const gw = (from: string, programmed = "True", listener = "https") => ({
            metadata: { name: "public", namespace: "gw" },
            spec: { listeners: [{ name: listener, allowedRoutes: { namespaces: { from } } }] },
            status: { conditions: [{ type: "Programmed", status: programmed, reason: "Pending", message: "no address" }] },
        });
        assertFinding(
            only(checkGateway(p, [], undefined), "Gateway API"),
            "fail",
            /gateways\.gateway\.networking\.k8s\.io missing; httproutes/,
            /install the Gateway API standard CRDs/,
        );
        assertFinding(only(checkGateway(p, crds, undefined), "Gateway"), "fail", /no Gateway gw\/public \(ingress\.gateway\)/, /kubectl get gateways -A/);
        assertFinding(
            only(checkGateway(p, crds, gw("Same")), "Gateway"),
            "fail",
            new RegExp(`admits routes only from its own namespace gw, not from ${ns}`),
            /allowedRoutes\.namespaces\.from to All/,
        );
        assertFinding(only(checkGateway(p, crds, gw("Selector")), "Gateway"), "warn", /label selector/);
        assertFinding(only(checkGateway(p, crds, gw("All", "False")), "Gateway"), "warn", /is not Programmed \(Pending: no address\)/);
        assertFinding(only(checkGateway(p, crds, gw("All")), "Gateway"), "ok", new RegExp(`gw/public is Programmed and admits routes from ${ns}`));
        const section = k8sPlan({
            ingress: {
                exposure: "httproute",
                host: "vllm.example.com",
                gateway: { name: "public", namespace: "gw", sectionName: "tls" },
                tls: { mode: "none" },
            },
        });
        assertFinding(only(checkGateway(section, crds, gw("All")), "Gateway"), "fail", /has no listener tls \(listeners: https\)/);
    });
    test("cert-manager: CRDs, the ClusterIssuer or Issuer, Ready", () => {
        const crds = ["certificates.cert-manager.io", "clusterissuers.cert-manager.io", "issuers.cert-manager.io"].map(v1Crd);
        const ready = (status: string) => ({
            metadata: { name: "internal-ca" },
            status: { conditions: [{ type: "Ready", status, reason: "ErrGetKeyPair", message: "secret not found" }] },
        });
        assertFinding(
            only(checkCertManager(plan, [], undefined, false), "cert-manager"),
            "fail",
            /certificates\.cert-manager\.io missing; clusterissuers/,
            /install cert-manager \(kubectl apply -f https:\/\/github\.com\/cert-manager/,
        );
        assertFinding(
            only(checkCertManager(plan, crds, undefined, false), "Issuer"),
            "fail",
            /no ClusterIssuer internal-ca \(ingress\.tls\.issuer\)/,
            /kubectl get clusterissuers/,
        );
        assertFinding(
            only(checkCertManager(plan, crds, ready("False"), false), "Issuer"),
            "warn",
            /exists but is not Ready \(ErrGetKeyPair: secret not found\)/,
        );
        assertFinding(only(checkCertManager(plan, crds, ready("True"), false), "Issuer"), "ok", /ClusterIssuer internal-ca is Ready/);
        const issuer = k8sPlan({ ingress: { tls: { issuer: { name: "ns-ca", kind: "Issuer" } } } });
        assertFinding(
            only(checkCertManager(issuer, crds, undefined, false), "Issuer"),
            "fail",
            /an Issuer must live in the ingress namespace .*, which does not exist yet/,
            /use a ClusterIssuer/,
        );
        const external = k8sPlan({ ingress: { tls: { issuer: { name: "pca", kind: "ClusterIssuer", group: "awspca.cert-manager.io" } } } });
        assertFinding(
            only(checkCertManager(external, crds, undefined, true), "Issuer"),
            "warn",
            /group awspca\.cert-manager\.io \(an external issuer\) is not checked/,
        );
    });
    test("TLS Secret: its namespace not created yet, missing, not a TLS secret, present", () => {
        const p = k8sPlan({ ingress: { tls: { mode: "secret", secretName: "vllm-tls" } } });
        const ns = p.names.namespaces.ingress;
        assertFinding(
            checkTlsSecret(p, undefined, false),
            "warn",
            new RegExp(`namespace ${ns} does not exist yet`),
            /kubectl -n .* create secret tls vllm-tls/,
        );
        assertFinding(checkTlsSecret(p, undefined, true), "fail", new RegExp(`no Secret ${ns}/vllm-tls`), /create secret tls vllm-tls --cert=/);
        assertFinding(checkTlsSecret(p, { type: "Opaque", keys: ["cert"] }, true), "fail", /\(type Opaque\) has no tls\.crt, tls\.key/);
        assertFinding(checkTlsSecret(p, { type: "kubernetes.io/tls", keys: ["tls.crt", "tls.key"] }, true), "ok", /holds tls\.crt and tls\.key/);
        assert.deepEqual(kubernetesNeeds(p).tlsSecret, { name: "vllm-tls", namespace: ns });
    });
    test("NetworkPolicy CNI: a heuristic by DaemonSet name, a warning (never a failure) when none is found", () => {
        const ds = (name: string, namespace = "kube-system") => ({ metadata: { name, namespace } });
        assertFinding(
            checkCni([ds("kube-proxy"), ds("calico-node", "calico-system")]),
            "ok",
            /calico-system\/calico-node \(Calico\) runs.*a heuristic: by DaemonSet name/,
        );
        assertFinding(checkCni([ds("cilium")]), "ok", /Cilium/);
        assertFinding(
            checkCni([ds("kube-flannel-ds", "kube-flannel")]),
            "warn",
            /only flannel .*which does not enforce NetworkPolicy.*this is a heuristic/,
            /if your CNI enforces NetworkPolicy under another name, ignore this/,
        );
        assertFinding(checkCni([ds("kube-proxy")]), "warn", /no DaemonSet of a NetworkPolicy-enforcing CNI \(calico-node, canal, cilium/);
    });
    test("what the stack requests, per namespace, from the components' own pod specs", () => {
        const r = stackRequests(plan);
        const t = r[plan.training.namespace]!;
        assert.equal(t["requests.nvidia.com/gpu"], "2");
        assert.equal(t["requests.cpu"], "16");
        assert.equal(t["requests.memory"], "128Gi");
        assert.equal(t.persistentvolumeclaims, "2");
        assert.equal(t["requests.storage"], "310Gi");
        const sb = r[plan.sandboxes!.names.namespace]!;
        assert.equal(sb.pods, String(plan.sandboxes!.quota.pods));
        assert.equal(r[plan.names.namespaces.ingress]!.pods, String(plan.ingress!.replicas));
        assert.deepEqual(
            podTotals(
                {
                    containers: [{ resources: { limits: { cpu: "1", memory: "1Gi" } } }],
                    initContainers: [
                        { restartPolicy: "Always", resources: { requests: { cpu: "500m" } } },
                        { resources: { requests: { cpu: "4", memory: "512Mi" } } },
                    ],
                },
                "nvidia.com/gpu",
            ),
            { pods: "1", "requests.cpu": "4", "limits.cpu": "1", "requests.memory": "1Gi", "limits.memory": "1Gi" },
            "a request left out is the limit; sidecars add up; a plain init container counts when larger",
        );
    });
    test("Quota headroom: no namespace yet, a quota that fits, one too small, the stack's own pods and claims count as free", () => {
        const ns = plan.training.namespace;
        const quota = (hard: Record<string, string>, used: Record<string, string>, name = "team") => ({ metadata: { name }, status: { hard, used } });
        assertFinding(checkQuotas(plan, {}), "ok", /no ResourceQuota in the stack's existing namespaces; .* do not exist yet/);
        const fits = {
            quotas: [quota({ "requests.nvidia.com/gpu": "8", "requests.cpu": "64" }, { "requests.nvidia.com/gpu": "2", "requests.cpu": "8" })],
            stackPods: [],
            claims: [],
        };
        assertFinding(checkQuotas(plan, { [ns]: fits }), "ok", new RegExp(`the stack fits ${ns}/team`));
        const tight = {
            quotas: [quota({ "requests.nvidia.com/gpu": "2", persistentvolumeclaims: "2" }, { "requests.nvidia.com/gpu": "1", persistentvolumeclaims: "1" })],
            stackPods: [],
            claims: [],
        };
        assertFinding(
            checkQuotas(plan, { [ns]: tight }),
            "fail",
            new RegExp(
                `${ns} quota team requests\\.nvidia\\.com/gpu: the stack needs 2, 1 free \\(hard 2, used 1\\); ${ns} quota team persistentvolumeclaims: the stack needs 2, 1 free`,
            ),
            /raise the quota \(kubectl -n <namespace> edit resourcequota <name>\) or lower what the stack requests/,
        );
        const held = {
            ...tight,
            stackPods: [{ spec: { containers: [{ resources: { requests: { "nvidia.com/gpu": "1" }, limits: { "nvidia.com/gpu": "1" } } }] } }],
            claims: [plan.training.checkpoints!.name],
        };
        assertFinding(checkQuotas(plan, { [ns]: held }), "ok", /the stack fits/, undefined);
        const own = plan.sandboxes!.names.quota;
        assertFinding(
            checkQuotas(plan, { [plan.sandboxes!.names.namespace]: { quotas: [quota({ pods: "1" }, { pods: "1" }, own)], stackPods: [], claims: [] } }),
            "ok",
            /no ResourceQuota/,
        );
    });
    test("what is read follows the config: no gateway, issuer or secret lookups unless the config uses them", () => {
        const whiteBox = kubernetesNeeds(
            planOf(parseWithTestImages({ recipe: "mbpp-whitebox", runId: "r", target: { kind: "kubernetes", context: "c" } }, "wb")),
        );
        assert.deepEqual(whiteBox.crds, []);
        assert.equal(whiteBox.sandboxController, false);
        assert.equal(whiteBox.gateway, undefined);
        assert.equal(whiteBox.issuer, undefined);
        assert.deepEqual(whiteBox.priorityClasses, {});
        const needs = kubernetesNeeds(plan);
        assert.deepEqual(needs.priorityClasses, { "training-high": ["target.priorityClassName"] });
        assert.ok(needs.crds.includes("clusterissuers.cert-manager.io"));
        assert.ok(needs.crds.includes("sandboxwarmpools.extensions.agents.x-k8s.io"));
    });
});

describe("Docker checks (pure)", () => {
    const plan = planOf(dockerConfig());
    test("daemon: answers; not running; permission denied; ssh; no CLI", () => {
        assertFinding(
            checkDaemon("unix:///var/run/docker.sock", { ok: true, value: { version: "28.2.2", apiVersion: "1.50", os: "linux", arch: "amd64" } }),
            "ok",
            /answers: Docker 28\.2\.2 \(linux\/amd64\)/,
        );
        assertFinding(
            checkDaemon("unix:///var/run/docker.sock", {
                ok: false,
                error: "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
            }),
            "fail",
            /did not answer: Cannot connect to the Docker daemon/,
            /sudo systemctl start docker.*or set target\.host/,
        );
        assertFinding(
            checkDaemon("unix:///var/run/docker.sock", { ok: false, error: "permission denied while trying to connect" }),
            "fail",
            /permission denied/,
            /docker group/,
        );
        assertFinding(
            checkDaemon("ssh://gpu@h1", { ok: false, error: "ssh: connect to host h1 port 22: Connection refused" }),
            "fail",
            /ssh:\/\/gpu@h1 did not answer/,
            /ssh gpu@h1 works without a password prompt/,
        );
        assertFinding(
            checkDaemon("unix:///x", { ok: false, error: "cannot run docker: not installed" }),
            "fail",
            /cannot run docker/,
            /install the Docker CLI/,
        );
    });
    test("API version: >= 1.40 (device requests)", () => {
        assertFinding(checkApiVersion({ version: "28.2.2", apiVersion: "1.50", minApiVersion: "1.24" }), "ok", /API 1\.50 \(min 1\.24\), >= 1\.40/);
        assertFinding(
            checkApiVersion({ version: "18.09.1", apiVersion: "1.39" }),
            "fail",
            /API 1\.39 \(Docker 18\.09\.1\), older than 1\.40: GPU device requests are refused/,
            /upgrade Docker Engine/,
        );
    });
    test("NVIDIA runtime: registered, CDI devices, or neither (the message says what to install)", () => {
        assertFinding(
            checkNvidiaRuntime({ runtimes: ["nvidia", "runc"], cdiDevices: [] }),
            "ok",
            /the nvidia runtime is registered \(runtimes: nvidia, runc\)/,
        );
        assertFinding(
            checkNvidiaRuntime({ runtimes: ["runc"], cdiDevices: ["nvidia.com/gpu=0", "nvidia.com/gpu=all"] }),
            "ok",
            /CDI GPU devices: nvidia\.com\/gpu=0, nvidia\.com\/gpu=all/,
        );
        assertFinding(
            checkNvidiaRuntime({ runtimes: ["io.containerd.runc.v2", "runc"], cdiDevices: [] }),
            "fail",
            /no nvidia runtime and no CDI GPU devices \(runtimes: io\.containerd\.runc\.v2, runc\): GPU containers cannot start/,
            /install the NVIDIA Container Toolkit .*nvidia-container-toolkit.*sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker/,
        );
    });
    test("GPU count: from CDI devices; unknown with the runtime alone; not reported without either", () => {
        assert.equal(gpusNeeded(plan), 2);
        assertFinding(
            checkGpuCount(plan, { runtimes: ["runc"], cdiDevices: ["nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=all"] })!,
            "ok",
            /2 GPUs \(CDI\), the stack uses 2/,
        );
        assertFinding(
            checkGpuCount(plan, { runtimes: ["runc"], cdiDevices: ["nvidia.com/gpu=0", "nvidia.com/gpu=GPU-1234"] })!,
            "fail",
            /1 GPUs \(CDI\), the stack uses 2 \(devices 0\.\.1\)/,
            /lower training\.gpusOnNode to 1/,
        );
        assertFinding(
            checkGpuCount(plan, { runtimes: ["nvidia", "runc"], cdiDevices: [] })!,
            "warn",
            /docker info does not report GPUs/,
            /nvidia-smi -L lists 2 or more.*nvidia-ctk cdi generate/,
        );
        assert.equal(checkGpuCount(plan, { runtimes: ["runc"], cdiDevices: [] }), undefined, "the NVIDIA runtime finding already fails");
    });
    test("free space in dataDir: enough, too little (a warning: Docker does not hold a size), unchecked on a remote host", () => {
        assertFinding(
            checkDataDir(plan, { checkedPath: "/srv/agent-rl", freeBytes: 2 * 1024 ** 4 }),
            "ok",
            /2048 GiB free under \/srv\/agent-rl, the stack plans model cache 200Gi \+ checkpoints 100Gi/,
        );
        assertFinding(
            checkDataDir(plan, { checkedPath: "/srv", freeBytes: 59 * 1024 ** 3 }),
            "warn",
            /59 GiB free under \/srv\/agent-rl \(not there yet; measured at \/srv\), less than the model cache 200Gi \+ checkpoints 100Gi/,
            /move target\.dataDir to a larger disk, or lower training\.modelCache\.size/,
        );
        assertFinding(
            checkDataDir(plan, { unchecked: "ssh://h is not a local socket" }),
            "warn",
            /\/srv\/agent-rl: unchecked \(ssh:\/\/h is not a local socket\)/,
            /df -h \/srv\/agent-rl/,
        );
    });
    test("host ports: a Docker stack publishes none (the ingress, the one container that would, is the black box's); docker ps's ports parsed", () => {
        assert.deepEqual(publishedPorts(plan), []);
        const containers = (list: Array<{ name: string; ports: string }>) => ({
            ok: true as const,
            value: list.map((c) => ({ name: c.name, ports: parsePorts(c.ports) })),
        });
        assertFinding(
            checkPorts(plan, { containers: containers([{ name: "grafana", ports: "0.0.0.0:443->3000/tcp" }]), localPortsInUse: ["0.0.0.0:8000"] }),
            "ok",
            /publishes no host ports/,
        );
        assertFinding(checkPorts(planOf(dockerConfig({ recipe: "mbpp-whitebox" })), { containers: containers([]) }), "ok", /publishes no host ports/);
        assert.deepEqual(parsePorts("127.0.0.1:9000-9001->9000-9001/tcp"), [
            { ip: "127.0.0.1", port: 9000, protocol: "tcp" },
            { ip: "127.0.0.1", port: 9001, protocol: "tcp" },
        ]);
    });
    test("host capacity: the stack's summed container limits against docker info's NCPU and MemTotal", () => {
        const m64 = planOf(dockerConfig({ recipe: "mbpp-whitebox-64", images: {} }));
        const [mem, cpu] = checkHostCapacity(m64, { ncpu: 32, memTotalBytes: 128 * 1024 ** 3 });
        assertFinding(
            mem!,
            "fail",
            /^68 containers limited to 324\.3 GiB in all, but the host has 128 GiB \(MemTotal\): Docker starts them all, and the kernel's OOM killer ends containers/,
            /^lower the largest shares, 65 x env `coding` replicas \(envs\.coding\.resources\) and 1 x trainer \(vLLM colocated\) \(training\.trainerCpu \/ trainerMemory\), by 196\.3 GiB or more/,
        );
        assert.equal(mem!.check, "Host memory");
        assertFinding(
            cpu!,
            "warn",
            /^68 containers limited to 138\.6 CPUs in all, but the host has 32 \(NCPU\): they share them/,
            /to fit 32 CPUs, or use a host with more/,
        );
        assert.equal(cpu!.check, "Host CPUs");
        const fits = checkHostCapacity(m64, { ncpu: 192, memTotalBytes: 2048 * 1024 ** 3 });
        assert.deepEqual(
            fits.map((f) => [f.status, f.found]),
            [
                ["ok", "68 containers limited to 324.3 GiB in all, the host has 2048 GiB"],
                ["ok", "68 containers limited to 138.6 CPUs in all, the host has 192"],
            ],
        );
        const unknown = checkHostCapacity(m64, {});
        assert.deepEqual(
            unknown.map((f) => f.status),
            ["warn", "warn"],
        );
        assert.match(unknown[0]!.found, /does not report MemTotal.*324\.3 GiB in all \(unchecked\)/);
        assert.deepEqual(checkHostCapacity(planOf(k8sConfig()), { ncpu: 1, memTotalBytes: 1 }), [], "a Kubernetes stack has no host to sum");
    });
    test("checkDocker reports the host capacity beside the GPU checks", () => {
        const f = checkDocker(plan, {
            host: "unix:///x.sock",
            version: { ok: true, value: { version: "28.2.2", apiVersion: "1.50" } },
            info: {
                ok: true,
                value: { runtimes: ["nvidia", "runc"], defaultRuntime: "runc", cdiDevices: [], cdiSpecDirs: [], ncpu: 8, memTotalBytes: 64 * 1024 ** 3 },
            },
            containers: { ok: true, value: [] },
            disk: { checkedPath: "/srv/agent-rl", freeBytes: 1024 ** 4 },
        });
        // vLLM and the trainer 8 CPUs / 64 GiB each, 17 coding env replicas 2 CPUs / 4 GiB each, the env's router and responder.
        assertFinding(only(f, "Host memory"), "fail", /^21 containers limited to 196\.3 GiB in all, but the host has 64 GiB/);
        assertFinding(only(f, "Host CPUs"), "warn", /^21 containers limited to 50\.6 CPUs in all, but the host has 8/);
    });
    test("docker info failing is a warning (unchecked), not a pass", () => {
        const f = checkDocker(plan, {
            host: "unix:///x.sock",
            version: { ok: true, value: { version: "28.2.2", apiVersion: "1.50" } },
            info: { ok: false, error: "error during connect: EOF" },
            containers: { ok: true, value: [] },
            disk: { checkedPath: "/srv/agent-rl", freeBytes: 1024 ** 4 },
        });
        assertFinding(only(f, "NVIDIA runtime"), "warn", /docker info failed: error during connect: EOF \(unchecked\)/);
    });
    test("when the daemon does not answer, that is the only finding", () => {
        const f = checkDocker(plan, {
            host: "unix:///x.sock",
            version: { ok: false, error: "Cannot connect" },
            info: { ok: false, error: "" },
            containers: { ok: false, error: "" },
            disk: { unchecked: "" },
        } satisfies DockerFacts);
        assert.deepEqual(
            f.map((x) => x.check),
            ["Docker daemon"],
        );
    });
});

// -------------------------------------------------------------------------------------------------
// Live targets

const skip = engineSkipReason();

describe("against the simulated cluster, each prerequisite removed in turn", { skip, timeout: scaled(15 * 60_000) }, () => {
    let cluster: Cluster | undefined;
    let release: (() => void) | undefined;
    let kubectlPath = "";
    const crdDir = path.join(fixtureCacheDir(), "crds");
    const controller = {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "agent-sandbox-controller", namespace: "agent-sandbox-system", labels: { app: "agent-sandbox-controller" } },
        spec: {
            replicas: 1,
            selector: { matchLabels: { app: "agent-sandbox-controller" } },
            template: {
                metadata: { labels: { app: "agent-sandbox-controller" } },
                spec: {
                    containers: [
                        {
                            name: "agent-sandbox-controller",
                            image: "registry.test/agent-sandbox-controller:v1.0.1",
                            args: ["--leader-elect=true", "--extensions"],
                        },
                    ],
                },
            },
        },
    };
    const issuer = { apiVersion: "cert-manager.io/v1", kind: "ClusterIssuer", metadata: { name: "internal-ca" }, spec: { selfSigned: {} } };
    const calico = {
        apiVersion: "apps/v1",
        kind: "DaemonSet",
        metadata: { name: "calico-node", namespace: "kube-system" },
        spec: {
            selector: { matchLabels: { k8s: "calico-node" } },
            template: { metadata: { labels: { k8s: "calico-node" } }, spec: { containers: [{ name: "calico-node", image: "registry.test/calico:test" }] } },
        },
    };
    // The cluster's DNS as kubeadm's CoreDNS labels it (target.dns kube-dns, the default, allows exactly these pods).
    const coreDns = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "coredns-standin", namespace: "kube-system", labels: { "k8s-app": "kube-dns" } },
        spec: { containers: [{ name: "coredns", image: "registry.test/coredns:test" }] },
    };
    const config = (over: Record<string, unknown> = {}) =>
        k8sConfig(deepMerge({ target: { kubeconfig: cluster!.kubeconfig, context: cluster!.context } }, over) as Record<string, unknown>, "pf-live");
    const preflight = async (over: Record<string, unknown> = {}) => (await runPreflight(config(over), { kubectl: kubectlPath, timeoutMs: 15_000 })).findings;
    const apply = (obj: unknown) => cluster!.kubectlOk(["apply", "--server-side", "--force-conflicts", "-f", "-"], JSON.stringify(obj));
    const setIssuerReady = () =>
        cluster!.kubectlOk([
            "patch",
            "clusterissuer",
            "internal-ca",
            "--subresource=status",
            "--type=merge",
            "-p",
            JSON.stringify({
                status: { conditions: [{ type: "Ready", status: "True", reason: "IsReady", message: "ok", lastTransitionTime: "2026-11-30T00:00:00Z" }] },
            }),
        ]);
    const controllerAvailable = () =>
        cluster!.waitFor("the stand-in agent-sandbox controller to be available", async () => {
            const d = await cluster!.getJson(["deployment", "agent-sandbox-controller", "-n", "agent-sandbox-system"]);
            return (d?.status?.availableReplicas ?? 0) >= 1;
        });

    before(async () => {
        ({ cluster, release } = await startHarnessCluster({ priorityClasses: ["training-high"], runtimeClasses: ["gvisor"], volumes: 2, cpuNodes: 1 }));
        kubectlPath = cluster.api.kubectlPath;
        // What a prepared cluster has besides what the fixture gives: the agent-sandbox controller
        // (a stand-in Deployment kwok runs), a Ready ClusterIssuer, a Calico DaemonSet, the DNS pods.
        await cluster.kubectlOk(["create", "namespace", "agent-sandbox-system"]);
        await apply(coreDns);
        await apply(controller);
        await apply(issuer);
        await setIssuerReady();
        await apply(calico);
        await controllerAvailable();
    });
    after(async () => {
        await teardown(undefined, cluster, release);
    });

    test("a prepared cluster: nothing fails", async () => {
        const f = await preflight();
        const bad = f.filter((x) => x.status !== "ok");
        assert.deepEqual(bad, [], renderTable({ stack: "pf-live", target: "sim" }, f));
        for (const check of [
            "API server",
            "Kubernetes version",
            "GPU node",
            "StorageClass",
            "Checkpoint reclaim policy",
            "Checkpoint volume",
            "Registry credentials",
            "PriorityClass",
            "RuntimeClass",
            "agent-sandbox CRDs",
            "agent-sandbox controller",
            "cert-manager",
            "Issuer",
            "NetworkPolicy CNI",
            "Quota headroom",
        ])
            only(f, check);
        assertFinding(only(f, "GPU node"), "ok", /kwok-gpu-0 fits the training pod \(2 nvidia\.com\/gpu \(NVIDIA-H200\)/);
        assertFinding(only(f, "Kubernetes version"), "ok", /v1\.36\.3/);
    });

    test("the stack's context is not in the kubeconfig; the API server does not answer", async () => {
        const f = await preflight({ target: { context: "prod-gpu-cluster" } });
        assert.equal(f.length, 1);
        assertFinding(f[0]!, "fail", /has no context 'prod-gpu-cluster'/, /set target\.context to one of: test/);
        const dead = path.join(cluster!.api.dir, "dead.kubeconfig");
        const kc = YAML.parse(fs.readFileSync(cluster!.kubeconfig, "utf8"));
        for (const c of kc.clusters) c.cluster.server = "https://127.0.0.1:1";
        fs.writeFileSync(dead, JSON.stringify(kc));
        const g = (await runPreflight(config({ target: { kubeconfig: dead } }), { kubectl: kubectlPath, timeoutMs: 3000 })).findings;
        assert.equal(g.length, 1);
        assertFinding(g[0]!, "fail", /https:\/\/127\.0\.0\.1:1 \(context test, .*did not answer within 3 s/, /reachable from here/);
    });

    test("no PriorityClass", async () => {
        await cluster!.kubectlOk(["delete", "priorityclass", "training-high"]);
        try {
            assertFinding(
                only(await preflight(), "PriorityClass"),
                "fail",
                /no PriorityClass training-high \(target\.priorityClassName\)/,
                /kubectl create priorityclass training-high/,
            );
        } finally {
            await cluster!.kubectlOk(["create", "priorityclass", "training-high", "--value=1000000"]);
        }
    });

    test("no RuntimeClass", async () => {
        await cluster!.kubectlOk(["delete", "runtimeclass", "gvisor"]);
        try {
            assertFinding(only(await preflight(), "RuntimeClass"), "fail", /no RuntimeClass gvisor \(sandboxes\.runtimeClassName\)/);
        } finally {
            await apply({ apiVersion: "node.k8s.io/v1", kind: "RuntimeClass", metadata: { name: "gvisor" }, handler: "gvisor" });
        }
    });

    test("the GPU node is the wrong product, too small, or tainted beyond the tolerations", async () => {
        const gpuNode = cluster!.gpuNode;
        await cluster!.kubectlOk(["label", "node", gpuNode, "--overwrite", "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB"]);
        try {
            assertFinding(
                only(await preflight(), "GPU node"),
                "fail",
                /kwok-gpu-0: label nvidia\.com\/gpu\.product=NVIDIA-H200 wanted, node has nvidia\.com\/gpu\.product=NVIDIA-A100-SXM4-80GB/,
                /pin target\.gpuProduct to a product the nodes have \(NVIDIA-A100-SXM4-80GB\)/,
            );
        } finally {
            await cluster!.kubectlOk(["label", "node", gpuNode, "--overwrite", `nvidia.com/gpu.product=${GPU_PRODUCT}`]);
        }
        assertFinding(
            only(await preflight({ training: { gpusOnNode: 16, vllmGpus: 8, trainerGpus: 8 } }), "GPU node"),
            "fail",
            /kwok-gpu-0: 8 nvidia\.com\/gpu allocatable, the pod needs 16/,
            /to at most 8/,
        );
        assertFinding(only(await preflight({ target: { tolerations: [] } }), "GPU node"), "fail", /taint nvidia\.com\/gpu:NoSchedule not tolerated/);
    });

    test("no default StorageClass; a class that deletes the checkpoints", async () => {
        const annotation = "storageclass.kubernetes.io/is-default-class";
        await cluster!.kubectlOk(["annotate", "storageclass", cluster!.storageClass, "--overwrite", `${annotation}=false`]);
        try {
            assertFinding(only(await preflight(), "StorageClass"), "fail", /no default StorageClass .*the cluster has: standard/, /mark one default/);
        } finally {
            await cluster!.kubectlOk(["annotate", "storageclass", cluster!.storageClass, "--overwrite", `${annotation}=true`]);
        }
        await apply({
            apiVersion: "storage.k8s.io/v1",
            kind: "StorageClass",
            metadata: { name: "scratch" },
            provisioner: "kubernetes.io/no-provisioner",
            reclaimPolicy: "Delete",
        });
        const f = await preflight({ target: { storageClassName: "scratch" } });
        assertFinding(only(f, "StorageClass"), "ok", /scratch \(provisioner kubernetes\.io\/no-provisioner, reclaimPolicy Delete\)/);
        assertFinding(only(f, "Checkpoint reclaim policy"), "warn", /StorageClass scratch has reclaimPolicy Delete/);
        assertFinding(only(await preflight({ target: { storageClassName: "premium" } }), "StorageClass"), "fail", /no StorageClass premium/);
    });

    test("agent-sandbox: a CRD missing, a CRD of another schema, no controller", async () => {
        const file = fs.readdirSync(crdDir).find((f) => f.includes("sandboxwarmpools"))!;
        await cluster!.kubectlOk(["delete", "crd", "sandboxwarmpools.extensions.agents.x-k8s.io", "--wait=true"]);
        try {
            assertFinding(
                only(await preflight(), "agent-sandbox CRDs"),
                "fail",
                /the schema does not match v1\.0\.1: sandboxwarmpools\.extensions\.agents\.x-k8s\.io missing/,
                /install agent-sandbox v1\.0\.1/,
            );
        } finally {
            await cluster!.kubectlOk(["create", "-f", path.join(crdDir, file)]);
        }
        const templates = await cluster!.getJson(["crd", "sandboxtemplates.extensions.agents.x-k8s.io"]);
        const older = structuredClone(templates);
        for (const v of older.spec.versions) delete v.schema.openAPIV3Schema.properties.spec.properties.volumeClaimTemplatesPolicy;
        await cluster!.kubectlOk(["replace", "-f", "-"], JSON.stringify(older));
        try {
            assertFinding(
                only(await preflight(), "agent-sandbox CRDs"),
                "fail",
                /sandboxtemplates\.extensions\.agents\.x-k8s\.io v1beta1 has no spec\.volumeClaimTemplatesPolicy/,
            );
        } finally {
            const now = await cluster!.getJson(["crd", "sandboxtemplates.extensions.agents.x-k8s.io"]);
            await cluster!.kubectlOk(
                ["replace", "-f", "-"],
                JSON.stringify({ ...templates, metadata: { ...templates.metadata, resourceVersion: now.metadata.resourceVersion } }),
            );
        }
        await cluster!.kubectlOk(["delete", "deployment", "agent-sandbox-controller", "-n", "agent-sandbox-system"]);
        try {
            assertFinding(only(await preflight(), "agent-sandbox controller"), "fail", /no Deployment labelled app=agent-sandbox-controller/);
        } finally {
            await apply(controller);
            await controllerAvailable();
        }
        assertFinding(only(await preflight(), "agent-sandbox CRDs"), "ok", /4 CRDs serve v1beta1/);
    });

    test("cert-manager: no ClusterIssuer", async () => {
        await cluster!.kubectlOk(["delete", "clusterissuer", "internal-ca"]);
        try {
            assertFinding(only(await preflight(), "Issuer"), "fail", /no ClusterIssuer internal-ca \(ingress\.tls\.issuer\)/);
        } finally {
            await apply(issuer);
            await setIssuerReady();
        }
    });

    test("Gateway API: no Gateway, then one that admits only its own namespace", async () => {
        const over = {
            ingress: { exposure: "httproute", host: "vllm.example.com", gateway: { name: "public", namespace: "gateways" }, tls: { mode: "none" } },
        };
        assertFinding(only(await preflight(over), "Gateway API"), "ok", /serve v1/);
        assertFinding(only(await preflight(over), "Gateway"), "fail", /no Gateway gateways\/public/);
        await cluster!.kubectlOk(["create", "namespace", "gateways"]);
        await apply({
            apiVersion: "gateway.networking.k8s.io/v1",
            kind: "Gateway",
            metadata: { name: "public", namespace: "gateways" },
            spec: { gatewayClassName: "example", listeners: [{ name: "https", port: 443, protocol: "HTTPS", hostname: "vllm.example.com" }] },
        });
        assertFinding(only(await preflight(over), "Gateway"), "fail", /admits routes only from its own namespace gateways/);
    });

    test("no CNI DaemonSet that enforces NetworkPolicy: a warning that says it is a heuristic", async () => {
        await cluster!.kubectlOk(["delete", "daemonset", "calico-node", "-n", "kube-system"]);
        try {
            const f = only(await preflight(), "NetworkPolicy CNI");
            assertFinding(f, "warn", /no DaemonSet of a NetworkPolicy-enforcing CNI .*this is a heuristic, by DaemonSet name/);
        } finally {
            await apply(calico);
        }
    });

    test("the training namespace exists with a quota the stack does not fit; the TLS Secret of tls.mode secret", async () => {
        const c = config();
        const ns = planOf(c).training.namespace;
        const ingressNs = planOf(c).names.namespaces.ingress;
        const tls = { ingress: { tls: { mode: "secret", secretName: "vllm-tls" } } };
        assertFinding(only(await preflight(tls), "TLS Secret"), "warn", new RegExp(`namespace ${ingressNs} does not exist yet`));
        await cluster!.kubectlOk(["create", "namespace", ns]);
        await cluster!.kubectlOk(["create", "namespace", ingressNs]);
        await apply({
            apiVersion: "v1",
            kind: "ResourceQuota",
            metadata: { name: "team-gpus", namespace: ns },
            spec: { hard: { "requests.nvidia.com/gpu": "1" } },
        });
        await cluster!.waitFor("the quota controller to fill status.used", async () => {
            const q = await cluster!.getJson(["resourcequota", "team-gpus", "-n", ns]);
            return q?.status?.used !== undefined;
        });
        assertFinding(
            only(await preflight(), "Quota headroom"),
            "fail",
            new RegExp(`${ns} quota team-gpus requests\\.nvidia\\.com/gpu: the stack needs 2, 1 free \\(hard 1, used 0\\)`),
        );
        assertFinding(only(await preflight(tls), "TLS Secret"), "fail", new RegExp(`no Secret ${ingressNs}/vllm-tls`));
        await cluster!.kubectlOk([
            "create",
            "secret",
            "generic",
            "vllm-tls",
            "-n",
            ingressNs,
            "--type=kubernetes.io/tls",
            "--from-literal=tls.crt=not-a-cert",
            "--from-literal=tls.key=not-a-key",
        ]);
        assertFinding(only(await preflight(tls), "TLS Secret"), "ok", /holds tls\.crt and tls\.key/);
    });

    // After the test above: the training and ingress namespaces exist, the sandboxes one does not.
    test("the pull Secret already there (registryAuth), and the kept checkpoint claim against the size and its StorageClass", async () => {
        const c = config();
        const plan = resolvePlatform(c, { hfToken: true, registryAuth: ["registry.test", "https://index.docker.io/v1/"] });
        const run = async (p: PlatformPlan = plan) => (await runPreflight(p.config, { plan: p, kubectl: kubectlPath, timeoutMs: 15_000 })).findings;
        const ns = plan.training.namespace;
        const name = plan.names.pullSecret;
        let f = await run();
        assertFinding(only(f, "Registry credentials"), "ok", /every image the stack pulls has a registryAuth entry/);
        assertFinding(
            only(f, "Pull Secret"),
            "ok",
            new RegExp(`^no Secret ${name} in ${ns}, ${plan.names.namespaces.ingress}, ${plan.names.namespaces.sandboxes} yet`),
        );
        assertFinding(only(f, "Checkpoint volume"), "ok", new RegExp(`^no claim ${ns}/checkpoints yet: up creates it at 110Gi`));
        // A Secret of that name someone else made; its data must not reach a finding.
        const SENTINEL = "sentinel-pull-token-8d1f";
        await cluster!.kubectlOk(["create", "secret", "generic", name, "-n", ns, `--from-literal=token=${SENTINEL}`]);
        f = await run();
        assertFinding(
            only(f, "Pull Secret"),
            "fail",
            new RegExp(`${ns}/${name} \\(type Opaque, not kubernetes\\.io/dockerconfigjson.*; no app\\.kubernetes\\.io/part-of label\\)`),
        );
        assert.ok(!JSON.stringify(f).includes(SENTINEL) && !JSON.stringify(f).includes(Buffer.from(SENTINEL).toString("base64")));
        // The stack's own, as the Platform makes it: ok.
        await cluster!.kubectlOk(["delete", "secret", name, "-n", ns]);
        await apply({
            apiVersion: "v1",
            kind: "Secret",
            metadata: { name, namespace: ns, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
            type: "kubernetes.io/dockerconfigjson",
            data: {
                ".dockerconfigjson": Buffer.from(JSON.stringify({ auths: { "registry.test": { auth: Buffer.from(SENTINEL).toString("base64") } } })).toString(
                    "base64",
                ),
            },
        });
        assertFinding(only(await run(), "Pull Secret"), "ok", new RegExp(`${ns}/${name} made by this project`));
        // A checkpoint claim kept from an earlier up, smaller than training.checkpoints.size (110Gi), on the fixture's class (no allowVolumeExpansion).
        await apply({
            apiVersion: "v1",
            kind: "PersistentVolumeClaim",
            metadata: { name: "checkpoints", namespace: ns, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
            spec: { accessModes: ["ReadWriteOnce"], storageClassName: cluster!.storageClass, resources: { requests: { storage: "50Gi" } } },
        });
        assertFinding(
            only(await run(), "Checkpoint volume"),
            "fail",
            new RegExp(`grows the claim ${ns}/checkpoints \\(50Gi, class standard, Pending\\), but StorageClass standard does not allow volume expansion`),
            /kubectl patch storageclass standard -p '\{"allowVolumeExpansion":true\}'/,
        );
        await cluster!.kubectlOk(["patch", "storageclass", cluster!.storageClass, "-p", JSON.stringify({ allowVolumeExpansion: true })]);
        try {
            assertFinding(
                only(await run(), "Checkpoint volume"),
                "ok",
                /is kept and reused; up grows it to 110Gi \(StorageClass standard allows volume expansion\)/,
            );
            const smaller = planOf(config({ training: { checkpoints: { size: "10Gi" } } }));
            assertFinding(
                only(await run(smaller), "Checkpoint volume"),
                "fail",
                /training\.checkpoints\.size 10Gi is smaller than the claim .*Kubernetes never shrinks a claim/,
            );
        } finally {
            await cluster!.kubectlOk(["patch", "storageclass", cluster!.storageClass, "-p", JSON.stringify({ allowVolumeExpansion: false })]);
        }
    });
});

describe("against a real dockerd (no NVIDIA runtime here)", { skip, timeout: scaled(10 * 60_000) }, () => {
    let d: Dockerd | undefined;
    let dataDir = "";
    const config = (over: Record<string, unknown> = {}) =>
        dockerConfig(deepMerge({ target: { host: `unix://${d!.socket}`, dataDir } }, over) as Record<string, unknown>);

    before(async () => {
        d = await startDockerd();
        dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "arl-preflight-data-"));
    });
    after(async () => {
        await d?.stop();
        if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    });

    test("the daemon answers; no NVIDIA runtime: the message says what to install; dataDir measured; no host port to publish", async () => {
        // The smallest checkpoint size the config takes: one run of Qwen3-1.7B by the checkpoint rule (1.7B x 6 bytes x 1.2 margin).
        const stack = config({ training: { modelCache: { size: "1Mi" }, checkpoints: { size: "12Gi" } } });
        const { header, findings } = await runPreflight(stack);
        assert.equal(header.target, `docker unix://${d!.socket}`);
        assertFinding(only(findings, "Docker daemon"), "ok", new RegExp(`answers: Docker ${literal(d!.version)}`));
        assertFinding(only(findings, "Docker API version"), "ok", />= 1\.40/);
        assertFinding(
            only(findings, "NVIDIA runtime"),
            "fail",
            /no nvidia runtime and no CDI GPU devices \(runtimes: .*runc.*\)/,
            /NVIDIA Container Toolkit.*nvidia-ctk runtime configure --runtime=docker/,
        );
        assert.equal(
            findings.some((f) => f.check === "GPU count"),
            false,
        );
        // Both measured with statfs of dataDir: whether they pass is this machine's free space.
        const statfs = fs.statfsSync(dataDir);
        const free = Number(statfs.bavail) * Number(statfs.bsize);
        const dataDirSpace = only(findings, "Free space in dataDir");
        assert.match(dataDirSpace.found, new RegExp(`free under ${literal(dataDir)}, (the stack plans|less than the) model cache 1Mi \\+ checkpoints 12Gi`));
        assert.equal(dataDirSpace.status, free >= 12 * 1024 ** 3 + 1024 ** 2 ? "ok" : "warn");
        const need = checkpointNeed(stack)!;
        assert.equal(need.runSize, "12Gi");
        const checkpointSpace = only(findings, "Checkpoint space");
        assert.match(checkpointSpace.found, new RegExp(`free under ${literal(dataDir)}.*one run of Qwen/Qwen3-1\\.7B writes 12Gi by the checkpoint rule`));
        assert.equal(checkpointSpace.status, free >= need.runBytes ? "ok" : "fail");
        assertFinding(only(findings, "Registry credentials"), "ok", /^no registryAuth: the Docker daemon pulls every image anonymously/);
        assertFinding(only(findings, "Host ports"), "ok", /publishes no host ports/);
        assert.equal(exitCodeOf(findings), 1);
        // The host's own NCPU and MemTotal, as this dockerd reports them (the stack's 50.6 CPUs / 196.3 GiB in all).
        assertFinding(
            only(findings, "Host CPUs"),
            os.cpus().length >= 50.6 ? "ok" : "warn",
            new RegExp(`limited to 50\\.6 CPUs in all.*the host has ${os.cpus().length}\\b`),
        );
        assert.match(only(findings, "Host memory").found, /limited to 196\.3 GiB in all.*the host has \d+(\.\d)? GiB/);
    });

    test("a daemon that is not there", async () => {
        const { findings } = await runPreflight(dockerConfig({ target: { host: `unix://${path.join(dataDir, "no.sock")}` } }));
        assert.equal(findings.length, 1);
        assertFinding(findings[0]!, "fail", /no\.sock did not answer: Cannot connect to the Docker daemon/, /sudo systemctl start docker/);
    });
});

describe("no kubeconfig, the cluster stack, the printed agent-sandbox check (pure)", () => {
    test("no kubeconfig file at all: a clear message, not 'no contexts'", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "arl-kubeconfig-"));
        try {
            assert.equal(kubeconfigMissing(undefined, { KUBECONFIG: path.join(dir, "none") }), true);
            assert.equal(
                kubeconfigMissing(undefined, { KUBECONFIG: `${path.join(dir, "none")}${path.delimiter}${__filename}` }),
                false,
                "one file of the list is enough",
            );
            assert.equal(kubeconfigMissing(path.join(dir, "none")), true);
            assert.equal(kubeconfigMissing(__filename), false);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
        const f = checkConnection(
            {
                context: "",
                kubeconfig: "~/.kube/config",
                kubeconfigMissing: true,
                contexts: [],
                version: { ok: false, error: "error: no configuration has been provided" },
            },
            10,
        );
        assertFinding(
            f,
            "fail",
            /^no kubeconfig: ~\/\.kube\/config does not exist, so kubectl knows no cluster$/,
            /get credentials for the cluster .*or set target\.kubeconfig \(or KUBECONFIG\)/,
        );
    });

    test("the plan's printed agent-sandbox check uses the controller's label, the one the preflight reads", async () => {
        const { externalPrerequisites } = await import("../../components/platform/prerequisites");
        const plan = k8sPlan();
        const sandbox = externalPrerequisites(plan.config, plan.names).find((p) => p.what.includes("agent-sandbox"));
        assert.ok(sandbox, "the agent-sandbox prerequisite is listed");
        assert.match(sandbox.check, /kubectl get deploy -A -l app=agent-sandbox-controller /);
        assert.ok(sandbox.check.includes(SANDBOX_CONTROLLER_LABEL));
    });

    const cluster = (over: Record<string, unknown> = {}) => parseClusterConfig(deepMerge({ target: { kind: "kubernetes", context: "c" } }, over));
    const answered = {
        context: "c",
        kubeconfig: "k",
        contexts: ["c"],
        version: { ok: true as const, value: { gitVersion: "v1.36.3", major: "1", minor: "36" } },
    };
    const byCheck = (fs: readonly Finding[]) => Object.fromEntries(fs.map((f) => [f.check, f]));
    test("cluster stack: the API server first; nothing else when it does not answer", () => {
        const f = checkClusterStack(cluster(), {
            ...answered,
            version: { ok: false, error: "dial tcp: i/o timeout" },
            crds: { ok: true, value: [] },
            sandboxControllers: { ok: true, value: [] },
        });
        assert.deepEqual(
            f.map((x) => [x.check, x.status]),
            [["API server", "fail"]],
        );
    });
    test("cluster stack installing agent-sandbox: fine when absent, a warning when it is there from elsewhere; JobSet and Kueue reported for the run stacks (or installed: jobSet.install, kueue.install)", () => {
        const none = byCheck(checkClusterStack(cluster(), { ...answered, crds: { ok: true, value: [] }, sandboxControllers: { ok: true, value: [] } }));
        assertFinding(none["agent-sandbox"], "ok", /not installed yet: this stack installs it/);
        assertFinding(
            none.JobSet,
            "warn",
            /jobsets\.jobset\.x-k8s\.io missing: run stacks with training\.nodes > 1 need it \(this stack installs it with jobSet\.install: true\)/,
            /install JobSet v0\.12\.0 with the cluster stack \(jobSet\.install: true\) or by hand \(kubectl apply --server-side -f https:\/\/github\.com\/kubernetes-sigs\/jobset\/releases\/download\/v0\.12\.0\/manifests\.yaml\)/,
        );
        // jobSet.install on: this stack installs it, nothing to report for the run stacks.
        const installing = byCheck(
            checkClusterStack(cluster({ jobSet: { install: true } }), {
                ...answered,
                crds: { ok: true, value: [] },
                sandboxControllers: { ok: true, value: [] },
            }),
        );
        assertFinding(
            installing.JobSet,
            "ok",
            /this stack installs JobSet v0\.12\.0 \(jobSet\.install, https:\/\/github\.com\/kubernetes-sigs\/jobset\/releases\/download\/v0\.12\.0\/manifests\.yaml\)/,
        );
        assertFinding(
            none.Kueue,
            "warn",
            /Kueue is not installed .*target\.kueueQueue need it \(this stack installs it with kueue\.install: true\)/,
            /^install Kueue v0\.17\.0 with the cluster stack \(kueue\.install: true\) or by hand \(kubectl apply --server-side -f https:\/\/github\.com\/kubernetes-sigs\/kueue\/releases\/download\/v0\.17\.0\/manifests\.yaml;.*\), if runs are to queue; otherwise nothing to do$/,
        );
        // kueue.install on: this stack installs it, nothing to report for the run stacks.
        assertFinding(
            byCheck(
                checkClusterStack(cluster({ kueue: { install: true } }), {
                    ...answered,
                    crds: { ok: true, value: [] },
                    sandboxControllers: { ok: true, value: [] },
                }),
            ).Kueue,
            "ok",
            /^this stack installs Kueue v0\.17\.0 \(kueue\.install, https:\/\/github\.com\/kubernetes-sigs\/kueue\/releases\/download\/v0\.17\.0\/manifests\.yaml\)$/,
        );
        const crds = [...sandboxCrds(k8sPlan()), crd("jobsets.jobset.x-k8s.io", [], [], { version: "v1alpha2" }), crd("localqueues.kueue.x-k8s.io", [], [])];
        const there = byCheck(checkClusterStack(cluster(), { ...answered, crds: { ok: true, value: crds }, sandboxControllers: { ok: true, value: [] } }));
        assertFinding(there["agent-sandbox"], "warn", /already exist: agent-sandbox is installed from elsewhere/, /set agentSandbox\.install false/);
        assertFinding(there.JobSet, "ok", /serves v1alpha2/);
        assertFinding(there.Kueue, "ok", /exists/);
        // A v0.5.x install with objects stored as v1alpha1: the v1.0 CRDs this stack applies would be refused.
        const stored = crds.map((c) => (c.metadata.name.startsWith("sandboxclaims.") ? { ...c, status: { storedVersions: ["v1alpha1", "v1beta1"] } } : c));
        const old = byCheck(checkClusterStack(cluster(), { ...answered, crds: { ok: true, value: stored }, sandboxControllers: { ok: true, value: [] } }));
        assertFinding(
            old["agent-sandbox"],
            "fail",
            /^an agent-sandbox release before v1\.0 is installed: sandboxclaims\.extensions\.agents\.x-k8s\.io has objects stored as v1alpha1$/,
            /first migrate the stored objects to v1beta1 and prune v1alpha1/,
        );
    });
    test("cluster stack using an installed agent-sandbox: its CRDs and controller must be there; the certIssuer must exist", () => {
        const c = cluster({ agentSandbox: { install: false }, certIssuer: { name: "internal-ca" } });
        const f = byCheck(checkClusterStack(c, { ...answered, crds: { ok: true, value: [] }, sandboxControllers: { ok: true, value: [] } }));
        assertFinding(f["agent-sandbox CRDs"], "fail", /agent-sandbox is not installed/);
        assertFinding(f["agent-sandbox controller"], "fail", /no Deployment labelled app=agent-sandbox-controller/);
        assertFinding(f["cert-manager"], "fail", /certificates\.cert-manager\.io missing.*\(certIssuer\)/, /install cert-manager/);
        const cm = [crd("certificates.cert-manager.io", [], [], { version: "v1" }), crd("clusterissuers.cert-manager.io", [], [], { version: "v1" })];
        const noIssuer = byCheck(
            checkClusterStack(c, {
                ...answered,
                crds: { ok: true, value: cm },
                sandboxControllers: { ok: true, value: [] },
                issuer: { ok: true, value: undefined },
            }),
        );
        assertFinding(noIssuer.Issuer, "fail", /no ClusterIssuer internal-ca \(certIssuer\)/);
        const withIssuer = byCheck(
            checkClusterStack(c, {
                ...answered,
                crds: { ok: true, value: cm },
                sandboxControllers: { ok: true, value: [] },
                issuer: { ok: true, value: { metadata: { name: "internal-ca" } } },
            }),
        );
        assertFinding(withIssuer.Issuer, "ok", /ClusterIssuer internal-ca exists/);
        assert.deepEqual(clusterStackCrds(c).slice(-2), ["certificates.cert-manager.io", "clusterissuers.cert-manager.io"]);
    });
});
