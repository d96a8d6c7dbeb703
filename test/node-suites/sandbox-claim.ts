// A sandbox claimed through the REAL agent-sandbox v1.0.1 controller on the real node (issue #29
// point 3), then the plan's training Job run as rendered. The controller
// (test/sandbox-controller/build.sh) runs in the node's network namespace against its API server,
// with the API server fixture's agent-sandbox CRDs. The opencode-blackbox plan is applied as `npm run
// plan` renders it, all but the Job (Namespaces, ServiceAccount, the claim admission policy and
// binding, Role, RoleBinding, ResourceQuota, NetworkPolicies, ConfigMaps, claims, Services, PDB,
// SandboxTemplate, SandboxWarmPool, the ingress Deployment and the per-rollout key verifier's
// Deployment), with a named test override (nodeClaimOverride: the fixture's images by digest, a
// one-sandbox pool, one ingress replica, the training pod sized for this 2-CPU node) and test keys in
// the Secrets the plan redacts: the ingress's keys file (its operators' key), and ONE test admin key in
// both the verifier's admin Secret (ingress namespace) and the trainer's copy of it (training
// namespace), as the Platform gives both the same key. The verifier runs from the pool's sandbox image
// as rendered (the fixture's runtime image carries rollout_keys.py where python/Dockerfile puts it).
// The warm pool's pod is made by the controller and scheduled by the node's scheduler.
// 1. The project's own backend (python/agent_rl_sandbox, AgentSandboxBackend, from the trainer-side
//    venv), authenticated as the trainer's ServiceAccount with the env the plan gives the trainer,
//    claims a sandbox (minting its rollout key at the verifier and delivering it to the pod's
//    forwarder), runs commands in it through its runtime, and releases it (revoking the key). Stand-in,
//    named: the trainer is this test's process in the node's network namespace (it reaches the runtime,
//    the forwarder's key port, the verifier and the ingress from the node's address, which the policies
//    let through as node-local traffic; that namespace has no cluster DNS, so the verifier's admin URL
//    is its Service's ClusterIP in place of its name). The minted key (captured by wrapping the
//    backend's mint call) passes the ingress's check while the claim is held and gets 401 once it is
//    released.
// 2. The training Job as rendered: its supervisor starts `vllm serve`, waits for /health, runs the
//    args check on the trainer's command line and then the trainer, in one container behind the
//    Job's startup and readiness probes. Stand-ins, named: the trainer image (test/node/images.sh
//    trainer-standin: Debian python3 with the backend package, the real args check, a `vllm` that
//    serves python/tests/stub_model.py, and at /app/opencode_hf_sandbox.py a trainer whose parser is
//    built from the program's recorded facts and which, from inside the pod, calls vLLM, claims a
//    sandbox with the backend and has the sandbox's agent side call the model through its forwarder
//    and the ingress, with the rollout key the trainer minted for the claim); the PersistentVolumes (hostPath directories of this test, bound to the plan's
//    claims: no provisioner here). A copy of the Job with a flag the program does not have must fail
//    at the args check, before the trainer runs.
// The sandbox image is the runtime image (python/Dockerfile's steps without the stock opencode
// image). Run on test/stack/node.test.ts's node.
import { strict as assert } from "node:assert";
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import YAML from "yaml";
import { randomBytes } from "node:crypto";
import { renderKeysFile } from "../../components/ingress/nginx";
import { VERIFIER_ADMIN_KEY_DIR } from "../../components/ingress/verifier";
import { SECRET_ENV } from "../../components/training/model";
import { planToDir } from "../../scripts/lib/plan";
import { agentSandboxCrdFiles } from "../helpers/agent-sandbox-manifest";
import { waitForClaimQuotaMonitor as waitForClaimQuotaMonitorOn } from "../helpers/agent-sandbox-node";
import { command, imageRefByDigest, type Node, type NodeSession } from "../helpers/node";
import { secretFileRef, secretRef } from "../helpers/pod-secrets";
import type { Manifest } from "../helpers/reachability";
import { scaled, scaledSeconds } from "../helpers/waits";

const REPO_ROOT = path.resolve(__dirname, "..", "..");
const RECIPE = "opencode-blackbox";
const RUN_ID = "claim";

/**
 * The named test override: the fixture's images by digest (the trainer and nginx are stand-ins), one
 * warm sandbox, one ingress replica and the training pod's CPU and memory sized for this 2-CPU node.
 */
function nodeClaimOverride(node: Node): Record<string, unknown> {
    return {
        runId: RUN_ID,
        images: { trainer: imageRefByDigest(node.names, "trainer-standin"), nginx: imageRefByDigest(node.names, "nginx") },
        ingress: { replicas: 1 },
        training: { maxInflight: 1, trainerCpu: "200m", trainerMemory: "384Mi", vllmCpu: "100m", vllmMemory: "256Mi" },
        sandboxes: { image: imageRefByDigest(node.names, "sandbox-runtime"), poolSize: 1, headroom: 0, cpu: "250m", memory: "256Mi", maxLifetimeSeconds: 600 },
    };
}

/** A test key in the keys' alphabet (components/config/keys.ts). */
const testKey = (name: string) => `node-${name}-${randomBytes(16).toString("hex")}`;

/**
 * The backend as the trainer uses it: claim, run commands, release; one JSON line. The key the backend
 * mints for the claim is captured (the real mint call, wrapped) and sent to the ingress (argv[1]: its
 * ClusterIP URL) while the claim is held and after its release; a forged key of the same shape too.
 * The verifier's count of live keys (its admin API, the trainer's admin key) before and after.
 */
const CLAIM_PY = `
import base64, json, os, secrets, sys, time, urllib.error, urllib.request
from agent_rl_sandbox import rollout_keys
from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend
ingress = sys.argv[1]
minted = []
real_mint = rollout_keys.RolloutKeysClient.mint
def mint(self, rollout, ttl_seconds):
    key = real_mint(self, rollout, ttl_seconds)
    minted.append((rollout, key))
    return key
rollout_keys.RolloutKeysClient.mint = mint
def status(url, key=None):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + key} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
def live():
    return json.loads(urllib.request.urlopen(urllib.request.Request(os.environ["SANDBOX_ROLLOUT_KEYS_URL"] + "/rollouts",
        headers={"Authorization": "Bearer " + os.environ["SANDBOX_ROLLOUT_ADMIN_KEY"]}), timeout=20).read())["live"]
forged = "rk1." + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
backend = AgentSandboxBackend.from_env()
t0 = time.monotonic()
h = backend.create(timeout_s=300)
claimed = time.monotonic() - t0
ident = h.exec("id -u; id -g")
root = h.exec("touch /probe-root 2>&1; echo exit=$?")
home = h.exec("echo hi > $HOME/probe && cat $HOME/probe")
h.write_text("/workspace/solution.py", "print(sum(map(int, input().split())))\\n")
run = h.exec("echo '2 3' | python3 solution.py", cwd="/workspace")
out = {"claim": h.sandbox_id, "url": h.base_url, "claimed_s": round(claimed, 1),
       "id": ident.stdout.split(), "root": root.stdout.strip(), "home": home.stdout.strip(), "run": run.stdout.strip(), "run_exit": run.exit_code}
out["minted_for"] = [r for r, _ in minted]
key = minted[-1][1] if minted else None
out["live_held"] = live()
out["held"] = status(ingress + "/v1/models", key) if key else None
out["forged"] = status(ingress + "/v1/models", forged)
h.kill()
out["close_failures"] = backend.close()
out["live_released"] = live()
out["released"] = status(ingress + "/v1/models", key) if key else None
print(json.dumps(out))
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function sandboxClaimSuite(shared: NodeSession): void {
    describe(`node: a sandbox claimed through the real agent-sandbox controller from the ${RECIPE} plan's warm pool, by the project's own backend`, () => {
        let node: Node;
        let manifests: Manifest[] = [];
        let sandboxNs = "";
        let trainerEnv: Record<string, string> = {};
        let controller: ChildProcess | undefined;
        let dir = "";
        let controllerLog = "";
        let controllerError = "";
        let trainerKubeconfig = "";
        let venv = "";
        let quotaApplied = 0;
        let trainingNs = "";
        let pvRoot = "";
        let ingressNs = "";
        let ingressUrl = "";
        let verifierAdminUrl = "";
        /** The verifier's admin key: one value in its own Secret and in the trainer's copy (the Platform passes one key to both). */
        const rolloutAdminKey = testKey("rollout-admin");
        const pvNames: string[] = [];

        /** The per-rollout key verifier's objects (components/ingress/verifier.ts: `<ingress>-rollout-keys`). */
        const isVerifier = (m: Manifest) => String(m.metadata?.name ?? "").endsWith("-rollout-keys");
        const verifierDeployment = () => {
            const d = manifests.filter((m) => m.kind === "Deployment" && isVerifier(m));
            assert.equal(d.length, 1, `the ${RECIPE} plan has one rollout-key verifier Deployment`);
            return d[0]!;
        };
        /** GET <verifier admin>/rollouts with the trainer's admin key, from the node's network namespace: the live keys' count. */
        const liveRolloutKeys = async (): Promise<number> => {
            const py = `import json, sys, urllib.request\nreq = urllib.request.Request(sys.argv[1] + "/rollouts", headers={"Authorization": "Bearer " + sys.argv[2]})\nprint(json.loads(urllib.request.urlopen(req, timeout=20).read())["live"])`;
            const r = await command(
                "ip",
                ["netns", "exec", node.names.netns, path.join(venv, "bin", "python"), "-I", "-c", py, verifierAdminUrl, rolloutAdminKey],
                {
                    timeoutMs: 60_000,
                },
            );
            assert.equal(r.code, 0, `GET ${verifierAdminUrl}/rollouts: ${r.stdout}${r.stderr}`);
            return Number(r.stdout.trim());
        };

        /**
         * STAND-INS for what a provisioner would make: one hostPath PersistentVolume per claim of the
         * training namespace, under this test's directory, bound to its claim (claimRef) with the
         * claim's size and access modes. The container writes there as the image's root.
         */
        const persistentVolumeStandins = (ns: string): Manifest[] =>
            manifests
                .filter((m) => m.kind === "PersistentVolumeClaim" && m.metadata.namespace === ns)
                .map((claim) => {
                    const name = `${ns}-${claim.metadata.name}`.slice(0, 63);
                    const hostDir = path.join(pvRoot, claim.metadata.name);
                    fs.mkdirSync(hostDir, { recursive: true });
                    pvNames.push(name);
                    return {
                        apiVersion: "v1",
                        kind: "PersistentVolume",
                        metadata: { name, labels: { "agentrl.dev/node-test": "pv-standin" } },
                        spec: {
                            capacity: { storage: claim.spec.resources.requests.storage },
                            accessModes: claim.spec.accessModes,
                            persistentVolumeReclaimPolicy: "Retain",
                            ...(claim.spec.storageClassName !== undefined ? { storageClassName: claim.spec.storageClassName } : {}),
                            claimRef: { namespace: ns, name: claim.metadata.name },
                            hostPath: { path: hostDir, type: "Directory" },
                        },
                    };
                });

        /** A fixture script that prints its directory last (a no-op when it is built). */
        const buildDir = async (script: string, args: readonly string[], what: string): Promise<string> => {
            const r = await command("bash", [path.join(REPO_ROOT, script), ...args], { timeoutMs: 40 * 60_000 });
            const last = r.stdout.trim().split("\n").pop()?.trim() ?? "";
            assert.ok(r.code === 0 && last !== "", `${what} (bash ${script}) failed (exit ${r.code}): ${r.stderr.split("\n").slice(-20).join("\n")}`);
            return last;
        };

        before(async () => {
            node = shared.node;
            dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-node-claim-"));
            controllerLog = path.join(dir, "agent-sandbox-controller.log");
            pvRoot = path.join(dir, "pv");
            // Built by npm test's fixtures step (a no-op here then).
            const ctlDir = await buildDir("test/sandbox-controller/build.sh", [], "the agent-sandbox controller");
            venv = await buildDir("python/run-tests.sh", ["--venv-only"], "the trainer-side venv");

            for (const f of agentSandboxCrdFiles()) await node.kubectlOk(["apply", "--server-side", "-f", "-"], fs.readFileSync(f, "utf8"));
            await node.kubectlOk(["wait", "--for=condition=Established", `--timeout=${scaledSeconds(60)}s`, "crd", "--all"]);
            await waitForClaimQuotaMonitor();

            const log = fs.openSync(controllerLog, "a");
            controller = spawn(
                "ip",
                [
                    "netns",
                    "exec",
                    node.names.netns,
                    path.join(ctlDir, "bin", "agent-sandbox-controller"),
                    `--kubeconfig=${path.join(node.names.work, "kubeconfig")}`,
                    "--extensions",
                    "--leader-elect=false",
                    "--metrics-bind-address=0",
                    "--health-probe-bind-address=0",
                ],
                { stdio: ["ignore", log, log] },
            );
            controller.on("error", (e) => {
                controllerError = `the controller did not start: ${e.message}`;
            });
            fs.closeSync(log);

            const { plan, manifests: planned } = await planToDir(
                { recipe: RECIPE, target: "kubernetes" },
                { outDir: path.join(dir, "plan"), platformOverride: nodeClaimOverride(node) },
            );
            manifests = [...planned];
            sandboxNs = plan.names.namespaces.sandboxes;
            trainingNs = plan.names.namespaces.training;
            const sa = plan.training.serviceAccount;
            trainerEnv = { ...plan.training.trainer.env };
            // The whole plan but the Job (applied by its own test): namespaces, accounts and
            // admission policies first, the Deployments last (the ingress's nginx resolves the vLLM
            // and verifier Services' names when it starts). The Secrets the plan redacts get test keys:
            // the two admin-key Secrets are found by the pods that read them (the trainer's secretKeyRef, the verifier's volume).
            ingressNs = plan.names.namespaces.ingress;
            const verifierSecret = secretFileRef(verifierDeployment().spec.template.spec, VERIFIER_ADMIN_KEY_DIR);
            const trainerSecret = secretRef(job().spec.template.spec, SECRET_ENV.rolloutAdminKey);
            // The keys file over the plan's own key names (the operators' key alone: no shared sandboxes key, issue 56).
            const keysFile = renderKeysFile((plan.ingress?.keyNames ?? []).map((name) => ({ name, key: testKey(name) })));
            const is = (m: Manifest, ns: string, ref: { name: string }) => m.metadata.namespace === ns && m.metadata.name === ref.name;
            const wanted = manifests
                .filter((m) => m.kind !== "Job")
                .map((m) => {
                    if (m.kind !== "Secret") return m;
                    if (is(m, ingressNs, verifierSecret)) return { ...m, stringData: { [verifierSecret.key]: rolloutAdminKey } };
                    if (is(m, trainingNs, trainerSecret)) return { ...m, stringData: { [trainerSecret.key]: rolloutAdminKey } };
                    assert.equal(
                        m.metadata.namespace,
                        ingressNs,
                        `Secret ${m.metadata.namespace}/${m.metadata.name}: only the ingress's keys file and the verifier's and the trainer's admin key`,
                    );
                    return { ...m, stringData: { [Object.keys(m.stringData)[0]!]: keysFile } };
                });
            for (const [ns, ref] of [
                [ingressNs, verifierSecret],
                [trainingNs, trainerSecret],
            ] as const)
                assert.ok(
                    wanted.some((m) => m.kind === "Secret" && is(m, ns, ref)),
                    `the plan renders the Secret ${ns}/${ref.name} that a pod reads its admin key from`,
                );
            const rank = (k: string) => {
                const i = ["Namespace", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "PersistentVolume"].indexOf(k);
                return i !== -1 ? i : k === "Deployment" ? 99 : 9;
            };
            for (const m of [...wanted, ...persistentVolumeStandins(trainingNs)].sort((a, b) => rank(a.kind) - rank(b.kind)))
                await node.kubectlOk(["apply", "--server-side", "-f", "-"], JSON.stringify(m));
            quotaApplied = Date.now();

            // This process stands in for the trainer in the node's network namespace, which has no
            // cluster DNS: the verifier's admin URL and the ingress by their Services' ClusterIPs.
            const clusterUrl = async (svc: Manifest, port: number) =>
                `http://${(await node.kubectlOk(["-n", svc.metadata.namespace, "get", "service", svc.metadata.name, "-o", "jsonpath={.spec.clusterIP}"])).trim()}:${port}`;
            const verifierService = manifests.find((m) => m.kind === "Service" && isVerifier(m));
            assert.ok(verifierService, "the plan's verifier Service");
            const adminPort = verifierService.spec.ports.find((p: any) => p.name === "admin");
            assert.equal(
                trainerEnv.SANDBOX_ROLLOUT_KEYS_URL,
                `http://${verifierService.metadata.name}.${ingressNs}.svc.cluster.local:${adminPort.port}`,
                "the trainer's env names the verifier's admin port",
            );
            verifierAdminUrl = await clusterUrl(verifierService, adminPort.port);
            const ingressService = manifests.find((m) => m.kind === "Service" && m.metadata.namespace === ingressNs && !isVerifier(m));
            assert.ok(ingressService, "the plan's ingress Service");
            ingressUrl = await clusterUrl(ingressService, ingressService.spec.ports[0].port);

            // The trainer's ServiceAccount token, as its pod's projected volume gives it.
            const token = (await node.kubectlOk(["-n", trainingNs, "create", "token", sa, "--duration=1h"])).trim();
            const admin = YAML.parse(fs.readFileSync(path.join(node.names.work, "kubeconfig"), "utf8"));
            trainerKubeconfig = path.join(dir, "trainer.kubeconfig");
            fs.writeFileSync(
                trainerKubeconfig,
                YAML.stringify({
                    ...admin,
                    users: [{ name: "trainer", user: { token } }],
                    contexts: [{ name: "trainer", context: { cluster: admin.clusters[0].name, user: "trainer" } }],
                    "current-context": "trainer",
                }),
                { mode: 0o600 },
            );
        });

        after(async () => {
            const running = () => controller !== undefined && controller.exitCode === null && controller.signalCode === null;
            if (running()) {
                controller!.kill("SIGTERM");
                for (let i = 0; i < 20 && running(); i++) await sleep(250);
                if (running()) controller!.kill("SIGKILL");
            }
            try {
                await shared.clearNamespaces();
            } finally {
                if (pvNames.length > 0) await node.kubectl(["delete", "persistentvolume", "--ignore-not-found", "--wait=false", ...pvNames]);
                if (dir !== "") fs.rmSync(dir, { recursive: true, force: true });
            }
        });

        const waitForClaimQuotaMonitor = async () => {
            const s = await waitForClaimQuotaMonitorOn(node);
            process.stderr.write(`# the quota controller counts claims ${s.toFixed(1)} s after the CRDs were established\n`);
        };

        const controllerTail = () => {
            try {
                return `${controllerError}\n${fs.readFileSync(controllerLog, "utf8").split("\n").slice(-25).join("\n")}`;
            } catch {
                return `${controllerError}\n(no controller log)`;
            }
        };
        const sandboxPods = async (): Promise<any[]> => JSON.parse(await node.kubectlOk(["-n", sandboxNs, "get", "pods", "-o", "json"])).items;

        it("the controller fills the warm pool: its pod, made from the SandboxTemplate and placed by the scheduler, comes Ready behind its probes", async () => {
            const t0 = Date.now();
            let ready: any[] = [];
            while (Date.now() - t0 < scaled(180_000)) {
                ready = (await sandboxPods()).filter((p) => p.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True"));
                if (ready.length > 0) break;
                await sleep(1000);
            }
            if (ready.length === 0) {
                const all = await node.kubectl(["-n", sandboxNs, "get", "sandboxwarmpools,sandboxes,pods,events", "-o", "wide"]);
                assert.fail(`no warm sandbox Ready after ${scaled(180_000) / 1000} s:\n${all.stdout}${all.stderr}\ncontroller:\n${controllerTail()}`);
            }
            const pod = ready[0];
            assert.equal(pod.spec.nodeName, node.names.nodeName, "placed on the node by the scheduler");
            const template = manifests.find((m) => m.kind === "SandboxTemplate")!;
            assert.deepEqual(
                pod.spec.containers.map((c: any) => c.image),
                template.spec.podTemplate.spec.containers.map((c: any) => c.image),
                "the template's image (by digest)",
            );
            process.stderr.write(`# warm sandbox ${pod.metadata.name} Ready ${((Date.now() - t0) / 1000).toFixed(1)} s after the pool was applied\n`);
        });

        it("the pool's ResourceQuota counts claims: its status names count/sandboxclaims (until then the API server refuses every claim)", async () => {
            // A claim made before the quota controller has counted the new resource is refused:
            // 403 "status unknown for quota: <quota>, resources: count/sandboxclaims..." (measured on this
            // node: the first claim, 1.7 s after the pool was Ready, with the CRDs seconds old). The
            // backend retries that refusal for a while (agent_sandbox.py QUOTA_NOT_COUNTED_RETRY_SECONDS).
            const quota = manifests.find((m) => m.kind === "ResourceQuota");
            assert.ok(quota, "the plan's sandbox ResourceQuota");
            const counted = Object.keys(quota.spec.hard).filter((k) => k.startsWith("count/"));
            assert.ok(counted.length > 0, `object counts in ${JSON.stringify(quota.spec.hard)}`);
            let used: Record<string, string> = {};
            while (Date.now() - quotaApplied < scaled(60_000)) {
                used = JSON.parse(await node.kubectlOk(["-n", sandboxNs, "get", "resourcequota", quota.metadata.name, "-o", "json"])).status?.used ?? {};
                if (counted.every((k) => k in used)) break;
                await sleep(500);
            }
            assert.ok(
                counted.every((k) => k in used),
                `the quota controller never counted ${counted.join(", ")}: ${JSON.stringify(used)}`,
            );
            process.stderr.write(
                `# quota ${quota.metadata.name} counting ${counted.join(", ")} ${((Date.now() - quotaApplied) / 1000).toFixed(1)} s after it was applied\n`,
            );
        });

        /** Waits (180 s scaled) for a Deployment of the ingress namespace to roll out; fails with its pods, events and logs. */
        const rolledOut = async (d: Manifest, what: string) => {
            const rollout = await node.kubectl(
                ["-n", ingressNs, "rollout", "status", "deployment", d.metadata.name, `--timeout=${scaledSeconds(180)}s`],
                undefined,
                scaled(190_000),
            );
            if (rollout.code !== 0) {
                const state = await node.kubectl(["-n", ingressNs, "get", "pods,events", "-o", "wide"]);
                const logs = await node.kubectl(["-n", ingressNs, "logs", `deployment/${d.metadata.name}`, "--all-containers", "--tail=20"]);
                assert.fail(`${what} not rolled out: ${rollout.stdout}${rollout.stderr}\n${state.stdout}\n${logs.stdout}${logs.stderr}`);
            }
        };

        it("the per-rollout key verifier's Deployment as rendered (rollout_keys.py from the pool's sandbox image, the admin key from its Secret) comes Ready behind its probes, with no key live", async () => {
            const d = verifierDeployment();
            await rolledOut(d, "the verifier");
            const pods = JSON.parse(
                await node.kubectlOk([
                    "-n",
                    ingressNs,
                    "get",
                    "pods",
                    "-l",
                    Object.entries(d.spec.selector.matchLabels)
                        .map(([k, v]) => `${k}=${v}`)
                        .join(","),
                    "-o",
                    "json",
                ]),
            ).items;
            assert.equal(pods.length, 1, "one verifier pod (one table of live keys)");
            assert.deepEqual(
                pods[0].spec.containers.map((c: any) => c.image),
                d.spec.template.spec.containers.map((c: any) => c.image),
                "the Deployment's image (the pool's sandbox image, by digest)",
            );
            assert.equal(await liveRolloutKeys(), 0, "no key live before any claim (and the trainer's admin key is the verifier's)");
        });

        it("the backend claims it as the trainer (minting the claim's rollout key and delivering it to the pod's forwarder), runs commands as uid 65532 on a read-only root with a writable HOME, and its release deletes the claim and revokes the key (401 at the ingress)", async () => {
            // The claim's key is checked at the ingress: its nginx Ready first (it starts once the Services it names resolve).
            await rolledOut(ingressDeployment(), "the ingress");
            const r = await command("ip", ["netns", "exec", node.names.netns, path.join(venv, "bin", "python"), "-B", "-c", CLAIM_PY, ingressUrl], {
                timeoutMs: 420_000, // create() waits up to 300 s for the claim, then the commands
                env: {
                    PATH: process.env.PATH ?? "/usr/bin:/bin",
                    HOME: dir,
                    ...trainerEnv,
                    // What the pod gets from its Secret (the test admin key) and, for the node's namespace without cluster DNS, the verifier by ClusterIP.
                    [SECRET_ENV.rolloutAdminKey]: rolloutAdminKey,
                    SANDBOX_ROLLOUT_KEYS_URL: verifierAdminUrl,
                    KUBECONFIG: trainerKubeconfig,
                    PYTHONPATH: path.join(REPO_ROOT, "python"),
                },
            });
            assert.equal(
                r.code,
                0,
                `the backend (exit ${r.code}):\n${r.stdout}\n${r.stderr.split("\n").slice(-30).join("\n")}\ncontroller:\n${controllerTail()}`,
            );
            const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
            process.stderr.write(`# claim ${out.claim}: bound and its runtime answering ${out.claimed_s} s after create(), at ${out.url}\n`);
            assert.deepEqual(out.id, ["65532", "65532"], "uid and gid");
            assert.match(out.root, /Read-only file system/, `touch /probe-root: ${out.root}`);
            assert.notEqual(out.root, "exit=0");
            assert.equal(out.home, "hi", "HOME is writable");
            assert.equal(out.run, "5", "a program written through the runtime runs");
            assert.equal(out.close_failures, 0);
            assert.match(out.claim, new RegExp(`^${RUN_ID}-[0-9a-f]{12}$`));
            // The rollout key: minted once for this claim (create() returned only after the forwarder took it: 204).
            assert.deepEqual(out.minted_for, [out.claim], "one rollout key minted, for the claim");
            assert.equal(out.live_held, 1, "the verifier holds the claim's key while it is held");
            // No vLLM runs yet (the Job comes later): a key the ingress accepts reaches the upstream and gets its 502; a refused one 401.
            assert.equal(out.forged, 401, "a forged key of the rollout-key shape: refused by the verifier");
            assert.equal(out.held, 502, "the claim's key while held: accepted by the ingress (then no vLLM yet: 502)");
            assert.equal(out.live_released, 0, "the release revoked the key at the verifier");
            assert.equal(out.released, 401, "the claim's key after the release: refused at the ingress");
            process.stderr.write(
                `# rollout key of ${out.claim}: live ${out.live_held} while held, ingress ${out.held} (no vLLM yet); after release live ${out.live_released}, ingress ${out.released}; a forged one ${out.forged}\n`,
            );
            // The release deleted the claim; the controller then removes its sandbox and pod.
            const claims = JSON.parse(await node.kubectlOk(["-n", sandboxNs, "get", "sandboxclaims", "-o", "json"])).items.map((c: any) => c.metadata.name);
            assert.ok(!claims.includes(out.claim), `claim ${out.claim} deleted: ${claims.join(", ")}`);
        });

        const ingressDeployment = () => {
            const d = manifests.filter((m) => m.kind === "Deployment" && m.metadata.namespace === ingressNs && !isVerifier(m));
            assert.equal(d.length, 1, `the ${RECIPE} plan has one ingress Deployment`);
            return d[0]!;
        };
        const job = () => {
            const jobs = manifests.filter((m) => m.kind === "Job");
            assert.equal(jobs.length, 1, `the ${RECIPE} plan has one training Job`);
            return jobs[0]!;
        };
        const jobPods = async (name: string): Promise<any[]> =>
            JSON.parse(await node.kubectlOk(["-n", trainingNs, "get", "pods", "-l", `batch.kubernetes.io/job-name=${name}`, "-o", "json"])).items;
        const jobCondition = async (name: string, types: readonly string[], boundMs: number): Promise<any> => {
            const t0 = Date.now();
            const bound = scaled(boundMs);
            do {
                const j = JSON.parse(await node.kubectlOk(["-n", trainingNs, "get", "job", name, "-o", "json"]));
                const c = (j.status?.conditions ?? []).find((x: any) => types.includes(x.type) && x.status === "True");
                if (c !== undefined) return c;
                if (Date.now() - t0 < bound) await sleep(1000);
            } while (Date.now() - t0 < bound);
            return undefined;
        };
        const jobLogs = async (name: string) => (await node.kubectl(["-n", trainingNs, "logs", `job/${name}`, "--tail=-1"])).stdout;
        const jobState = async (name: string) => {
            const r = await node.kubectl(["-n", trainingNs, "get", "job,pods,pvc,events", "-o", "wide"]);
            return `${r.stdout}${r.stderr}\nlogs:\n${(await jobLogs(name)).split("\n").slice(-40).join("\n")}\ncontroller:\n${controllerTail()}`;
        };
        /** The trainer's --output-dir as a directory of its PersistentVolume stand-in (the claim mounted above it). */
        const outputDirOnHost = (j: Manifest): string => {
            const c = j.spec.template.spec.containers[0];
            const outputDir = /--output-dir\s+(\S+)/.exec(c.command.join(" "))?.[1];
            assert.ok(outputDir !== undefined, "the trainer's command line names --output-dir");
            const mount = c.volumeMounts.find((v: any) => outputDir.startsWith(`${v.mountPath}/`));
            assert.ok(mount !== undefined, `--output-dir ${outputDir} is on a mounted volume`);
            const volume = j.spec.template.spec.volumes.find((v: any) => v.name === mount.name);
            assert.ok(volume?.persistentVolumeClaim, `--output-dir ${outputDir} is on a claim (volume ${mount.name})`);
            return path.join(pvRoot, volume.persistentVolumeClaim.claimName, path.relative(mount.mountPath, outputDir));
        };

        it("the training Job as rendered: vLLM (stand-in) healthy, the args check passes, the trainer (stand-in) claims a sandbox from its pod, and the sandbox's agent reaches this pod's vLLM through its forwarder and the ingress; Ready behind its probes, then Complete", async () => {
            const j = job();
            const name = j.metadata.name;
            const hostOut = outputDirOnHost(j);
            const t0 = Date.now();
            await node.kubectlOk(["apply", "--server-side", "-f", "-"], JSON.stringify(j));
            let ready: any;
            while (Date.now() - t0 < scaled(180_000) && ready === undefined) {
                ready = (await jobPods(name)).find((p) => p.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True"));
                if (ready === undefined) await sleep(1000);
            }
            if (ready === undefined) assert.fail(`the training pod was not Ready within ${scaled(180_000) / 1000} s:\n${await jobState(name)}`);
            process.stderr.write(`# training pod ${ready.metadata.name} Ready ${((Date.now() - t0) / 1000).toFixed(1)} s after the Job was applied\n`);
            assert.equal(ready.spec.nodeName, node.names.nodeName);
            assert.deepEqual(
                ready.spec.containers.map((c: any) => c.image),
                j.spec.template.spec.containers.map((c: any) => c.image),
                "the Job's image (by digest)",
            );

            // The stand-in writes its results, then waits for the release; a Job that ends first failed.
            const resultFile = path.join(hostOut, "standin-result.json");
            let ended: any;
            while (Date.now() - t0 < scaled(420_000) && !fs.existsSync(resultFile) && ended === undefined) {
                ended = await jobCondition(name, ["Complete", "Failed"], 0);
                if (ended === undefined) await sleep(1000);
            }
            if (!fs.existsSync(resultFile))
                assert.fail(`no ${resultFile} from the trainer stand-in (${ended ? `Job ${ended.type}: ${ended.reason}` : "420 s"}):\n${await jobState(name)}`);
            const result = JSON.parse(fs.readFileSync(resultFile, "utf8"));
            const model = /vllm\s+serve\s+(\S+)/.exec(j.spec.template.spec.containers[0].command.join(" "))?.[1];
            const detail = `${JSON.stringify(result)}\n${await jobState(name)}`;
            assert.equal(result.vllm, model, `a completion from --vllm-url (the stand-in names the requested model): ${detail}`);
            assert.match(String(result.claim), new RegExp(`^${RUN_ID}-[0-9a-f]{12}$`), `a claim from the pool: ${detail}`);
            assert.equal(result.sandbox_id, "65532", `the sandbox runs as 65532: ${detail}`);
            assert.match(String(result.sandbox_root), /Read-only file system/, `the sandbox's root is read-only: ${detail}`);
            assert.equal(
                result.sandbox_model,
                model,
                `the sandbox's agent side gets a completion from this pod's vLLM through its forwarder and the ingress: ${detail}`,
            );
            assert.equal(result.released, 0, `the claim released: ${detail}`);
            assert.equal(result.ok, true, detail);
            // The forwarder called the ingress with the key the trainer minted for this claim (not the pool's key):
            // the ingress's access log names the rollout of each call that came with a rollout key.
            const nginxLog = (await node.kubectl(["-n", ingressNs, "logs", `deployment/${ingressDeployment().metadata.name}`, "-c", "nginx", "--tail=-1"]))
                .stdout;
            const calls = nginxLog
                .split("\n")
                .filter((l) => l.startsWith("{"))
                .map((l) => JSON.parse(l))
                .filter((e) => e.rollout === result.claim);
            assert.ok(
                calls.some((e) => e.key === "rollout" && e.path === "/v1/chat/completions" && e.status === 200),
                `the ingress logged the sandbox's call with the rollout key of ${result.claim}: ${JSON.stringify(calls)}\n${nginxLog.split("\n").slice(-10).join("\n")}`,
            );
            assert.equal(await liveRolloutKeys(), 0, "the trainer's release revoked the claim's key at the verifier");
            process.stderr.write(
                `# the ingress logged ${calls.length} call(s) with the rollout key of ${result.claim}: ${calls.map((e) => `${e.path} ${e.status}`).join(", ")}\n`,
            );

            fs.writeFileSync(path.join(hostOut, "release"), "");
            const done = await jobCondition(name, ["Complete", "Failed"], 120_000);
            assert.equal(done?.type, "Complete", `the Job completes once the trainer exits 0: ${JSON.stringify(done)}\n${await jobState(name)}`);
            const logs = await jobLogs(name);
            for (const line of [
                "agentrl-supervisor: vLLM is healthy: starting the trainer",
                "accepts the command line",
                "agentrl-supervisor: trainer exited (0): stopping vLLM",
            ])
                assert.ok(logs.includes(line), `the pod's log has "${line}":\n${logs.split("\n").slice(-30).join("\n")}`);
            process.stderr.write(`# training Job ${name} Complete ${((Date.now() - t0) / 1000).toFixed(1)} s after it was applied\n`);
        });

        it("a flag the program does not have (a copy of the Job): the args check refuses it at pod start, before the trainer runs, and the Job fails by its pod failure policy", async () => {
            const j = job();
            const name = `${j.metadata.name.slice(0, 50)}-badflag`;
            const c = j.spec.template.spec.containers[0];
            const program = "/app/opencode_hf_sandbox.py";
            const script: string = c.command[2];
            assert.equal(script.split(program).length, 2, `${program} once in the supervisor's script`);
            const bad = {
                ...j,
                metadata: { ...j.metadata, name },
                spec: {
                    ...j.spec,
                    template: {
                        ...j.spec.template,
                        spec: {
                            ...j.spec.template.spec,
                            containers: [
                                { ...c, command: [c.command[0], c.command[1], script.replace(program, `${program} --no-such-flag`), ...c.command.slice(3)] },
                            ],
                        },
                    },
                },
            };
            const claimsBefore = JSON.parse(await node.kubectlOk(["-n", sandboxNs, "get", "sandboxclaims", "-o", "json"])).items.length;
            await node.kubectlOk(["apply", "--server-side", "-f", "-"], JSON.stringify(bad));
            const failed = await jobCondition(name, ["Complete", "Failed"], 240_000);
            assert.equal(failed?.type, "Failed", `the Job fails: ${JSON.stringify(failed)}\n${await jobState(name)}`);
            assert.equal(failed.reason, "PodFailurePolicy", `by its pod failure policy (the trainer's nonzero exit): ${JSON.stringify(failed)}`);
            const logs = await jobLogs(name);
            assert.match(logs, /unrecognized arguments: --no-such-flag/, `the program's own parser refuses it:\n${logs.split("\n").slice(-30).join("\n")}`);
            assert.ok(logs.includes("agentrl-supervisor: trainer exited (2): stopping vLLM"), `argparse's exit status 2 reaches the supervisor:\n${logs}`);
            assert.ok(!logs.includes("arguments accepted"), "the trainer never ran past its parse");
            const claimsAfter = JSON.parse(await node.kubectlOk(["-n", sandboxNs, "get", "sandboxclaims", "-o", "json"])).items.length;
            assert.equal(claimsAfter, claimsBefore, "no sandbox claimed");
        });
    });
}
