// A sandbox claimed through the REAL agent-sandbox v0.5.6 controller on the real node (issue #29
// point 3): the controller (test/sandbox-controller/build.sh) runs in the node's network namespace
// against its API server, with the API server fixture's agent-sandbox CRDs; the opencode-blackbox
// plan's sandbox side is applied as `npm run plan` renders it (Namespaces, the trainer's
// ServiceAccount, the claim admission policy and binding, Role, RoleBinding, ResourceQuota,
// NetworkPolicies, key Secret, SandboxTemplate, SandboxWarmPool) with a named test override
// (NODE_CLAIM_OVERRIDE: the sandbox runtime image by digest, a one-sandbox pool sized for this 2-CPU
// node). The warm pool's pod is made by the controller and scheduled by the node's scheduler. Then
// the project's own backend (python/agent_rl_sandbox, AgentSandboxBackend, from the trainer-side
// venv), authenticated as the trainer's ServiceAccount with the env the plan gives the trainer,
// claims a sandbox and runs commands in it through its runtime, and releases it. Stand-in, named:
// the trainer is this test's process in the node's network namespace (not a pod: the backend runs
// from the node's address, which the pool's policy lets through as node-local traffic, as it does
// the kubelet's probes); the sandbox image is the runtime image (python/Dockerfile's steps without
// the stock opencode image). Run on test/node.test.ts's node.
import { strict as assert } from "node:assert";
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import YAML from "yaml";
import { SANDBOX_KEY_SECRET_KEY } from "../../components/sandbox/describe";
import { planToDir } from "../../scripts/lib/plan";
import { fixtureCacheDir } from "../helpers/apiserver";
import { command, imageRefByDigest, type Node, type NodeSession } from "../helpers/node";
import type { Manifest } from "../helpers/reachability";

const REPO_ROOT = path.resolve(__dirname, "..", "..");
const RECIPE = "opencode-blackbox";
const RUN_ID = "claim";

/** The named test override: the runtime image by digest, one warm sandbox sized for the node. */
function nodeClaimOverride(node: Node): Record<string, unknown> {
    return {
        runId: RUN_ID,
        training: { maxInflight: 1 },
        sandboxes: { image: imageRefByDigest(node.names, "sandbox-runtime"), poolSize: 1, headroom: 0, cpu: "250m", memory: "256Mi", maxLifetimeSeconds: 600 },
    };
}

/** The backend as the trainer uses it: claim, run commands, release; one JSON line. */
const CLAIM_PY = `
import json, time
from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend
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
h.kill()
out["close_failures"] = backend.close()
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
            // Built by npm test's fixtures step (a no-op here then).
            const ctlDir = await buildDir("test/sandbox-controller/build.sh", [], "the agent-sandbox controller");
            venv = await buildDir("python/run-tests.sh", ["--venv-only"], "the trainer-side venv");

            const crdDir = path.join(fixtureCacheDir(), "crds");
            const crds = fs.readdirSync(crdDir).filter((f) => f.startsWith("agent-sandbox-v0.5.6."));
            assert.equal(crds.length, 4, `the API server fixture's agent-sandbox CRDs in ${crdDir}`);
            for (const f of crds) await node.kubectlOk(["apply", "--server-side", "-f", "-"], fs.readFileSync(path.join(crdDir, f), "utf8"));
            await node.kubectlOk(["wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"]);
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
                    "--enable-webhook=false",
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
            const trainingNs = plan.names.namespaces.training;
            const sa = plan.training.serviceAccount;
            trainerEnv = { ...plan.training.trainer.env };
            // The sandbox side, as python/tests/cluster_up.ts applies it (namespaces and policies first).
            const wanted = manifests
                .filter(
                    (m) =>
                        m.kind === "Namespace" ||
                        m.metadata?.namespace === sandboxNs ||
                        m.kind.startsWith("ValidatingAdmissionPolicy") ||
                        (m.kind === "ServiceAccount" && m.metadata?.namespace === trainingNs && m.metadata?.name === sa),
                )
                .map((m) => (m.kind === "Secret" ? { ...m, stringData: { [SANDBOX_KEY_SECRET_KEY]: "node-claim-test-key-0123456789" } } : m));
            const rank = (k: string) => {
                const i = ["Namespace", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"].indexOf(k);
                return i === -1 ? 9 : i;
            };
            for (const m of [...wanted].sort((a, b) => rank(a.kind) - rank(b.kind)))
                await node.kubectlOk(["apply", "--server-side", "-f", "-"], JSON.stringify(m));
            quotaApplied = Date.now();

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
            if (dir !== "") fs.rmSync(dir, { recursive: true, force: true });
            await shared.clearNamespaces();
        });

        /**
         * A cluster has agent-sandbox installed before a run stack comes (the cluster stack, the
         * preflight): its quota controller already counts claims, so the pool's ResourceQuota is
         * counted when it is made. Here the CRDs are minutes old; the quota controller picks a new
         * resource up at its discovery resync, and a quota made before that stays uncounted until its
         * full resync (5 min by default), every claim refused meanwhile (403 "status unknown for
         * quota", measured: still uncounted 174 s after). So: a probe quota counting claims, made anew
         * until the controller counts it.
         */
        const waitForClaimQuotaMonitor = async () => {
            const ns = "claim-quota-probe";
            await node.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
            const key = "count/sandboxclaims.extensions.agents.x-k8s.io";
            const t0 = Date.now();
            for (let i = 0; Date.now() - t0 < 150_000; i++) {
                const name = `probe-${i}`;
                await node.apply({ apiVersion: "v1", kind: "ResourceQuota", metadata: { name, namespace: ns }, spec: { hard: { [key]: "1" } } });
                await sleep(3000);
                const used = JSON.parse(await node.kubectlOk(["-n", ns, "get", "resourcequota", name, "-o", "json"])).status?.used ?? {};
                if (key in used) {
                    process.stderr.write(`# the quota controller counts claims ${((Date.now() - t0) / 1000).toFixed(1)} s after the CRDs were established\n`);
                    await node.kubectl(["delete", "namespace", ns, "--wait=false"]);
                    return;
                }
                await node.kubectl(["-n", ns, "delete", "resourcequota", name, "--wait=false"]);
            }
            assert.fail(`the quota controller did not count ${key} within 150 s of the CRDs`);
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
            while (Date.now() - t0 < 180_000) {
                ready = (await sandboxPods()).filter((p) => p.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True"));
                if (ready.length > 0) break;
                await sleep(1000);
            }
            if (ready.length === 0) {
                const all = await node.kubectl(["-n", sandboxNs, "get", "sandboxwarmpools,sandboxes,pods,events", "-o", "wide"]);
                assert.fail(`no warm sandbox Ready after 180 s:\n${all.stdout}${all.stderr}\ncontroller:\n${controllerTail()}`);
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
            while (Date.now() - quotaApplied < 60_000) {
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

        it("the backend claims it as the trainer, runs commands as uid 65532 on a read-only root with a writable HOME, and its release deletes the claim", async () => {
            const r = await command("ip", ["netns", "exec", node.names.netns, path.join(venv, "bin", "python"), "-B", "-c", CLAIM_PY], {
                timeoutMs: 420_000, // create() waits up to 300 s for the claim, then the commands
                env: {
                    PATH: process.env.PATH ?? "/usr/bin:/bin",
                    HOME: dir,
                    ...trainerEnv,
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
            // The release deleted the claim; the controller then removes its sandbox and pod.
            const claims = JSON.parse(await node.kubectlOk(["-n", sandboxNs, "get", "sandboxclaims", "-o", "json"])).items.map((c: any) => c.metadata.name);
            assert.ok(!claims.includes(out.claim), `claim ${out.claim} deleted: ${claims.join(", ")}`);
        });
    });
}
