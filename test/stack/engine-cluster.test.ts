// The engine harness's own test: the simulated cluster (API server, controller-manager,
// scheduler, kwok) schedules and runs what the stacks need, and the real Pulumi engine with
// the kubernetes and random plugins runs an inline program against it: create, a no-change
// up, destroy. Nothing of the product is involved, so a failure here is the harness's.
// Skipped (with the reason) only when the fixtures are not built and CI is not set.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as k8s from "@pulumi/kubernetes";
import * as random from "@pulumi/random";
import { GPU_RESOURCE, type Cluster } from "../helpers/cluster";
import { changeCount, secretOutputValues, type Engine } from "../helpers/engine";
import { engineSkipReason } from "../helpers/engine-fixtures";
import { assertNoPlainSecrets, assertOk, podGpus, secs, teardown, startEngineHarness } from "../helpers/engine-checks";
import { scaled, scaledSeconds } from "../helpers/waits";

const skip = engineSkipReason();

describe("engine harness: simulated cluster and the real engine", { skip, timeout: scaled(20 * 60_000) }, () => {
    let cluster: Cluster | undefined;
    let engine: Engine | undefined;
    let release: (() => void) | undefined;

    before(async () => {
        const h = await startEngineHarness({ volumes: 4 });
        ({ cluster, engine, release } = h);
        process.stderr.write(`# cluster up in ${secs(h.clusterMs)}, engine home ready in ${secs(h.engineMs)}\n`);
    });

    after(async () => {
        await teardown(engine, cluster, release);
    });

    it("schedules a GPU Job pod on the GPU node with its claim bound, and makes a Deployment and a StatefulSet Ready", async () => {
        const c = cluster!;
        const ns = "harness";
        const objects = [
            { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
            {
                apiVersion: "v1",
                kind: "PersistentVolumeClaim",
                metadata: { name: "data", namespace: ns },
                spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "100Gi" } } },
            },
            {
                apiVersion: "batch/v1",
                kind: "Job",
                metadata: { name: "train", namespace: ns },
                spec: {
                    backoffLimit: 0,
                    template: {
                        spec: {
                            restartPolicy: "Never",
                            nodeSelector: { "nvidia.com/gpu.present": "true" },
                            tolerations: [{ key: GPU_RESOURCE, operator: "Exists", effect: "NoSchedule" }],
                            initContainers: [{ name: "vllm", image: "vllm", restartPolicy: "Always", resources: { limits: { [GPU_RESOURCE]: "1" } } }],
                            containers: [
                                {
                                    name: "trainer",
                                    image: "trl",
                                    resources: { limits: { [GPU_RESOURCE]: "3" } },
                                    volumeMounts: [{ name: "data", mountPath: "/data" }],
                                },
                            ],
                            volumes: [{ name: "data", persistentVolumeClaim: { claimName: "data" } }],
                        },
                    },
                },
            },
            {
                apiVersion: "apps/v1",
                kind: "Deployment",
                metadata: { name: "web", namespace: ns },
                spec: {
                    replicas: 2,
                    selector: { matchLabels: { app: "web" } },
                    template: {
                        metadata: { labels: { app: "web" } },
                        spec: { containers: [{ name: "web", image: "nginx", resources: { requests: { cpu: "1" } } }] },
                    },
                },
            },
            {
                apiVersion: "v1",
                kind: "Service",
                metadata: { name: "db", namespace: ns },
                spec: { clusterIP: "None", selector: { app: "db" }, ports: [{ port: 80 }] },
            },
            {
                apiVersion: "apps/v1",
                kind: "StatefulSet",
                metadata: { name: "db", namespace: ns },
                spec: {
                    serviceName: "db",
                    replicas: 3,
                    podManagementPolicy: "Parallel",
                    selector: { matchLabels: { app: "db" } },
                    template: { metadata: { labels: { app: "db" } }, spec: { containers: [{ name: "db", image: "db" }] } },
                },
            },
        ];
        await c.kubectlOk(["apply", "--server-side", "-f", "-"], objects.map((o) => JSON.stringify(o)).join("\n"));
        const pod = await c.waitFor("the Job's pod Running on the GPU node", async () => {
            const pods = await c.pods(ns, "batch.kubernetes.io/job-name=train");
            return pods.find((p) => p.spec?.nodeName === c.gpuNode && p.status?.phase === "Running");
        });
        assert.equal(podGpus(pod), 4);
        assert.ok(
            pod.status.conditions.some((x: any) => x.type === "Ready" && x.status === "True"),
            "kwok reports the pod Ready",
        );
        const pvc = await c.waitFor("the claim Bound", async () => {
            const p = await c.getJson(["pvc", "data", "-n", ns]);
            return p?.status?.phase === "Bound" ? p : undefined;
        });
        assert.match(pvc.spec.volumeName, /^pv-/);
        await c.waitFor("Deployment web Ready", async () => (await c.getJson(["deployment", "web", "-n", ns]))?.status?.readyReplicas === 2);
        await c.waitFor("StatefulSet db Ready", async () => (await c.getJson(["statefulset", "db", "-n", ns]))?.status?.readyReplicas === 3);
        const web = await c.pods(ns, "app=web");
        assert.ok(
            web.every((p) => c.cpuNodes.includes(p.spec.nodeName)),
            "untolerating pods stay off the tainted GPU node",
        );
        // Endpoints: the endpointslice controller publishes the ready pods.
        await c.waitFor("EndpointSlice of db with 3 ready endpoints", async () => {
            const s = await c.getJson<{ items: any[] }>(["endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=db"]);
            return s?.items.flatMap((x) => x.endpoints ?? []).filter((e) => e.conditions?.ready).length === 3;
        });
        // Namespace deletion is finalised (namespace controller, pod deletion by kwok, PVC protection).
        await c.kubectlOk(["delete", "namespace", ns, "--wait=true", `--timeout=${scaledSeconds(90)}s`]);
        assert.equal(await c.getJson(["namespace", ns]), undefined);
    });

    it("runs an inline program through the engine: create, no-change up and preview, destroy; secrets stay encrypted", async () => {
        const c = cluster!;
        const program = async () => {
            const provider = new k8s.Provider("test", { kubeconfig: c.kubeconfig, context: c.context, enableServerSideApply: true });
            const ns = new k8s.core.v1.Namespace("ns", { metadata: { name: "inline" } }, { provider });
            new k8s.core.v1.ConfigMap("cm", { metadata: { name: "cm", namespace: ns.metadata.name }, data: { a: "b" } }, { provider });
            const pw = new random.RandomPassword("pw", { length: 40, special: false });
            new k8s.core.v1.Secret("secret", { metadata: { name: "pw", namespace: ns.metadata.name }, stringData: { pw: pw.result } }, { provider });
            return { password: pw.result, namespace: ns.metadata.name };
        };
        const s = await engine!.stack("harness", {}, { program, secrets: { hfToken: "hf_harness_sentinel_0123456789" } });
        const up = await s.up("first up");
        assertOk(up, "first up");
        assert.equal(up.changes.create, 6, `creates (stack, provider, namespace, configmap, password, secret): ${JSON.stringify(up.changes)}`);
        assert.equal(up.outputs?.password?.secret, true, "a RandomPassword's result is a secret output");
        const pw = secretOutputValues(up.outputs)[0];
        assert.equal(pw.length, 40);
        const stored = Buffer.from((await c.getJson(["secret", "pw", "-n", "inline"])).data.pw, "base64").toString();
        assert.equal(stored, pw, "the Secret in the cluster holds the generated password");
        assertNoPlainSecrets(s, { password: pw, hfToken: "hf_harness_sentinel_0123456789" });

        const again = await s.up("no-change up");
        assertOk(again, "no-change up");
        assert.equal(changeCount(again.changes), 0, `no-change up: ${JSON.stringify(again.changes)}`);
        const preview = await s.preview();
        assertOk(preview, "preview");
        assert.equal(changeCount(preview.changes), 0, `preview: ${JSON.stringify(preview.changes)}`);
        const refresh = await s.refresh();
        assertOk(refresh, "refresh");
        assert.equal(changeCount(refresh.changes), 0, `refresh drift: ${JSON.stringify(refresh.changes)}`);

        const down = await s.destroy();
        assertOk(down, "destroy");
        await c.waitFor("namespace inline gone", async () => (await c.getJson(["namespace", "inline"])) === undefined);
        assert.deepEqual(engine!.leftovers(), [], "no CLI or plugin process outlives its operation");
        process.stderr.write(`# inline program: up ${secs(up.ms)}, no-change up ${secs(again.ms)}, destroy ${secs(down.ms)}\n`);
    });

    it("stops without leaving a process, a port or a temp dir", async () => {
        const e = engine!;
        const c = cluster!;
        const dirs = [e.root, c.api.dir];
        const pids = [...c.api.pids];
        engine = undefined;
        cluster = undefined;
        await e.dispose();
        await c.stop(); // throws if a process group, a port or the dir is left
        for (const d of dirs) assert.equal(fs.existsSync(d), false, `${d} removed`);
        for (const pid of pids) assert.throws(() => process.kill(pid, 0), `pid ${pid} gone`);
    });
});
