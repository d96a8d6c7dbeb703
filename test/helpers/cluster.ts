// A simulated Kubernetes cluster for the engine tests: the API server fixture (etcd +
// kube-apiserver, test/helpers/apiserver.ts) plus kube-controller-manager and kube-scheduler
// v1.36.3 and kwok (which plays the kubelets: fake nodes, pods that "run" without
// containers). Deployments, StatefulSets and Jobs reconcile for real, the scheduler places
// pods by resources, selectors and taints, PVCs bind to pre-created PVs, namespaces are
// finalised; no container ever runs, no image is pulled, no probe is executed, no volume is
// mounted and NetworkPolicies are not enforced.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as https from "node:https";
import * as path from "node:path";
import { startApiServer, type ApiServer, type CommandResult } from "./apiserver";
import { freePort } from "./http";
import { engineFixtures, type EngineFixtures } from "./engine-fixtures";
import { scaled } from "./waits";

/** The GPU node's extended resource and labels (as the NVIDIA device plugin / GPU feature discovery set them). */
export const GPU_RESOURCE = "nvidia.com/gpu";
export const GPU_PRODUCT = "NVIDIA-H200";

export interface ClusterOptions {
    /** GPUs on each GPU node. @default 8 */
    readonly gpus?: number;
    /** GPU nodes (`kwok-gpu-0`, `kwok-gpu-1`, ...): a multi-node run needs one per trainer pod plus vLLM's. @default 1 */
    readonly gpuNodes?: number;
    /** CPU nodes. @default 3 */
    readonly cpuNodes?: number;
    /** Pre-created PersistentVolumes of the default StorageClass (1Ti each, Retain). @default 24 */
    readonly volumes?: number;
    /** PriorityClasses to create (cluster prerequisites a stack references, e.g. prod's `training-high`). @default [] */
    readonly priorityClasses?: readonly string[];
    /** RuntimeClasses to create (handler = name), e.g. `gvisor`. @default [] */
    readonly runtimeClasses?: readonly string[];
    /**
     * Namespaces whose pods "load a model forever": Running, never Ready (the vLLM sidecar's
     * startup probe has not passed), as a real first black-box run looks for 5-20 minutes.
     * Every other pod becomes Running and Ready at once. @default []
     */
    readonly slowNamespaces?: readonly string[];
    /**
     * How long a deleted pod takes to go away (a kubelet stopping its containers; kwok would
     * remove it at once). Makes "delete, then create the same name" races as real as they are
     * on a cluster, and StatefulSet rollouts one pod-stop per replica. @default 3000
     */
    readonly podStopMs?: number;
    /**
     * Pods that become Ready only `ms` after they are placed, instead of at once: those whose label
     * `label` is `value` (for example the env routers, `app.kubernetes.io/name=env-router`, as a real
     * one is after its image pull and start). They stay Pending until then. Scoped by label so every
     * other pod stays fast; a pod should match at most one entry. @default []
     */
    readonly readyDelays?: readonly ReadyDelay[];
    /**
     * Controllers run by a second kube-controller-manager of their own, which pauseControllers()
     * freezes while every other controller (the garbage collector, ReplicaSets, StatefulSets, ...)
     * keeps working: e.g. `["deployment-controller"]` to open a client's watch before the Deployment
     * controller reacts. @default [] (pauseControllers() then throws)
     */
    readonly pausableControllers?: readonly Controller[];
    /** Install the fixture's CRDs (agent-sandbox, Gateway API, cert-manager) at start; off when a stack under test installs them. @default true */
    readonly crds?: boolean;
    /** Overall startup timeout in ms. @default 240 s */
    readonly timeoutMs?: number;
}

/** Pods (by one label) that kwok makes Ready only after a delay: ClusterOptions.readyDelays. */
export interface ReadyDelay {
    readonly label: string;
    readonly value: string;
    readonly ms: number;
}

export interface Cluster {
    readonly api: ApiServer;
    /** kubeconfig path and its one context (cluster-admin). */
    readonly kubeconfig: string;
    readonly context: string;
    /** The first GPU node. */
    readonly gpuNode: string;
    /** Every GPU node (options.gpuNodes), the first one being `gpuNode`. */
    readonly gpuNodes: readonly string[];
    readonly cpuNodes: readonly string[];
    /** Name of the default StorageClass. */
    readonly storageClass: string;
    kubectl(args: string[], input?: string): Promise<CommandResult>;
    kubectlOk(args: string[], input?: string): Promise<string>;
    /** `kubectl get -o json`, parsed; undefined when not found. */
    getJson<T = any>(args: string[]): Promise<T | undefined>;
    /** Pods (parsed) in a namespace, optionally by label selector. */
    pods(namespace: string, selector?: string): Promise<any[]>;
    /** Creates `n` more PersistentVolumes of the default class. */
    addVolumes(n: number): Promise<void>;
    /**
     * Freezes the controller-manager of ClusterOptions.pausableControllers (SIGSTOP) until
     * resumeControllers(): those controllers stop reacting while the API server and every other
     * controller keep working, as a busy controller lags behind a client. stop() resumes it first.
     */
    pauseControllers(): void;
    /** Lets the paused controllers run again (SIGCONT); a no-op when they are not paused. */
    resumeControllers(): void;
    /** Polls `check` until it returns a truthy value or `timeoutMs` (scaled, waits.ts) passes; then throws `what` with the last value. */
    waitFor<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs?: number): Promise<T>;
    /** Stops every process, removes the temp dir, verifies nothing is left (throws otherwise). */
    stop(): Promise<void>;
}

function sleep(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, ms));
}

/** GET https://127.0.0.1:<port><path> (self-signed serving certificate), status code or 0. */
function healthz(port: number, p = "/healthz"): Promise<number> {
    return new Promise((resolve) => {
        const req = https.get({ host: "127.0.0.1", port, path: p, rejectUnauthorized: false, timeout: 3000 }, (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode ?? 0));
        });
        req.on("timeout", () => req.destroy(new Error("timeout")));
        req.on("error", () => resolve(0));
    });
}

/** Controllers the tests need (kube-controller-manager --controllers; names of v1.36). */
export const CONTROLLERS = [
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "job-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "endpointslice-mirroring-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "disruption-controller",
    "resourcequota-controller",
    "pod-garbage-collector-controller",
    "ttl-after-finished-controller",
] as const;
export type Controller = (typeof CONTROLLERS)[number];

/**
 * kwok's stages (kwok.x-k8s.io/v1alpha1 Stage, read from --config; kwok v0.8.0 has no
 * built-in default and runs only what it is given). A fake node reports Ready with the
 * allocatable it was created with; every pod on a fake node becomes Running and Ready at once
 * (native sidecars started), and a pod being deleted is removed. Unlike kwok's "fast" set
 * (kustomize/stage/pod/fast) there is no "complete" stage: a training Job's pod keeps running,
 * as a real run does for hours. Pods in `slowNamespaces` become Running but never Ready.
 * A pod matching one of `readyDelays` becomes Running and Ready that many ms after kwok first
 * sees it (Stage `spec.delay.durationMilliseconds`, sigs.k8s.io/kwok pkg/apis/v1alpha1/stage_types.go
 * v0.8.0); the instant stage excludes those pods, since kwok picks at random among stages that
 * match (pkg/utils/lifecycle/lifecycle.go). A deleted pod is removed `podStopMs` later.
 */
export function kwokStages(slowNamespaces: readonly string[], podStopMs = 3000, readyDelays: readonly ReadyDelay[] = []): string {
    const notSlow = slowNamespaces.length
        ? `\n      - key: '.metadata.namespace'\n        operator: 'NotIn'\n        values: [${slowNamespaces.map((n) => `'${n}'`).join(", ")}]`
        : "";
    const labelKey = (label: string) => `'.metadata.labels["${label}"]'`;
    const notDelayed = readyDelays.map((r) => `\n      - key: ${labelKey(r.label)}\n        operator: 'NotIn'\n        values: ['${r.value}']`).join("");
    const common = `      - key: '.metadata.deletionTimestamp'
        operator: 'DoesNotExist'
      - key: '.status.phase'
        operator: 'In'
        values: ['Pending']`;
    const node = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
      - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
        operator: 'NotIn'
        values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
      addresses:
      - address: {{ NodeIP | Quote }}
        type: InternalIP
      - address: {{ .metadata.name | Quote }}
        type: Hostname
      allocatable:
      {{ YAML .status.allocatable 1 }}
      capacity:
      {{ YAML .status.capacity 1 }}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
        kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
        containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
        kernelVersion: {{ printf "kwok-%s" Version | Quote }}
        bootID: ""
        machineID: ""
        osImage: ""
        systemUUID: ""
      phase: Running
`;
    // A Pending pod selected by `selector` becomes Running with `status` (conditions, container statuses), `delayMs` after kwok sees it.
    const runningPodStage = (name: string, selector: string, status: string, delayMs = 0) => `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: ${name}
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
${common}${selector}
${delayMs > 0 ? `  delay:\n    durationMilliseconds: ${delayMs}\n` : ""}  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
${status}      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
`;
    // Ready and ContainersReady: true, or false while the containers start (a model loading).
    const readiness = (ready: boolean) =>
        ["Ready", "ContainersReady"]
            .map(
                (type) =>
                    `      - lastTransitionTime: {{ $now | Quote }}\n        status: "${ready ? "True" : "False"}"\n${ready ? "" : "        reason: ContainersNotReady\n"}        type: ${type}\n`,
            )
            .join("") +
        `      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: PodScheduled
`;
    const readyStatus = `${readiness(true)}      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        {{ if eq .restartPolicy "Always" }}
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
        {{ else }}
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
        {{ end }}
      {{ end }}
`;
    const ready = runningPodStage("pod-ready", notSlow + notDelayed, readyStatus);
    const readyLate = readyDelays.map((r, i) =>
        runningPodStage(
            `pod-ready-after-${i}`,
            `${notSlow}\n      - key: ${labelKey(r.label)}\n        operator: 'In'\n        values: ['${r.value}']`,
            readyStatus,
            r.ms,
        ),
    );
    const loading = runningPodStage(
        "pod-loading-model",
        `
      - key: '.metadata.namespace'
        operator: 'In'
        values: [${slowNamespaces.map((n) => `'${n}'`).join(", ")}]`,
        `${readiness(false)}      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        started: false
        restartCount: 0
        state:
          waiting:
            reason: PodInitializing
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        started: false
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
`,
    );
    const del = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
      - key: '.metadata.deletionTimestamp'
        operator: 'Exists'
  delay:
    durationMilliseconds: ${podStopMs}
  next:
    finalizers:
      empty: true
    delete: true
`;
    return [node, ready, ...readyLate, ...(slowNamespaces.length ? [loading] : []), del].join("---\n");
}

function nodeObject(name: string, labels: Record<string, string>, allocatable: Record<string, string>, taints: unknown[]): Record<string, unknown> {
    return {
        apiVersion: "v1",
        kind: "Node",
        metadata: {
            name,
            annotations: { "node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake" },
            labels: {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/agent": "",
                type: "kwok",
                ...labels,
            },
        },
        spec: { taints },
        status: { allocatable, capacity: allocatable },
    };
}

/** What each fake CPU node offers (a caller sizing cpuNodes for a load reads it). */
export const CPU_NODE_ALLOCATABLE = { cpu: "96", memory: "768Gi", pods: "250", "ephemeral-storage": "10Ti" } as const;

/**
 * Starts the simulated cluster. Always call stop() (an `after` hook); on process exit or a
 * signal every process is killed anyway (the API server fixture's handlers and watchdog).
 */
export async function startCluster(options: ClusterOptions = {}, fixtures?: EngineFixtures): Promise<Cluster> {
    const timeoutMs = options.timeoutMs ?? 240_000;
    const deadline = Date.now() + scaled(timeoutMs);
    const fx = fixtures ?? (await engineFixtures({ build: true }));
    if (!fx.ok) throw new Error(`engine fixtures are not available: ${fx.reason}`);
    const api = await startApiServer({ timeoutMs, installCrds: options.crds ?? true });
    const context = "test";
    const gpuNodes = Array.from({ length: options.gpuNodes ?? 1 }, (_, i) => `kwok-gpu-${i}`);
    const gpuNode = gpuNodes[0];
    const cpuNodes = Array.from({ length: options.cpuNodes ?? 3 }, (_, i) => `kwok-cpu-${i}`);
    let pvCount = 0;
    const storageClass = "standard";

    const fail = async (msg: string): Promise<never> => {
        const logs = ["kube-controller-manager", "kube-scheduler", "kwok", "kube-apiserver"]
            .map((n) => `--- ${n}.log (tail) ---\n${api.logTail(n, 25)}`)
            .join("\n");
        await api.stop().catch(() => undefined);
        throw new Error(`${msg}\n${logs}`);
    };

    try {
        const kc = api.kubeconfig;
        const d = (f: string) => path.join(api.dir, f);
        const [kcmPort, schedPort, kwokPort, pausablePort] = [await freePort(), await freePort(), await freePort(), await freePort()];
        const auth = [
            `--kubeconfig=${kc}`,
            `--authentication-kubeconfig=${kc}`,
            `--authorization-kubeconfig=${kc}`,
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--v=1",
        ];

        const pausable = options.pausableControllers ?? [];
        const controllerManager = (name: string, port: number, controllers: readonly string[]) =>
            api.startProcess(
                name,
                fx.bin.kubeControllerManager,
                [
                    ...auth,
                    `--secure-port=${port}`,
                    `--cert-dir=${d(`${name}-certs`)}`,
                    `--controllers=${controllers.join(",")}`,
                    `--service-account-private-key-file=${api.files.saKeyFile}`,
                    `--root-ca-file=${api.files.caFile}`,
                    "--use-service-account-credentials=false",
                    "--cluster-name=kwok",
                    "--kube-api-qps=200",
                    "--kube-api-burst=400",
                    "--concurrent-statefulset-syncs=5",
                    "--profiling=false",
                ],
                { ports: [port] },
            );
        const kcm = controllerManager(
            "kube-controller-manager",
            kcmPort,
            CONTROLLERS.filter((c) => !pausable.includes(c)),
        );
        const pausableKcm = pausable.length > 0 ? controllerManager("kube-controller-manager-pausable", pausablePort, pausable) : undefined;
        const scheduler = api.startProcess(
            "kube-scheduler",
            fx.bin.kubeScheduler,
            [...auth, `--secure-port=${schedPort}`, `--cert-dir=${d("scheduler-certs")}`, "--profiling=false"],
            { ports: [schedPort] },
        );
        const stagesFile = d("kwok-stages.yaml");
        fs.writeFileSync(stagesFile, kwokStages(options.slowNamespaces ?? [], options.podStopMs ?? 3000, options.readyDelays ?? []));
        const kwok = api.startProcess(
            "kwok",
            fx.bin.kwok,
            [
                `--kubeconfig=${kc}`,
                `--config=${stagesFile}`,
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--cidr=10.244.0.0/16",
                "--node-ip=10.200.0.1",
                `--server-address=127.0.0.1:${kwokPort}`,
            ],
            { ports: [kwokPort], env: { KUBECONFIG: kc } },
        );

        const kubectl = api.kubectl;
        const kubectlOk = api.kubectlOk;
        const getJson = async <T = any>(args: string[]): Promise<T | undefined> => {
            const r = await kubectl(["get", ...args, "-o", "json"]);
            if (r.code !== 0) {
                if (/NotFound|not found/.test(r.stderr)) return undefined;
                throw new Error(`kubectl get ${args.join(" ")} failed: ${r.stderr}`);
            }
            return JSON.parse(r.stdout) as T;
        };
        /** Polls `check` until it is truthy, until the time `until` (a scaled deadline). */
        const waitUntil = async <T>(what: string, check: () => Promise<T | undefined | false>, until: number): Promise<T> => {
            const ms = until - Date.now();
            let last: unknown;
            for (;;) {
                try {
                    const v = await check();
                    if (v) return v;
                    last = v;
                } catch (e) {
                    last = (e as Error).message;
                }
                if (Date.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${JSON.stringify(last)?.slice(0, 500)})`);
                await sleep(500);
            }
        };
        const waitFor = <T>(what: string, check: () => Promise<T | undefined | false>, ms = 60_000): Promise<T> =>
            waitUntil(what, check, Date.now() + scaled(ms));
        /** The start's own deadline, or 10 s (scaled) when less is left. */
        const startDeadline = () => Math.max(Date.now() + scaled(10_000), deadline);

        // The three servers answer /healthz.
        for (const [name, port, proc] of [
            ["kube-controller-manager", kcmPort, kcm] as const,
            ["kube-scheduler", schedPort, scheduler] as const,
            ...(pausableKcm ? [["kube-controller-manager-pausable", pausablePort, pausableKcm] as const] : []),
        ]) {
            for (;;) {
                if (proc.exitCode !== null || proc.signalCode !== null)
                    return await fail(`${name} exited early (code ${proc.exitCode}, signal ${proc.signalCode})`);
                if (Date.now() > deadline) return await fail(`timed out waiting for ${name} /healthz`);
                if ((await healthz(port)) === 200) break;
                await sleep(300);
            }
        }
        if (kwok.exitCode !== null || kwok.signalCode !== null) return await fail(`kwok exited early (code ${kwok.exitCode})`);

        // Nodes: GPU nodes (tainted, as GPU pools are), CPU nodes for everything else.
        const gpus = options.gpus ?? 8;
        const nodes = [
            ...gpuNodes.map((n) =>
                nodeObject(
                    n,
                    { "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": GPU_PRODUCT, "nvidia.com/gpu.count": String(gpus) },
                    { cpu: "192", memory: "2Ti", pods: "110", "ephemeral-storage": "10Ti", [GPU_RESOURCE]: String(gpus) },
                    [{ key: GPU_RESOURCE, effect: "NoSchedule" }],
                ),
            ),
            ...cpuNodes.map((n) => nodeObject(n, {}, { ...CPU_NODE_ALLOCATABLE }, [])),
        ];
        await kubectlOk(["create", "-f", "-"], nodes.map((n) => JSON.stringify(n)).join("\n"));
        // kwok reports the nodes Ready; the not-ready taint the TaintNodesByCondition admission
        // plugin puts on every new node is removed by the node lifecycle controller on a real
        // cluster, which is not run here (it would evict pods whenever kwok's heartbeat lags).
        await waitUntil(
            "kwok to report every node Ready",
            async () => {
                const list = await getJson<{ items: any[] }>(["nodes"]);
                return (
                    list &&
                    list.items.length === nodes.length &&
                    list.items.every((n) => (n.status?.conditions ?? []).some((c: any) => c.type === "Ready" && c.status === "True"))
                );
            },
            startDeadline(),
        );
        await kubectlOk(["taint", "nodes", "--all", "node.kubernetes.io/not-ready-"]).catch(() => undefined);
        await waitFor("no node to carry the not-ready taint", async () => {
            const list = await getJson<{ items: any[] }>(["nodes"]);
            return list?.items.every((n) => !(n.spec?.taints ?? []).some((t: any) => t.key === "node.kubernetes.io/not-ready"));
        });

        // Storage: a default class without a provisioner and pre-created volumes (bound by the
        // scheduler's volume binding and the PV controller when a pod using the claim is placed).
        const sc = {
            apiVersion: "storage.k8s.io/v1",
            kind: "StorageClass",
            metadata: { name: storageClass, annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
            provisioner: "kubernetes.io/no-provisioner",
            volumeBindingMode: "WaitForFirstConsumer",
            reclaimPolicy: "Retain",
        };
        await kubectlOk(["create", "-f", "-"], JSON.stringify(sc));
        const addVolumes = async (n: number): Promise<void> => {
            if (n <= 0) return;
            const pvs = Array.from({ length: n }, () => {
                const name = `pv-${String(pvCount++).padStart(3, "0")}`;
                return {
                    apiVersion: "v1",
                    kind: "PersistentVolume",
                    metadata: { name },
                    spec: {
                        capacity: { storage: "1Ti" },
                        accessModes: ["ReadWriteOnce"],
                        persistentVolumeReclaimPolicy: "Retain",
                        storageClassName: storageClass,
                        hostPath: { path: `/var/lib/kwok-volumes/${name}` },
                    },
                };
            });
            await kubectlOk(["create", "-f", "-"], pvs.map((p) => JSON.stringify(p)).join("\n"));
        };
        await addVolumes(options.volumes ?? 24);

        const prereqs = [
            ...(options.priorityClasses ?? []).map((name) => ({
                apiVersion: "scheduling.k8s.io/v1",
                kind: "PriorityClass",
                metadata: { name },
                value: 1000000,
                globalDefault: false,
            })),
            ...(options.runtimeClasses ?? []).map((name) => ({ apiVersion: "node.k8s.io/v1", kind: "RuntimeClass", metadata: { name }, handler: name })),
        ];
        if (prereqs.length) await kubectlOk(["create", "-f", "-"], prereqs.map((p) => JSON.stringify(p)).join("\n"));

        // The controller-manager works: it gave the default namespace its ServiceAccount.
        await waitUntil(
            "the serviceaccount controller to create default/default",
            async () => (await getJson(["serviceaccount", "default", "-n", "default"])) !== undefined,
            startDeadline(),
        );

        const pods = async (namespace: string, selector?: string): Promise<any[]> =>
            (await getJson<{ items: any[] }>(["pods", "-n", namespace, ...(selector ? ["-l", selector] : [])]))?.items ?? [];

        let paused = false;
        const resumeControllers = (): void => {
            if (!paused || !pausableKcm) return;
            paused = false;
            pausableKcm.kill("SIGCONT");
        };
        const pauseControllers = (): void => {
            if (paused) return;
            if (!pausableKcm) throw new Error("pauseControllers: no controller is pausable: start the cluster with pausableControllers");
            if (pausableKcm.exitCode !== null || pausableKcm.signalCode !== null)
                throw new Error(`the pausable kube-controller-manager is not running (code ${pausableKcm.exitCode})`);
            pausableKcm.kill("SIGSTOP");
            paused = true;
        };

        let stopped = false;
        const stop = async (): Promise<void> => {
            if (stopped) return;
            stopped = true;
            resumeControllers();
            await api.stop();
        };
        return {
            api,
            kubeconfig: kc,
            context,
            gpuNode,
            gpuNodes,
            cpuNodes,
            storageClass,
            kubectl,
            kubectlOk,
            getJson,
            pods,
            addVolumes,
            pauseControllers,
            resumeControllers,
            waitFor,
            stop,
        };
    } catch (e) {
        await api.stop().catch(() => undefined);
        throw e;
    }
}

/** Runs a command to completion (used by the fixtures lookup). */
export function runCommand(cmd: string, args: string[], env?: NodeJS.ProcessEnv, timeoutMs = 0): Promise<CommandResult> {
    return new Promise((resolve, reject) => {
        const child = spawn(cmd, args, { env: env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
        child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
        const timer = timeoutMs ? setTimeout(() => child.kill("SIGKILL"), scaled(timeoutMs)) : undefined;
        child.on("error", (err) => reject(new Error(`cannot run ${cmd}: ${err.message}`)));
        child.on("close", (code, signal) => {
            if (timer) clearTimeout(timer);
            resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
        });
    });
}
