// The stack's nginx and OpenEnv images on one real node (issue #29, point 2): the node fixture
// (test/node/README.md) runs pods made from the wordle-whitebox recipe's own rendered manifests
// (`npm run plan`'s planToDir) on the images test/node/images.sh builds without a registry:
//   - the env router's pod (its Deployment's pod template, both containers, the rendered ConfigMap
//     with `server <pod name> resolve` in zoned upstreams) on the nginx image, a STAND-IN for
//     images.nginx (nginxinc/nginx-unprivileged): Debian forky's nginx, made unprivileged the same
//     way (uid 101); its capacity responder on the OpenEnv image (the env's own image has python3);
//   - an env replica's pod (the StatefulSet's pod template, with envs.wordle.runAsNonRoot on: uid
//     65532, read-only root) on the OpenEnv image: openenv 0.10.0's own echo env (the template
//     `openenv init` writes), not the catalog's textarena image, which no registry serves here;
//   - a client pod on the OpenEnv image that runs one real OpenEnv session (openenv's own
//     GenericEnvClient, over WS /ws) against the replica's pod address.
// Not here: the router forwarding to the replica (these are bare pods, not the StatefulSet behind
// its headless Service, so the replica names the router resolves through CoreDNS have no record:
// test/node-suites/env-space.ts deploys the env space as rendered and routes a session); the ingress's
// config (its vLLM upstream is resolved at start). Run on test/stack/node.test.ts's node.
import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { NON_ROOT_UID } from "../../components/config/catalog";
import { ROUTER_UID } from "../../components/env/model";
import { NGINX_MIN_VERSION_FOR_RESOLVE, ROUTER_HEALTH_PATH, ROUTER_NO_REPLICA_CODE } from "../../components/env/router";
import { planToDir } from "../../scripts/lib/plan";
import { HARDENED_CONTAINER, type Node, type NodeSession } from "../helpers/node";
import { GET_PY, SESSION_PY } from "../helpers/openenv-session";
import { scaled } from "../helpers/waits";

const RECIPE = "wordle-whitebox";
const ENV = "wordle";
/** The named test sizing of the env replica (the node is this 2-CPU machine; the recipe asks 2 CPU / 4Gi / 8Gi). */
const NODE_ENV_TEST_SIZING = { resources: { cpu: "250m", memory: "512Mi" }, ephemeralStorage: "1Gi" } as const;
/** "1.30.6" >= "1.27.3". */
function versionAtLeast(v: string, min: string): boolean {
    const a = v.split(".").map(Number);
    const b = min.split(".").map(Number);
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
        const d = (a[i] ?? 0) - (b[i] ?? 0);
        if (d !== 0) return d > 0;
    }
    return true;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function imagesSuite(shared: NodeSession): void {
    describe("node: the stack's nginx (stand-in) and OpenEnv env server images run the recipe's own router and replica pods", () => {
        let node: Node;
        let ns = "";
        let routerPod: any;
        let replicaPod: any;
        let routerConf = "";
        let replicaIp = "";
        let planDir = "";
        const CLIENT = "openenv-client";

        before(async () => {
            node = shared.node;
            planDir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-node-images-"));
            const names = node.names;

            const plan = await planToDir(
                { recipe: RECIPE, target: "kubernetes" },
                { outDir: planDir, platformOverride: { envs: { [ENV]: { runAsNonRoot: true, ...NODE_ENV_TEST_SIZING } } } },
            );
            const find = (kind: string, suffix: string) => {
                const m = plan.manifests.find((x) => x.kind === kind && String(x.metadata?.name).endsWith(suffix));
                assert.ok(m, `the ${RECIPE} plan has a ${kind} *${suffix}`);
                return m;
            };
            const deployment = find("Deployment", `env-${ENV}-router`);
            const statefulSet = find("StatefulSet", `env-${ENV}-replica`);
            const configMap = find("ConfigMap", `env-${ENV}-router-config`);
            ns = deployment.metadata.namespace;
            routerConf = configMap.data["nginx.conf"];
            const onNode = (c: any, image: string) => ({ ...c, image, imagePullPolicy: "Never" });
            const rt = deployment.spec.template;
            routerPod = {
                apiVersion: "v1",
                kind: "Pod",
                metadata: { name: "env-router-node", namespace: ns, labels: rt.metadata.labels },
                spec: {
                    ...rt.spec,
                    nodeName: names.nodeName,
                    containers: rt.spec.containers.map((c: any) => onNode(c, c.name === "router" ? names.nginxImage : names.openenvImage)),
                },
            };
            const st = statefulSet.spec.template;
            replicaPod = {
                apiVersion: "v1",
                kind: "Pod",
                metadata: { name: `${statefulSet.metadata.name}-0`, namespace: ns, labels: st.metadata.labels },
                spec: { ...st.spec, nodeName: names.nodeName, containers: st.spec.containers.map((c: any) => onNode(c, names.openenvImage)) },
            };
            const client = {
                apiVersion: "v1",
                kind: "Pod",
                metadata: { name: CLIENT, namespace: ns, labels: { app: CLIENT } },
                spec: {
                    nodeName: names.nodeName,
                    automountServiceAccountToken: false,
                    enableServiceLinks: false,
                    terminationGracePeriodSeconds: 1,
                    securityContext: { runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534 },
                    containers: [
                        {
                            name: "client",
                            image: names.openenvImage,
                            imagePullPolicy: "Never",
                            command: ["sleep", "infinity"],
                            securityContext: HARDENED_CONTAINER,
                        },
                    ],
                },
            };
            const objects = [
                ...plan.manifests.filter((x) => x.kind === "Namespace" && x.metadata.name === ns),
                // The pods may come before the controller-manager makes the namespace's default ServiceAccount.
                { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default", namespace: ns } },
                configMap,
                routerPod,
                replicaPod,
                client,
            ];
            await node.apply({ apiVersion: "v1", kind: "List", items: objects });
        });

        after(async () => {
            if (planDir !== "") fs.rmSync(planDir, { recursive: true, force: true });
            await shared.clearNamespaces();
        });

        /** Waits for a pod's Ready condition; fails with `kubectl describe` and the kubelet's log. */
        const waitReady = async (pod: string, seconds = 180): Promise<number> => {
            const t0 = Date.now();
            let status = "";
            while (Date.now() - t0 < scaled(seconds * 1000)) {
                status = (await node.kubectl(["-n", ns, "get", "pod", pod, "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'])).stdout.trim();
                if (status === "True") return (Date.now() - t0) / 1000;
                await sleep(500);
            }
            const describe = await node.kubectl(["-n", ns, "describe", "pod", pod]);
            const logs = await node.kubectl(["-n", ns, "logs", pod, "--all-containers", "--tail=30"]);
            assert.fail(
                `${pod} not Ready after ${seconds} s:\n${describe.stdout}\nlogs:\n${logs.stdout}${logs.stderr}\nkubelet:\n${node.logTail("kubelet", 30)}`,
            );
        };

        const exec = (pod: string, container: string, argv: readonly string[], timeoutMs = 60_000) =>
            node.kubectl(["-n", ns, "exec", pod, "-c", container, "--", ...argv], undefined, timeoutMs);

        const podJson = async (pod: string) => JSON.parse(await node.kubectlOk(["-n", ns, "get", "pod", pod, "-o", "json"]));

        it(`nginx image: nginx >= ${NGINX_MIN_VERSION_FOR_RESOLVE}, the env router's pod Ready behind its probes as uid ${ROUTER_UID} on a read-only root, serving the rendered config with \`resolve\` upstreams`, async () => {
            const secs = await waitReady(routerPod.metadata.name);
            process.stderr.write(`# router pod Ready ${secs.toFixed(1)} s after kubectl apply\n`);
            const pod = await podJson(routerPod.metadata.name);
            const router = pod.spec.containers.find((c: any) => c.name === "router");
            assert.equal(router.readinessProbe.httpGet.path, ROUTER_HEALTH_PATH, "the router's readiness probe is the rendered one");
            assert.equal(router.securityContext.readOnlyRootFilesystem, true);
            assert.deepEqual(router.securityContext.capabilities.drop, ["ALL"]);
            for (const s of pod.status.containerStatuses)
                assert.ok(s.ready && s.state.running, `container ${s.name} ready and running: ${JSON.stringify(s.state)}`);

            const v = await exec(routerPod.metadata.name, "router", ["nginx", "-V"]);
            assert.equal(v.code, 0, v.stderr);
            const version = /nginx version: nginx\/(\d+\.\d+\.\d+)/.exec(`${v.stdout}${v.stderr}`)?.[1];
            assert.ok(version, `nginx -V names a version: ${v.stdout}${v.stderr}`);
            assert.ok(versionAtLeast(version, NGINX_MIN_VERSION_FOR_RESOLVE), `nginx ${version} >= ${NGINX_MIN_VERSION_FOR_RESOLVE} (server ... resolve)`);
            process.stderr.write(`# nginx ${version} in the router container\n`);

            // The deployed form (ROUTER.md "DNS"): every replica a `server <pod DNS name> resolve` in a zoned upstream.
            assert.match(routerConf, /^\s*zone env_sessions /m);
            const resolveLines = routerConf.split("\n").filter((l) => /^\s*server \S+ resolve /.test(l));
            assert.ok(resolveLines.length >= 2, `the rendered config has \`server ... resolve\` lines: ${resolveLines.length}`);
            // The container's own command line (nginx -p <runDir> -c <mounted conf> -e stderr), config test only.
            const t = await exec(routerPod.metadata.name, "router", [...router.command, "-t"]);
            assert.equal(t.code, 0, `nginx -t of the mounted config: ${t.stdout}${t.stderr}`);
            assert.match(t.stderr, /test is successful/);

            const id = await exec(routerPod.metadata.name, "router", ["sh", "-c", 'id -u; id -un; touch /probe-ro 2>&1; echo "root-touch=$?"']);
            assert.equal(id.code, 0, id.stderr);
            const [uid, user] = id.stdout.split("\n");
            assert.equal(uid, String(ROUTER_UID), `uid: ${id.stdout}`);
            assert.equal(user, "nginx", "the image's user 101 is nginx, as in nginxinc/nginx-unprivileged");
            assert.match(id.stdout, /Read-only file system/);
            assert.match(id.stdout, /root-touch=1/);

            // The capacity responder runs in the env's image (python3), beside nginx.
            const responder = await exec(routerPod.metadata.name, "capacity-responder", [
                "python3",
                "-c",
                "import os, sys; print(os.getuid(), sys.version_info[:2])",
            ]);
            assert.equal(responder.code, 0, responder.stderr);
            assert.equal(responder.stdout.trim(), `${ROUTER_UID} (3, 11)`);
        });

        it(`OpenEnv image: a replica's pod Ready behind its /health probes as uid ${NON_ROOT_UID} on a read-only root (envs.${ENV}.runAsNonRoot)`, async () => {
            const secs = await waitReady(replicaPod.metadata.name);
            process.stderr.write(`# env replica pod Ready ${secs.toFixed(1)} s after kubectl apply\n`);
            const pod = await podJson(replicaPod.metadata.name);
            const env = pod.spec.containers.find((c: any) => c.name === "env");
            assert.equal(env.readinessProbe.httpGet.path, "/health");
            assert.equal(env.readinessProbe.httpGet.port, 8000);
            assert.equal(env.command, undefined, "the image's own CMD (the catalog's uvicorn-cli form) starts the server");
            assert.equal(env.securityContext.readOnlyRootFilesystem, true);
            assert.ok(pod.status.containerStatuses[0].ready);
            replicaIp = pod.status.podIP;
            assert.match(replicaIp, /^10\.214\.0\.\d+$/, "the pod has an address on the CNI bridge");

            const id = await exec(replicaPod.metadata.name, "env", [
                "sh",
                "-c",
                'id -u; touch /probe-ro 2>&1; echo "root-touch=$?"; tr "\\0" " " < /proc/1/cmdline',
            ]);
            assert.equal(id.code, 0, id.stderr);
            assert.equal(id.stdout.split("\n")[0], String(NON_ROOT_UID), `uid: ${id.stdout}`);
            assert.match(id.stdout, /Read-only file system/);
            assert.match(id.stdout, /uvicorn server\.app:app --host 0\.0\.0\.0 --port 8000/, `PID 1 is the catalog's command form: ${id.stdout}`);
            const logs = await node.kubectl(["-n", ns, "logs", replicaPod.metadata.name, "-c", "env", "--tail=50"]);
            assert.match(logs.stdout, /GET \/health HTTP\/1\.1" 200/, "uvicorn logged the kubelet's probes");
        });

        it("one real OpenEnv session over WS /ws from another pod, with openenv's own client", async () => {
            assert.ok(replicaIp, "needs the replica from the previous test");
            await waitReady(CLIENT, 90);
            const health = await exec(CLIENT, "client", ["python3", "-I", "-c", GET_PY, `http://${replicaIp}:8000/health`]);
            assert.equal(health.code, 0, health.stderr);
            assert.equal(health.stdout.split("\n")[0], "200", health.stdout);
            assert.deepEqual(JSON.parse(health.stdout.split("\n")[1]!), { status: "healthy" });

            const t0 = Date.now();
            const s = await exec(CLIENT, "client", ["python3", "-I", "-c", SESSION_PY, `http://${replicaIp}:8000`], 90_000);
            assert.equal(s.code, 0, `the session: ${s.stdout}${s.stderr}`);
            const out = JSON.parse(s.stdout.trim().split("\n").pop()!);
            process.stderr.write(`# one OpenEnv session (reset, step, state) in ${((Date.now() - t0) / 1000).toFixed(1)} s (python start included)\n`);
            assert.equal(out.reset.observation.echoed_message, "Echo Env environment ready!", JSON.stringify(out));
            assert.equal(out.reset.done, false);
            assert.equal(out.step.observation.echoed_message, "hello from the node", JSON.stringify(out));
            assert.equal(out.step.observation.message_length, "hello from the node".length);
            assert.equal(out.step.reward, 1.0, "the echo env's reward: min(0.1 * length, 1)");
            assert.equal(out.state.step_count, 1, JSON.stringify(out.state));
            const logs = await node.kubectl(["-n", ns, "logs", replicaPod.metadata.name, "-c", "env", "--tail=50"]);
            assert.match(logs.stdout, /"WebSocket \/ws" \[accepted\]/, "the replica accepted the websocket");
        });

        it("the router answers its own health route from another pod; with no replica name resolvable, GET /health through it gets the router's own 503", async () => {
            const ip = (await podJson(routerPod.metadata.name)).status.podIP;
            const h = await exec(CLIENT, "client", ["python3", "-I", "-c", GET_PY, `http://${ip}:8000${ROUTER_HEALTH_PATH}`]);
            assert.equal(h.code, 0, h.stderr);
            const [status, body] = h.stdout.split("\n");
            assert.equal(status, "200", h.stdout);
            const [, replicas, perReplica] = /^# Env '[^']+': (\d+) replicas x (\d+) sessions/m.exec(routerConf) ?? [];
            assert.deepEqual(JSON.parse(body!), {
                status: "healthy",
                role: "router",
                env: ENV,
                replicas: Number(replicas),
                sessionsPerReplica: Number(perReplica),
            });
            const state = await exec(CLIENT, "client", ["python3", "-I", "-c", GET_PY, `http://${ip}:8000/health`]);
            assert.equal(state.code, 0, state.stderr);
            const [code, unavailable] = state.stdout.split("\n");
            assert.equal(code, "503", `GET /health through the router, no replica resolvable: ${state.stdout}`);
            assert.equal(JSON.parse(unavailable!).code, ROUTER_NO_REPLICA_CODE, `the router's own 503 body: ${unavailable}`);
        });
    });
}
