// A recipe's env space deployed as the plan renders it, on the real node (issue #29 point 3): the
// wordle-whitebox plan (`npm run plan -- --recipe wordle-whitebox`) with a named test override
// (NODE_STACK_OVERRIDE: the fixture's images pinned by digest, small replica sizing for this 2-CPU
// node), its Namespaces, ServiceAccount, ConfigMaps, Services, NetworkPolicies, PodDisruptionBudgets,
// the env router Deployment and the replica StatefulSet applied as they are. Stand-ins, named: the
// replicas run OpenEnv's own echo env (test/node/images.sh openenv-echo), not the textarena image;
// nginx is Debian forky's 1.30 in place of nginxinc/nginx-unprivileged; the trainer is a pod with the
// training Job's pod labels on the OpenEnv image (openenv's client), not the trainer image. The
// training Job and its claims are not applied (vLLM and the trainer need a GPU and a model). Checked
// on the running pods: every pod Ready behind its real probes; a real OpenEnv session (reset, step,
// state) through the router at the URL the Job gives the trainer, the router reaching the replica by
// its pod DNS name (`server ... resolve` through CoreDNS, within its resolver's `valid` period after
// the replicas are Ready: it starts before they are); and the policies, measured: a pod without
// the trainer's labels is refused by the router, the trainer stand-in cannot reach a replica
// directly. The replicas run non-root with a read-only root (runAsNonRoot in the override: the
// default of envs that run model code, whose rendered securityContext they are checked to equal),
// measured in the running pods; the router's capacity responder is Ready behind its exec probes.
// Run on test/stack/node.test.ts's node.
import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { planToDir } from "../../scripts/lib/plan";
import { imageRefByDigest, type Node, type NodeSession, openenvClientPod, podExec } from "../helpers/node";
import { whileNameLookupFails } from "../helpers/name-lookup";
import { GET_PY, SESSION_PY } from "../helpers/openenv-session";
import type { Manifest } from "../helpers/reachability";
import { pollUntil, scaledSeconds } from "../helpers/waits";

const RECIPE = "wordle-whitebox";
const ENV = "wordle";
/** Kinds applied from the plan (the training Job and its claims are left out, see the header). */
const APPLIED = new Set(["Namespace", "ServiceAccount", "ConfigMap", "Service", "NetworkPolicy", "PodDisruptionBudget", "StatefulSet", "Deployment"]);

/** The named test override: the fixture's images by digest, replicas sized for this 2-CPU node. */
function nodeStackOverride(node: Node): Record<string, unknown> {
    return {
        images: { nginx: imageRefByDigest(node.names, "nginx") },
        envs: {
            [ENV]: {
                image: imageRefByDigest(node.names, "openenv-echo"),
                // Non-root with a read-only root, as every env that runs model code gets by default (the
                // coding env; the test below checks the rendered securityContext is that default's).
                runAsNonRoot: true,
                resources: { cpu: "100m", memory: "256Mi" },
                ephemeralStorage: "512Mi",
            },
        },
    };
}

export function envSpaceSuite(shared: NodeSession): void {
    describe(`node: the ${RECIPE} plan's env space on the real node, a real OpenEnv session through its router, its policies measured`, () => {
        let node: Node;
        let manifests: Manifest[] = [];
        let envNs = "";
        let trainingNs = "";
        let envUrl = "";
        let trainerLabels: Record<string, string> = {};
        let planDir = "";

        const byKind = (kind: string) => manifests.filter((m) => m.kind === kind);
        const kubectlList = (items: readonly unknown[]) => JSON.stringify({ apiVersion: "v1", kind: "List", items });

        before(async () => {
            node = shared.node;
            planDir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-node-stack-"));
            const plan = await planToDir({ recipe: RECIPE, target: "kubernetes" }, { outDir: planDir, platformOverride: nodeStackOverride(node) });
            manifests = [...plan.manifests];
            const job = byKind("Job")[0];
            assert.ok(job, `the ${RECIPE} plan has a training Job`);
            trainingNs = job.metadata.namespace;
            trainerLabels = job.spec.template.metadata.labels;
            envUrl = job.spec.template.spec.containers.flatMap((c: any) => c.env ?? []).find((e: any) => e.name === `ENV_${ENV.toUpperCase()}_URL`)?.value;
            assert.match(envUrl ?? "", /^http:\/\/[a-z0-9-]+\.[a-z0-9-]+\.svc\.cluster\.local:\d+$/, `the Job's ENV_${ENV.toUpperCase()}_URL`);
            envNs = byKind("StatefulSet")[0]?.metadata.namespace;
        });

        after(async () => {
            if (planDir !== "") fs.rmSync(planDir, { recursive: true, force: true });
            await shared.clearNamespaces();
        });

        const exec = (ns: string, pod: string, container: string, argv: readonly string[], timeoutMs?: number) =>
            podExec(node, ns, pod, container, argv, timeoutMs);

        /** GET_PY from a pod of the training namespace, run again while its name lookup fails. */
        const getFromPod = (pod: string, url: string) =>
            whileNameLookupFails(`${pod} -> ${url}`, () => exec(trainingNs, pod, "client", ["python3", "-I", "-c", GET_PY, url, String(scaledSeconds(5))]));

        /** A pod on the OpenEnv image (openenv's client) in the training namespace, with these labels. */
        const clientPod = (name: string, labels: Record<string, string>) => openenvClientPod(node, name, trainingNs, labels);

        it("the env space as the plan renders it comes Ready behind its real probes, every image pinned by digest and present (nothing pulled)", async () => {
            const applied = manifests.filter((m) => APPLIED.has(m.kind));
            const left = manifests.filter((m) => !APPLIED.has(m.kind)).map((m) => m.kind);
            assert.deepEqual([...new Set(left)].sort(), ["Job", "PersistentVolumeClaim"], "only the training Job and its claims are left out");
            const t0 = Date.now();
            // Namespaces first: the namespaced objects need them.
            await node.kubectlOk(["apply", "-f", "-"], kubectlList(applied.filter((m) => m.kind === "Namespace")));
            await node.kubectlOk(["apply", "-f", "-"], kubectlList(applied.filter((m) => m.kind !== "Namespace")));
            for (const w of [...byKind("StatefulSet"), ...byKind("Deployment")]) {
                const what = `${w.kind.toLowerCase()}/${w.metadata.name}`;
                const r = await node.kubectl(["-n", w.metadata.namespace, "rollout", "status", what, `--timeout=${scaledSeconds(240)}s`]);
                if (r.code !== 0) {
                    const pods = await node.kubectl(["-n", w.metadata.namespace, "get", "pods", "-o", "wide"]);
                    const events = await node.kubectl(["-n", w.metadata.namespace, "get", "events", "--sort-by=.lastTimestamp"]);
                    assert.fail(`${what} not rolled out: ${r.stdout}${r.stderr}\n${pods.stdout}\n${events.stdout.split("\n").slice(-25).join("\n")}`);
                }
            }
            process.stderr.write(`# ${RECIPE} env space Ready ${((Date.now() - t0) / 1000).toFixed(1)} s after kubectl apply\n`);
            const pods = JSON.parse(await node.kubectlOk(["-n", envNs, "get", "pods", "-o", "json"])).items;
            const replicas = byKind("StatefulSet")[0]!.spec.replicas;
            const routers = byKind("Deployment")[0]!.spec.replicas;
            assert.equal(pods.length, replicas + routers, pods.map((p: any) => p.metadata.name).join(" "));
            for (const p of pods) {
                for (const c of p.spec.containers) {
                    assert.match(c.image, /^localhost\/arl-node\/[a-z-]+@sha256:[0-9a-f]{64}$/, `${p.metadata.name}/${c.name} image pinned by digest`);
                    assert.equal(c.imagePullPolicy, "IfNotPresent", `${p.metadata.name}/${c.name}: the plan's pull policy for a digest`);
                }
                for (const s of p.status.containerStatuses) assert.ok(s.ready && s.state.running, `${p.metadata.name}/${s.name} ready and running`);
            }
        });

        it("the replicas run non-root (uid 65532, every process) with a read-only root, as the coding env's default renders them; the capacity responder Ready behind its exec probes", async () => {
            assert.ok(envNs, "needs the env space from the first test");
            const sts = byKind("StatefulSet")[0]!;
            // What mbpp-whitebox renders for its coding env (model code) by default, with no override.
            const codingDir = fs.mkdtempSync(path.join(planDir, "coding-"));
            const coding = (await planToDir({ recipe: "mbpp-whitebox", target: "kubernetes" }, { outDir: codingDir })).manifests.find(
                (m: Manifest) => m.kind === "StatefulSet",
            ) as Manifest;
            const podSpec = sts.spec.template.spec;
            assert.deepEqual(podSpec.securityContext, coding.spec.template.spec.securityContext, "pod securityContext: the coding env's default");
            assert.deepEqual(podSpec.securityContext, {
                runAsNonRoot: true,
                runAsUser: 65532,
                runAsGroup: 65532,
                fsGroup: 65532,
                seccompProfile: { type: "RuntimeDefault" },
            });
            const env = (spec: any) => spec.containers.find((c: any) => c.name === "env");
            assert.deepEqual(
                env(podSpec).securityContext,
                env(coding.spec.template.spec).securityContext,
                "container securityContext: the coding env's default",
            );
            assert.equal(env(podSpec).securityContext.readOnlyRootFilesystem, true);
            const probe = [
                "import errno, glob, json, os",
                'out = {"uid": os.getuid(), "gid": os.getgid(), "home": os.environ.get("HOME")}',
                "uids = set()",
                'for st in glob.glob("/proc/[0-9]*/status"):',
                "    try:",
                "        uids.update(int(x) for line in open(st) if line.startswith('Uid:') for x in line.split()[1:])",
                "    except OSError:",
                "        pass",
                'out["process_uids"] = sorted(uids)',
                'for p in ["/probe-ro", "/app/probe-ro", "/app/env/probe-ro", "/tmp/probe-rw"]:',
                "    try:",
                '        open(p, "w").close()',
                '        out[p] = "written"',
                "    except OSError as e:",
                "        out[p] = errno.errorcode.get(e.errno, str(e.errno))",
                "print(json.dumps(out))",
            ].join("\n");
            for (let i = 0; i < sts.spec.replicas; i++) {
                const pod = `${sts.metadata.name}-${i}`;
                const r = await exec(envNs, pod, "env", ["python3", "-I", "-c", probe]);
                assert.equal(r.code, 0, `${pod}: ${r.out}`);
                const got = JSON.parse(r.stdout.trim().split("\n").pop()!);
                assert.deepEqual(
                    got,
                    {
                        uid: 65532,
                        gid: 65532,
                        home: "/tmp",
                        process_uids: [65532],
                        "/probe-ro": "EROFS",
                        "/app/probe-ro": "EROFS",
                        "/app/env/probe-ro": "EROFS",
                        "/tmp/probe-rw": "written",
                    },
                    `${pod}: no process as root, the root (and the app) read-only, /tmp the scratch dir`,
                );
            }
            // The router pods' capacity responder: exec probes rendered, and Ready behind them on the node.
            const router = byKind("Deployment")[0]!;
            const rc = router.spec.template.spec.containers.find((c: any) => c.name === "capacity-responder");
            for (const p of ["readinessProbe", "livenessProbe"])
                assert.ok(rc[p]?.exec?.command?.includes("--probe"), `capacity-responder ${p}: ${JSON.stringify(rc[p])}`);
            const pods = JSON.parse(
                await node.kubectlOk([
                    "-n",
                    envNs,
                    "get",
                    "pods",
                    "-l",
                    Object.entries(router.spec.selector.matchLabels)
                        .map(([k, v]) => `${k}=${v}`)
                        .join(","),
                    "-o",
                    "json",
                ]),
            ).items;
            assert.equal(pods.length, router.spec.replicas, "the router pods");
            for (const p of pods) {
                const s = p.status.containerStatuses.find((c: any) => c.name === "capacity-responder");
                assert.ok(s?.ready === true, `${p.metadata.name}/capacity-responder Ready behind its exec readiness probe: ${JSON.stringify(s)}`);
            }
        });

        it("a real OpenEnv session through the env router at the URL the Job gives the trainer; the router reaches the replica by its pod DNS name", async () => {
            assert.ok(envNs, "needs the env space from the first test");
            const conf = byKind("ConfigMap").find((c) => c.metadata.namespace === envNs)?.data?.["nginx.conf"] ?? "";
            assert.match(
                conf,
                /^\s*server [a-z0-9-]+-0\.[a-z0-9-]+\.[a-z0-9-]+\.svc\.cluster\.local:\d+ [^;]*\bresolve\b/m,
                "the deployed config names replicas by pod DNS name, with resolve",
            );
            await node.kubectlOk(["apply", "-f", "-"], kubectlList([clientPod("trainer-standin", trainerLabels)]));
            await node.kubectlOk(["-n", trainingNs, "wait", "--for=condition=Ready", `--timeout=${scaledSeconds(90)}s`, "pod/trainer-standin"]);
            // The router re-resolves replica names every `resolver ... valid=10s` (ROUTER.md): a name that
            // had no record when the router started (its replica not yet Ready) is found within that.
            const tr = Date.now();
            let health = { code: 1, out: "not tried", stdout: "" };
            await pollUntil(
                `GET ${envUrl}/health through the router: 200`,
                async () => {
                    health = await exec(trainingNs, "trainer-standin", "client", ["python3", "-I", "-c", GET_PY, `${envUrl}/health`, String(scaledSeconds(5))]);
                    return health.stdout.split("\n")[0] === "200";
                },
                { budgetMs: 40_000, intervalMs: 1000, describe: () => health.out },
            ).catch(() => undefined);
            assert.equal(health.stdout.split("\n")[0], "200", `GET ${envUrl}/health through the router: ${health.out}`);
            process.stderr.write(`# the router reached a replica ${((Date.now() - tr) / 1000).toFixed(1)} s after the env space was Ready\n`);
            const t0 = Date.now();
            const s = await whileNameLookupFails(`the session through ${envUrl}`, () =>
                exec(trainingNs, "trainer-standin", "client", ["python3", "-I", "-c", SESSION_PY, envUrl], 90_000),
            );
            assert.equal(s.code, 0, `the session through ${envUrl}: ${s.out}`);
            const out = JSON.parse(s.stdout.trim().split("\n").pop()!);
            process.stderr.write(`# one OpenEnv session through the router in ${((Date.now() - t0) / 1000).toFixed(1)} s (python start included)\n`);
            assert.equal(out.reset.observation.echoed_message, "Echo Env environment ready!", JSON.stringify(out));
            assert.equal(out.step.observation.echoed_message, "hello from the node", JSON.stringify(out));
            assert.equal(out.state.step_count, 1, JSON.stringify(out.state));
            // The router's access log names the replica address it proxied the session to: a replica pod's.
            const replicaIps = new Set<string>(
                JSON.parse(await node.kubectlOk(["-n", envNs, "get", "pods", "-o", "json"]))
                    .items.filter((p: any) => p.metadata.name.startsWith(byKind("StatefulSet")[0]!.metadata.name))
                    .map((p: any) => p.status.podIP),
            );
            let proxied: string[] = [];
            const readLog = async () => {
                const logs = await node.kubectl([
                    "-n",
                    envNs,
                    "logs",
                    `deployment/${byKind("Deployment")[0]!.metadata.name}`,
                    "-c",
                    "router",
                    "--all-pods=true",
                    "--tail=-1",
                ]);
                proxied = [...logs.stdout.matchAll(/GET \/ws[^\n]* replica=([0-9.]+):\d+/g)].map((m) => m[1]!);
                return proxied.length > 0;
            };
            await pollUntil("the router's access log", readLog, { budgetMs: 10_000, intervalMs: 500 }).catch(() => undefined);
            assert.ok(proxied.length > 0, "the router logged the session's replica");
            for (const ip of proxied) assert.ok(replicaIps.has(ip), `proxied to ${ip}, a replica pod (${[...replicaIps].join(", ")})`);
        });

        it("the policies, measured: a pod without the trainer's labels is refused by the router; the trainer stand-in cannot reach a replica directly", async () => {
            assert.ok(envUrl, "needs the env space from the first test");
            await node.kubectlOk(["apply", "-f", "-"], kubectlList([clientPod("not-trainer", { "app.kubernetes.io/name": "not-trainer" })]));
            await node.kubectlOk(["-n", trainingNs, "wait", "--for=condition=Ready", `--timeout=${scaledSeconds(90)}s`, "pod/not-trainer"]);
            const health = `${envUrl}/health`;
            const allowed = await getFromPod("trainer-standin", health);
            assert.equal(allowed.code, 0, `trainer stand-in -> ${health}: ${allowed.out}`);
            assert.equal(allowed.stdout.split("\n")[0], "200", allowed.out);
            const refused = await getFromPod("not-trainer", health);
            // Refused by the policy, not a name that failed to resolve (its DNS egress stays open).
            assert.notEqual(refused.code, 0, `not-trainer -> ${health} must be refused: ${refused.out}`);
            assert.match(refused.out, /timed out|Connection refused/, refused.out);
            assert.doesNotMatch(refused.out, /Name or service not known|name resolution/, refused.out);
            const sts = byKind("StatefulSet")[0]!;
            const replica0 = `http://${sts.metadata.name}-0.${sts.spec.serviceName}.${envNs}.svc.cluster.local:8000/health`;
            const direct = await getFromPod("trainer-standin", replica0);
            assert.notEqual(direct.code, 0, `trainer stand-in -> ${replica0} directly must be refused: ${direct.out}`);
            assert.match(direct.out, /timed out|Connection refused/, direct.out);
            assert.doesNotMatch(direct.out, /Name or service not known|name resolution/, direct.out);
        });
    });
}
