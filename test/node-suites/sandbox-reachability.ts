// Real pods on one real node (issue #29): the node fixture (test/node/) runs containerd
// 2 + runc + CNI + kubelet v1.36.3 + kube-router v2.1.0's NetworkPolicy controller against etcd and
// kube-apiserver in a network namespace this test makes; the sandbox pool's own pod (the
// project's rendered podTemplate, on the sandbox runtime image built from python/Dockerfile's
// steps: its opencode is a stand-in, named as such in test/node/images.sh) runs on it. Checked on
// the running pods: Ready behind its real probes, uid 65532, read-only root, a command run through
// the runtime, and the pool's NetworkPolicy measured with real connections (dropped with it, let
// through once it is deleted). Stand-ins: the trainer is a busybox pod with the trainer's labels
// ("trainer-standin"), the other client a busybox pod without them. Then every single-node
// recipe's reachability matrix (and each DNS shape, and observability on) is measured with real
// connections between stand-in pods carrying the workloads' labels and ports, and to the outside
// addresses (test/helpers/node-reachability.ts), against the computed matrix and docs/design/network-paths.md's
// tables; every case also measures a pod in another namespace that carries the trainer's labels
// (reachability-views.ts trainerElsewhere), which must reach nothing of the stack. Run on
// test/stack/node.test.ts's node.
import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { RECIPE_NAMES } from "../../components/config";
import { planToDir } from "../../scripts/lib/plan";
import { whileNameLookupFails } from "../helpers/name-lookup";
import type { Node, NodeSession } from "../helpers/node";
import { APISERVER_NODE, measureReachability, type NodeAddresses, nodeEndpoints, nodeLocalEndpoints } from "../helpers/node-reachability";
import { CLIENT_PY, clusterCheckObjects } from "../helpers/node-cluster";
import { type NodeSandboxRender, renderNodeSandbox } from "../helpers/node-sandbox";
import { type ExtraEndpoint, type Manifest, reachabilityTable } from "../helpers/reachability";
import {
    concernsStack,
    DECOYS,
    ELSEWHERE_NAMESPACE,
    OLD_RUN,
    OWN_DNS,
    OWN_DNS_SHAPE,
    observedManifests,
    oldRunJob,
    reachedFromElsewhere,
    readmeTable,
    roleName,
    SCRAPER,
    TRAINER_ELSEWHERE,
    trainerElsewhere,
} from "../helpers/reachability-views";
import { scaledCount, scaledSeconds } from "../helpers/waits";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Made by the suite's before (not at import: test/stack/node.test.ts imports every suite, run or not). */
let planDir = "";

/** What `npm run plan` renders for a recipe on Kubernetes (with an override of the platform config). */
async function planned(recipe: string, platformOverride?: Record<string, unknown>): Promise<Manifest[]> {
    const outDir = fs.mkdtempSync(path.join(planDir, `${recipe}-`));
    return [...(await planToDir({ recipe, target: "kubernetes" }, { outDir, platformOverride })).manifests];
}

interface MeasuredCase {
    readonly label: string;
    /** The docs/design/network-paths.md table this case's computed matrix must equal (without the node's API server and the old run's pod). */
    readonly readme?: string;
    readonly manifests: () => Promise<Manifest[]>;
    /** Endpoints beyond nodeEndpoints' (at the node's addresses). */
    readonly extraEndpoints?: (a: NodeAddresses) => readonly ExtraEndpoint[];
}

/** Every single-node recipe (the multi-node one stays on kwok), each DNS shape, and observability on. */
const MEASURED: readonly MeasuredCase[] = [
    ...RECIPE_NAMES.map((recipe) => ({
        label: recipe,
        readme: recipe,
        manifests: async () => {
            const ms = await planned(recipe);
            return [...ms, oldRunJob(ms)];
        },
    })),
    {
        label: "opencode-blackbox, target.dns node-local",
        manifests: () => planned("opencode-blackbox", { target: { dns: { kind: "node-local" } } }),
        extraEndpoints: nodeLocalEndpoints,
    },
    {
        label: "opencode-blackbox, target.dns selector",
        manifests: () => planned("opencode-blackbox", { target: { dns: OWN_DNS_SHAPE } }),
        extraEndpoints: () => [OWN_DNS],
    },
    {
        label: "mbpp-whitebox with observability",
        readme: "mbpp-whitebox+observability",
        manifests: () => observedManifests("mbpp-whitebox"),
        extraEndpoints: () => [SCRAPER, ...DECOYS],
    },
    {
        label: "opencode-blackbox with observability",
        readme: "opencode-blackbox+observability",
        manifests: () => observedManifests("opencode-blackbox"),
        extraEndpoints: () => [SCRAPER, ...DECOYS],
    },
];

export function sandboxAndReachabilitySuite(shared: NodeSession): void {
    describe("node: the sandbox pool's own pod on a real kubelet, its NetworkPolicy enforced, every recipe's reachability measured", () => {
        let node: Node;
        let r: NodeSandboxRender;
        const cid: Record<string, string> = {};
        let sandboxIp = "";

        before(async () => {
            node = shared.node;
            planDir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-node-reach-"));
            r = renderNodeSandbox(node.names.nodeName, node.names.runtimeImage, node.names.busyboxImage);
        });

        after(async () => {
            if (planDir !== "") fs.rmSync(planDir, { recursive: true, force: true });
            await shared.clearNamespaces();
        });

        const ready = async (ns: string, pod: string): Promise<string> =>
            (await node.kubectl(["-n", ns, "get", "pod", pod, "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'])).stdout.trim();

        const containerId = async (ns: string, pod: string, container: string): Promise<string> => {
            const out = await node.kubectlOk([
                "-n",
                ns,
                "get",
                "pod",
                pod,
                "-o",
                `jsonpath={.status.containerStatuses[?(@.name=="${container}")].containerID}`,
            ]);
            const id = out.trim().replace(/^containerd:\/\//, "");
            assert.match(id, /^[0-9a-f]{64}$/, `container ${ns}/${pod}/${container} has no containerd id: ${out}`);
            return id;
        };

        /** One HTTP GET of the runtime's health path from a client container; the response or the error. */
        const connect = async (client: string): Promise<{ ok: boolean; detail: string }> => {
            const res = await node.exec(
                cid[client]!,
                ["sh", "-c", `printf 'GET ${r.healthPath} HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${sandboxIp} ${r.port}`],
                15_000,
            );
            const detail = `${res.stdout}${res.stderr}`.replace(/\s+/g, " ").slice(0, 200);
            return { ok: res.code === 0 && res.stdout.includes("200 OK"), detail: `exit ${res.code}: ${detail}` };
        };

        /** From the sandbox container to the API server's port on the node address. */
        const sandboxToApiServer = async (): Promise<string> => {
            const py = `import socket\ntry:\n    socket.create_connection(("${node.names.nodeIp}", ${node.names.apiPort}), 3); print("connected")\nexcept OSError as e:\n    print("refused-or-timeout", e)`;
            const res = await node.exec(cid.sandbox!, ["python3", "-I", "-c", py], 15_000);
            return `${res.stdout}${res.stderr}`.trim();
        };

        it("the sandbox pool's pod comes Ready behind its real probes (forwarder startupProbe, runtime readinessProbe)", async () => {
            await node.apply(r.objects);
            const t0 = Date.now();
            let status = "";
            for (let i = 0; i < scaledCount(360) && status !== "True"; i++) {
                status = await ready(r.sandboxNamespace, r.sandboxPod);
                if (status !== "True") await sleep(500);
            }
            if (status !== "True") {
                const describe = await node.kubectl(["-n", r.sandboxNamespace, "describe", "pod", r.sandboxPod]);
                assert.fail(
                    `${r.sandboxPod} not Ready after ${Math.round((Date.now() - t0) / 1000)} s:\n${describe.stdout}\nkubelet:\n${node.logTail("kubelet", 40)}`,
                );
            }
            process.stderr.write(`# sandbox pod Ready ${((Date.now() - t0) / 1000).toFixed(1)} s after kubectl apply\n`);
            const pod = JSON.parse(await node.kubectlOk(["-n", r.sandboxNamespace, "get", "pod", r.sandboxPod, "-o", "json"]));
            const runtime = pod.spec.containers.find((c: any) => c.name === r.sandboxContainer);
            assert.equal(runtime.readinessProbe.httpGet.path, r.healthPath, "the runtime's readiness probe is the rendered one");
            assert.equal(runtime.readinessProbe.httpGet.port, r.port);
            const statuses = [...(pod.status.initContainerStatuses ?? []), ...pod.status.containerStatuses];
            for (const s of statuses) assert.ok(s.ready && s.state.running, `container ${s.name} ready and running: ${JSON.stringify(s.state)}`);
            for (const client of ["trainer-standin", "not-trainer"]) {
                await node.kubectlOk(["-n", r.trainerNamespace, "wait", "--for=condition=Ready", `--timeout=${scaledSeconds(90)}s`, `pod/${client}`]);
                cid[client] = await containerId(r.trainerNamespace, client, "client");
            }
            cid.sandbox = await containerId(r.sandboxNamespace, r.sandboxPod, r.sandboxContainer);
            sandboxIp = (await node.kubectlOk(["-n", r.sandboxNamespace, "get", "pod", r.sandboxPod, "-o", "jsonpath={.status.podIP}"])).trim();
            assert.match(sandboxIp, /^10\.214\.0\.\d+$/, "the pod has an address on the CNI bridge");
        });

        it(`the sandbox container runs as uid ${65532} with a read-only root and a writable HOME`, async () => {
            assert.ok(cid.sandbox, "needs the pod from the first test");
            const res = await node.exec(cid.sandbox!, [
                "sh",
                "-c",
                'id -u; touch /probe-ro 2>&1; echo "root-touch=$?"; touch "$HOME/ok" && echo home-writable',
            ]);
            assert.equal(res.code, 0, res.stderr);
            const lines = res.stdout.split("\n");
            assert.equal(lines[0], String(r.runAsUser), `uid: ${res.stdout}`);
            assert.equal(r.runAsUser, 65532, "the pool's rendered uid");
            assert.match(res.stdout, /Read-only file system/);
            assert.match(res.stdout, /root-touch=1/);
            assert.match(res.stdout, /home-writable/);
        });

        it("a command runs through the runtime: POST /exec from the trainer stand-in", async () => {
            assert.ok(cid["trainer-standin"], "needs the pods from the first test");
            const body = JSON.stringify({ cmd: "id -u; echo $HOME" });
            const req = `POST /exec HTTP/1.0\\r\\nContent-Type: application/json\\r\\nContent-Length: ${Buffer.byteLength(body)}\\r\\n\\r\\n`;
            const res = await node.exec(
                cid["trainer-standin"]!,
                ["sh", "-c", `{ printf '${req}'; printf '%s' "$0"; } | nc -w 10 ${sandboxIp} ${r.port}`, body],
                30_000,
            );
            assert.equal(res.code, 0, `${res.stdout}${res.stderr}`);
            assert.match(res.stdout, /200 OK/);
            const json = JSON.parse(res.stdout.slice(res.stdout.indexOf("{")));
            assert.equal(json.exit_code, 0, res.stdout);
            assert.equal(json.stdout, `${r.runAsUser}\n/root\n`, res.stdout);
        });

        it("the pool's NetworkPolicy drops a real connection from a pod without the trainer's labels; deleted, it connects again", async () => {
            assert.ok(cid["not-trainer"] && cid.sandbox, "needs the pods from the first test");
            // Without a policy every client connects (else a drop below would prove nothing).
            for (const client of ["trainer-standin", "not-trainer"]) {
                const c = await connect(client);
                assert.ok(c.ok, `no policy: ${client} -> sandbox:${r.port} connects: ${c.detail}`);
            }
            assert.equal(await sandboxToApiServer(), "connected", "no policy: sandbox -> API server connects");

            await node.kubectlOk(["apply", "-f", "-"], JSON.stringify(r.policy));
            const t0 = Date.now();
            let dropped: { ok: boolean; detail: string } | undefined;
            for (let i = 0; i < scaledCount(40); i++) {
                const c = await connect("not-trainer");
                if (!c.ok) {
                    dropped = c;
                    break;
                }
                await sleep(500);
            }
            assert.ok(
                dropped,
                `policy: not-trainer -> sandbox still connects ${Math.round((Date.now() - t0) / 1000)} s after the policy:\n${node.logTail("kube-router", 20)}`,
            );
            process.stderr.write(`# policy enforced ${((Date.now() - t0) / 1000).toFixed(1)} s after kubectl apply: ${dropped.detail}\n`);
            const again = await connect("not-trainer");
            assert.ok(!again.ok, `policy: not-trainer -> sandbox dropped again: ${again.detail}`);
            const trainer = await connect("trainer-standin");
            assert.ok(trainer.ok, `policy: the trainer stand-in still connects: ${trainer.detail}`);
            assert.match(await sandboxToApiServer(), /^refused-or-timeout/, "policy: the sandbox's egress to the API server is dropped");
            await sleep(6000);
            assert.equal(await ready(r.sandboxNamespace, r.sandboxPod), "True", "policy: the sandbox stays Ready (the kubelet's probe comes from the node)");

            await node.kubectlOk(["delete", "-n", r.sandboxNamespace, "networkpolicy", r.policyName]);
            let back: { ok: boolean; detail: string } = { ok: false, detail: "not tried" };
            for (let i = 0; i < scaledCount(40) && !back.ok; i++) {
                back = await connect("not-trainer");
                if (!back.ok) await sleep(500);
            }
            assert.ok(back.ok, `policy deleted: not-trainer -> sandbox connects again: ${back.detail}`);
        });

        it("kubectl exec and logs reach the pods through the API server and the kubelet", async () => {
            const id = await node.kubectl(["-n", r.trainerNamespace, "exec", "trainer-standin", "--", "id", "-u"]);
            assert.equal(id.code, 0, id.stderr);
            assert.equal(id.stdout.trim(), "65534");
            const logs = await node.kubectl(["-n", r.sandboxNamespace, "logs", r.sandboxPod, "-c", r.sandboxContainer, "--tail=20"]);
            assert.equal(logs.code, 0, logs.stderr);
            assert.match(logs.stdout, new RegExp(`GET ${r.healthPath} 200`), "the runtime logged the kubelet's probes");
        });

        it("cluster services: the controller-manager, scheduler, kube-proxy and CoreDNS serve pods as a cluster's do", async () => {
            const k = clusterCheckObjects(node.names.busyboxImage, node.names.runtimeImage);
            const ns = ["-n", k.namespace];
            const t0 = Date.now();
            await node.kubectlOk(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: k.objects }));
            // The controller-manager: each namespace's default ServiceAccount and root CA ConfigMap (the
            // token volume of every pod that mounts one needs it), the Deployment's and StatefulSet's pods.
            let made = "";
            for (let i = 0; i < scaledCount(60) && made !== "default kube-root-ca.crt"; i++) {
                const sa = await node.kubectl([...ns, "get", "serviceaccount", "default", "-o", "jsonpath={.metadata.name}"]);
                const cm = await node.kubectl([...ns, "get", "configmap", "kube-root-ca.crt", "-o", "jsonpath={.metadata.name}"]);
                made = `${sa.stdout.trim()} ${cm.stdout.trim()}`;
                if (made !== "default kube-root-ca.crt") await sleep(500);
            }
            assert.equal(
                made,
                "default kube-root-ca.crt",
                `the controller-manager made neither or one: ${made}\n${node.logTail("kube-controller-manager", 20)}`,
            );
            for (const what of [`deployment/${k.web.deployment}`, `statefulset/${k.stateful.statefulSet}`]) {
                const r = await node.kubectl([...ns, "rollout", "status", what, `--timeout=${scaledSeconds(120)}s`], undefined, 130_000);
                assert.equal(r.code, 0, `${what} rolled out: ${r.stdout}${r.stderr}\n${(await node.kubectl([...ns, "get", "pods", "-o", "wide"])).stdout}`);
            }
            await node.kubectlOk([...ns, "wait", "--for=condition=Ready", `--timeout=${scaledSeconds(90)}s`, `pod/${k.client}`]);
            process.stderr.write(`# cluster check: every pod Ready ${((Date.now() - t0) / 1000).toFixed(1)} s after kubectl apply\n`);
            const pods: Array<{ name: string; ip: string; node: string }> = JSON.parse(await node.kubectlOk([...ns, "get", "pods", "-o", "json"])).items.map(
                (p: any) => ({ name: p.metadata.name, ip: p.status.podIP, node: p.spec.nodeName }),
            );
            // The scheduler: the Deployment's pods were given no node, and are on this one.
            const web = pods.filter((p) => p.name.startsWith(`${k.web.deployment}-`));
            assert.equal(web.length, k.web.replicas, JSON.stringify(pods));
            for (const p of web) assert.equal(p.node, node.names.nodeName, `${p.name} scheduled onto the node`);

            const clientId = await containerId(k.namespace, k.client, "client");
            const client = async (...args: string[]) => {
                const res = await node.exec(clientId, ["python3", "-I", "-c", CLIENT_PY, ...args], 30_000);
                return { code: res.code, out: `${res.stdout}${res.stderr}`.trim() };
            };
            // A name inside the cluster, asked again while CoreDNS (or the kube-dns Service's rules) is not answering yet.
            const clusterClient = (...args: string[]) => whileNameLookupFails(`client ${args.join(" ")}`, () => client(...args));
            const domain = "cluster.local";
            const resolvConf = await node.exec(clientId, ["cat", "/etc/resolv.conf"]);
            assert.match(
                resolvConf.stdout,
                /^nameserver 10\.0\.0\.10$/m,
                `the pod's resolver is the kube-dns Service (kubelet clusterDNS): ${resolvConf.stdout}`,
            );
            // CoreDNS, through the kube-dns Service (kube-proxy): the Service's name, each StatefulSet pod's name.
            const svcIp = (await node.kubectlOk([...ns, "get", "service", k.web.service, "-o", "jsonpath={.spec.clusterIP}"])).trim();
            assert.deepEqual(
                await clusterClient("resolve", `${k.web.service}.${k.namespace}.svc.${domain}`),
                { code: 0, out: svcIp },
                "the Service name: its ClusterIP",
            );
            for (let i = 0; i < k.stateful.replicas; i++) {
                const pod = `${k.stateful.statefulSet}-${i}`;
                const ip = pods.find((p) => p.name === pod)?.ip;
                const fqdn = `${pod}.${k.stateful.service}.${k.namespace}.svc.${domain}`;
                assert.deepEqual(await clusterClient("resolve", fqdn), { code: 0, out: ip }, `${fqdn}: ${pod}'s address`);
                assert.deepEqual(await clusterClient("get", `http://${fqdn}:${k.stateful.port}/`), { code: 0, out: pod }, `${fqdn} answers as ${pod}`);
            }
            // kube-proxy: the Service address, by its short name (the pod's search path), reaches every replica.
            const seen = new Set<string>();
            for (let i = 0; i < 30 && seen.size < k.web.replicas; i++) {
                const r = await clusterClient("get", `http://${k.web.service}/`);
                assert.equal(r.code, 0, `GET http://${k.web.service}/ through the ClusterIP: ${r.out}`);
                seen.add(r.out);
            }
            assert.deepEqual([...seen].sort(), web.map((p) => p.name).sort(), "the ClusterIP reaches each Deployment pod");
            // The API server through the kubernetes Service, with the token and CA the kubelet mounted.
            const sa = await node.exec(clientId, [
                "sh",
                "-c",
                "cd /var/run/secrets/kubernetes.io/serviceaccount && test -s token && test -s ca.crt && echo mounted",
            ]);
            assert.equal(sa.stdout.trim(), "mounted", `token and CA mounted: ${sa.stdout}${sa.stderr}`);
            assert.deepEqual(await clusterClient("connect", "kubernetes.default.svc", "443"), { code: 0, out: "connected" }, "kubernetes.default.svc:443");
            // A name outside the cluster does not resolve (the node's resolver has no upstream).
            const outside = await client("resolve", "example.com");
            assert.notEqual(outside.code, 0, `example.com must not resolve: ${outside.out}`);
            assert.match(outside.out, /socket\.gaierror/, outside.out);
            // The namespace controller finalizes a deleted namespace.
            const del = await node.kubectl(["delete", "namespace", k.namespace, `--timeout=${scaledSeconds(90)}s`], undefined, 100_000);
            assert.equal(del.code, 0, `namespace ${k.namespace} deleted: ${del.stdout}${del.stderr}`);
        });

        for (const [i, c] of MEASURED.entries()) {
            it(`reachability measured, ${c.label}: every path each pod opens equals what the policies compute${c.readme ? ", and the network-paths table" : ""}`, async () => {
                const a = node.names.addresses;
                const manifests = await c.manifests();
                // A pod in another namespace with the trainer's labels: measured too, so a trainer peer whose
                // namespaceSelector were widened to {} would show here as the look-alike reaching the stack.
                const decoy = trainerElsewhere(manifests);
                assert.ok(decoy, `${c.label}: the manifests hold a trainer Job`);
                const m = await measureReachability(node, manifests, [...nodeEndpoints(a), ...(c.extraEndpoints?.(a) ?? []), decoy], a, {
                    tag: `m${i}`,
                    image: node.names.runtimeImage,
                });
                process.stderr.write(
                    `# ${c.label}: ${m.pods} stand-in pods Ready in ${m.seconds.podsReady.toFixed(1)} s; ${m.probes} probes (${m.open} open) in ${m.seconds.measured.toFixed(1)} s, ${m.attempts} attempt(s)\n`,
                );
                assert.deepEqual(m.mismatches, [], `${c.label}: measured on the node differs from the computed matrix`);
                assert.deepEqual(reachedFromElsewhere(m.r), [], `${c.label}: a pod in ${ELSEWHERE_NAMESPACE} with the trainer's labels reaches the stack`);
                // Not vacuous: some paths open, some refused.
                assert.ok(m.open > 0 && m.open < m.probes, `${m.open} of ${m.probes} open`);
                if (c.readme) {
                    const computed = reachabilityTable(m.r, {
                        name: roleName,
                        include: (from, to) =>
                            concernsStack(from, to) && ![from.name, to.name].some((n) => n === APISERVER_NODE || n === OLD_RUN || n === TRAINER_ELSEWHERE),
                    }).trim();
                    assert.equal(
                        computed,
                        readmeTable(c.readme),
                        `${c.label}: the matrix at the node's addresses differs from docs/design/network-paths.md's table`,
                    );
                }
                if (manifests.some((x) => x.metadata?.name === OLD_RUN)) {
                    const old = m.r.parties.find((p) => p.name === OLD_RUN)!;
                    assert.deepEqual(
                        m.r.connections.filter((x) => x.to === old.id),
                        [],
                        "nothing reaches an old run's trainer (measured above, port by port)",
                    );
                }
            });
        }
    });
}
