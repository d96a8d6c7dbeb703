// The authenticated vLLM ingress on the real node (issue #29 point 3): the opencode-blackbox plan
// (`npm run plan -- --recipe opencode-blackbox`) with a named test override (the fixture's nginx and
// sandbox runtime image by digest, sandboxes sized for this 2-CPU node), its Namespaces,
// ServiceAccount, ConfigMaps, Services, NetworkPolicies, PodDisruptionBudget, the ingress Deployment
// and the per-rollout key verifier's Deployment applied as they are. The Secrets the plan redacts get
// test values: the keys file (the ingress's own renderKeysFile over the plan's key names: the
// operators' key alone, as the pool's sandboxes hold no shared key) and ONE admin key in the
// verifier's Secret and the trainer's copy (the Platform gives both one key). Stand-ins, named: nginx is Debian
// forky's 1.30 in place of nginxinc/nginx-unprivileged; vLLM is python/tests/stub_model.py (a
// scripted OpenAI-compatible server, no model) in a pod made from the training Job's pod template
// (its labels, port 8000, its /health startup and readiness probes, its GPU request served by the
// GPU stand-in; the model-cache and checkpoints claims as emptyDirs: no provisioner here), so the
// plan's vLLM Service selects it; the sandbox is the SandboxTemplate's own pod (runtime and key
// forwarder on the sandbox runtime image), not a claim through the agent-sandbox controller.
// Checked on the running pods: the ingress and the verifier Ready behind their probes; a rollout key
// minted at the verifier from the pod with the trainer's labels (its admin key, the Service's name)
// and delivered to the sandbox's forwarder on its key port, as the trainer's backend does; OpenAI's
// own Python client in the sandboxes namespace gets a completion with that key and with the
// operators' key, and AuthenticationError (401) with a wrong one, a forged rk1 key or a revoked one;
// a route vLLM leaves open (/pause) is 404 even with a key; the sandbox's agent side reaches the
// model through its forwarder on loopback with no key of its own (the forwarder adds it), and finds
// the key's value nowhere its uid can read; a pod with the trainer's labels in the training
// namespace is refused by the ingress's NetworkPolicy. Run on test/stack/node.test.ts's node.
import { strict as assert } from "node:assert";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { renderKeysFile } from "../../components/ingress/nginx";
import { VERIFIER_ADMIN_KEY_DIR } from "../../components/ingress/verifier";
import { SANDBOX_FORWARDER_PORT, SANDBOX_KEY_PORT, SANDBOX_TRACE_PORT } from "../../components/sandbox/model";
import { SECRET_ENV } from "../../components/training/model";
import { planToDir } from "../../scripts/lib/plan";
import { secretFileRef, secretRef } from "../helpers/pod-secrets";
import { imageRefByDigest, type Node, type NodeSession, openenvClientPod, podExec } from "../helpers/node";
import { whileNameLookupFails } from "../helpers/name-lookup";
import type { Manifest } from "../helpers/reachability";
import { scaledCount, scaledSeconds } from "../helpers/waits";

const RECIPE = "opencode-blackbox";
/** Kinds applied from the plan as they are (the Secrets get test values; the Job, claims, sandbox CRs and admission policy are left out). */
const APPLIED = new Set(["Namespace", "ServiceAccount", "ConfigMap", "Service", "NetworkPolicy", "PodDisruptionBudget", "Deployment"]);
const VLLM_PORT = 8000;
const STUB_MODEL = path.resolve(__dirname, "..", "..", "python", "tests", "stub_model.py");

/**
 * The named test override: the fixture's nginx and sandbox runtime image by digest (the verifier runs from the pool's
 * sandbox image), a sandbox's requests shrunk to fit the node.
 */
function nodeIngressOverride(node: Node): Record<string, unknown> {
    return {
        images: { nginx: imageRefByDigest(node.names, "nginx") },
        sandboxes: { image: imageRefByDigest(node.names, "sandbox-runtime"), cpu: "250m", memory: "256Mi" },
    };
}

/** A test key in the keys' alphabet (components/config/keys.ts: 16 to 512 of [A-Za-z0-9._~+/=-]). */
const testKey = (name: string) => `node-${name}-${randomBytes(16).toString("hex")}`;

/** OpenAI's client against the ingress: the reply's text, or the error's class and status. */
const OPENAI_PY = `
import json, sys, openai
base, key, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=20)
try:
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Name this."}])
    print(json.dumps({"ok": True, "model": r.model, "content": r.choices[0].message.content}))
except openai.APIStatusError as e:
    print(json.dumps({"ok": False, "error": type(e).__name__, "status": e.status_code}))
`;

/** One request from inside a pod (python3's urllib): the status, or the connection error. */
const REQUEST_PY = `
import json, sys, urllib.request, urllib.error
url, method = sys.argv[1], sys.argv[2]
body = sys.argv[3].encode() if len(sys.argv) > 3 else None
req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
def model(text):
    try:
        return json.loads(text).get("model")
    except ValueError:
        return None
try:
    with urllib.request.urlopen(req, timeout=5) as r:
        text = r.read().decode()
        print(json.dumps({"status": r.status, "model": model(text), "body": text[:300]}))
except urllib.error.HTTPError as e:
    text = e.read().decode()
    print(json.dumps({"status": e.code, "model": model(text), "body": text[:300]}))
except OSError as e:
    print(json.dumps({"error": type(e).__name__ + ": " + str(e)}))
`;

/**
 * The key's value looked for everywhere the caller's uid can read: its env, every /proc/<pid>/environ and cmdline,
 * and every regular file under / (os.walk crosses into every mount: the emptyDirs, /dev/shm, /etc/hosts..., /proc and
 * /sys aside, whose per-process files are read above). The key comes hex-encoded on argv,
 * so the probe's own command line does not hold it. Prints {found, files, unreadable}.
 */
const KEY_SEARCH_PY = `
import json, os, sys
key = bytes.fromhex(sys.argv[1])
found, files, unreadable = [], 0, 0
if any(key in v.encode() for v in os.environ.values()):
    found.append("env")
for pid in os.listdir("/proc"):
    for part in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{part}", "rb") as f:
                if key in f.read():
                    found.append(f"/proc/{pid}/{part}")
        except OSError:
            pass
for root, dirs, names in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys")]
    for name in names:
        path = os.path.join(root, name)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        files += 1
        try:
            with open(path, "rb") as f:
                tail = b""
                while piece := f.read(1 << 20):
                    if key in tail + piece:
                        found.append(path)
                        break
                    tail = piece[-len(key):]
        except OSError:
            unreadable += 1
print(json.dumps({"found": sorted(set(found)), "files": files, "unreadable": unreadable}))
`;

/** GET of the forwarder's trace port (python3's urllib): the status and the first line (the header). */
const TRACE_PY = `
import json, sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=${scaledSeconds(10)}) as r:
        print(json.dumps({"status": r.status, "header": json.loads(r.read().decode().splitlines()[0])}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "body": e.read().decode()[:200]}))
except OSError as e:
    print(json.dumps({"error": type(e).__name__ + ": " + str(e)}))
`;

/**
 * The trainer's side of a rollout key (agent_rl_sandbox/agent_sandbox.py at claim and release), run in the pod with the
 * trainer's labels with the Job's env (the verifier's admin URL by its Service's name, the admin key from its Secret):
 * `mint <rollout> <forwarder key URL>` mints the rollout's key and PUTs it to the sandbox's forwarder once, printing
 * {key, delivered}; `revoke <rollout>` deletes it, printing {revoked}. The key is printed for the test to use as a
 * sandbox would and to search for.
 */
const ROLLOUT_KEY_PY = `
import json, os, sys, urllib.request
admin, admin_key = os.environ["SANDBOX_ROLLOUT_KEYS_URL"], os.environ["SANDBOX_ROLLOUT_ADMIN_KEY"]
op, rollout = sys.argv[1], sys.argv[2]
auth = {"Authorization": "Bearer " + admin_key, "Content-Type": "application/json"}
if op == "mint":
    body = json.dumps({"rollout": rollout, "ttl_seconds": 900}).encode()
    with urllib.request.urlopen(urllib.request.Request(admin + "/rollouts", data=body, method="POST", headers=auth), timeout=10) as r:
        key = json.loads(r.read())["key"]
    put = urllib.request.Request(sys.argv[3], data=key.encode(), method="PUT", headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(put, timeout=10) as r:
        print(json.dumps({"key": key, "delivered": r.status}))
else:
    with urllib.request.urlopen(urllib.request.Request(admin + "/rollouts/" + rollout, method="DELETE", headers=auth), timeout=10) as r:
        print(json.dumps({"revoked": r.status}))
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function ingressSuite(shared: NodeSession): void {
    describe(`node: the ${RECIPE} plan's vLLM ingress on the real node, OpenAI's client with and without its key, a sandbox through its forwarder`, () => {
        let node: Node;
        let manifests: Manifest[] = [];
        let ingressNs = "";
        let trainingNs = "";
        let sandboxNs = "";
        let ingressUrl = "";
        let model = "";
        const operatorsKey = testKey("operators");
        /** The verifier's admin key: one value in its own Secret and in the trainer's copy (the Platform passes one key to both). */
        const rolloutAdminKey = testKey("rollout-admin");
        /** CONTROL for the key search: a value in a test Secret mounted in the leaky pod's agent container. */
        const controlValue = testKey("control");
        /** The rollout key the trainer's pod minted and delivered to the sandbox's forwarder (the second test). */
        let rolloutKey = "";
        const ROLLOUT = "node-ingress-rollout-1";
        let planDir = "";

        const byKind = (kind: string) => manifests.filter((m) => m.kind === kind);
        const isVerifier = (m: Manifest) => String(m.metadata?.name ?? "").endsWith("-rollout-keys");
        const one = (kind: string) => {
            const m = byKind(kind);
            assert.equal(m.length, 1, `the ${RECIPE} plan has one ${kind}`);
            return m[0]!;
        };

        before(async () => {
            node = shared.node;
            planDir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-node-ingress-"));
            const plan = await planToDir({ recipe: RECIPE, target: "kubernetes" }, { outDir: planDir, platformOverride: nodeIngressOverride(node) });
            manifests = plan.manifests;
            const deployment = byKind("Deployment").find((d) => !isVerifier(d))!;
            const verifier = byKind("Deployment").find(isVerifier);
            assert.ok(verifier, `the ${RECIPE} plan has the per-rollout key verifier's Deployment`);
            ingressNs = deployment.metadata.namespace;
            const job = one("Job");
            trainingNs = job.metadata.namespace;
            const template = one("SandboxTemplate");
            sandboxNs = template.metadata.namespace;
            const ingressService = byKind("Service").find((s) => s.metadata.namespace === ingressNs && !isVerifier(s))!;
            ingressUrl = `http://${ingressService.metadata.name}.${ingressNs}.svc.cluster.local:${ingressService.spec.ports[0].port}`;
            // The model vLLM serves (`vllm serve <model>` in the Job's command): the stand-in serves the same id.
            model = /vllm\s+serve\s+(\S+)/.exec(JSON.stringify(job.spec.template.spec.containers[0].command))?.[1] ?? "";
            assert.ok(model !== "", "the Job's command runs `vllm serve <model>`");

            // The Secrets the plan redacts, found by the pods that read them: the verifier's admin key (a Secret volume), the
            // trainer's copy (its secretKeyRef, kept by the vLLM stand-in, which mints as the trainer), the ingress's keys file
            // over the plan's own key names (no shared sandboxes key: the pool's forwarders take rollout keys).
            const keyNames = plan.plan.ingress?.keyNames ?? [];
            assert.deepEqual(keyNames, ["operators"], "the ingress's keys file holds the operators' key alone (the sandboxes get rollout keys)");
            const verifierSecret = secretFileRef(verifier.spec.template.spec, VERIFIER_ADMIN_KEY_DIR);
            const trainerSecret = secretRef(job.spec.template.spec, SECRET_ENV.rolloutAdminKey);
            const is = (m: Manifest, ns: string, ref: { name: string }) => m.metadata.namespace === ns && m.metadata.name === ref.name;
            const secrets = byKind("Secret").map((s) => {
                if (is(s, ingressNs, verifierSecret)) return { ...s, stringData: { [verifierSecret.key]: rolloutAdminKey } };
                if (is(s, trainingNs, trainerSecret)) return { ...s, stringData: { [trainerSecret.key]: rolloutAdminKey } };
                assert.equal(
                    s.metadata.namespace,
                    ingressNs,
                    `Secret ${s.metadata.namespace}/${s.metadata.name}: only the admin keys and the ingress's keys file`,
                );
                return { ...s, stringData: { [Object.keys(s.stringData)[0]!]: renderKeysFile([{ name: "operators", key: operatorsKey }]) } };
            });
            assert.equal(secrets.length, 3, "three Secrets: the verifier's admin key, the trainer's copy, the ingress's keys file");
            const controlSecret = {
                apiVersion: "v1",
                kind: "Secret",
                metadata: { name: "leak-control", namespace: sandboxNs },
                stringData: { value: controlValue },
            };
            const stubConfig = {
                apiVersion: "v1",
                kind: "ConfigMap",
                metadata: { name: "vllm-standin", namespace: trainingNs },
                data: { "stub_model.py": fs.readFileSync(STUB_MODEL, "utf8") },
            };
            await node.apply({
                apiVersion: "v1",
                kind: "List",
                items: [
                    ...manifests.filter((m) => m.kind === "Namespace"),
                    ...manifests.filter((m) => APPLIED.has(m.kind) && m.kind !== "Namespace" && m.kind !== "Deployment"),
                    ...secrets,
                    controlSecret,
                    stubConfig,
                    vllmStandinPod(job),
                    sandboxPod(template),
                    leakySandboxPod(template),
                    clientPod("openai-client", sandboxNs, { app: "openai-client" }),
                ],
            });
            // The Deployments last: the ingress's nginx resolves the vLLM and verifier Services' names when it starts.
            await node.apply(verifier);
            await node.apply(deployment);
        });

        after(async () => {
            if (planDir !== "") fs.rmSync(planDir, { recursive: true, force: true });
            await shared.clearNamespaces();
        });

        /** The training Job's pod as a bare pod: vLLM's stand-in in its container, everything else as rendered. */
        const vllmStandinPod = (job: Manifest) => {
            const t = job.spec.template;
            const [c, ...rest] = t.spec.containers;
            assert.equal(rest.length, 0, "the black-box Job's pod has one container (vLLM and the trainer under one supervisor)");
            return {
                apiVersion: "v1",
                kind: "Pod",
                metadata: { name: "vllm-standin", namespace: trainingNs, labels: t.metadata.labels },
                spec: {
                    ...t.spec,
                    nodeName: node.names.nodeName,
                    restartPolicy: "Always",
                    volumes: [
                        ...t.spec.volumes.map((v: any) =>
                            v.persistentVolumeClaim
                                ? { name: v.name, emptyDir: { sizeLimit: "64Mi" } }
                                : v.emptyDir
                                  ? { name: v.name, emptyDir: { sizeLimit: "64Mi" } }
                                  : v,
                        ),
                        { name: "vllm-standin", configMap: { name: "vllm-standin", defaultMode: 0o444 } },
                    ],
                    containers: [
                        {
                            ...c,
                            image: imageRefByDigest(node.names, "openenv-echo"),
                            imagePullPolicy: "IfNotPresent",
                            command: ["python3", "-I", "/opt/vllm-standin/stub_model.py", "--host", "0.0.0.0", "--port", String(VLLM_PORT), "--model", model],
                            args: [],
                            resources: {
                                requests: { cpu: "100m", memory: "128Mi", [node.names.gpuResource]: c.resources.limits[node.names.gpuResource] },
                                limits: { memory: "256Mi", [node.names.gpuResource]: c.resources.limits[node.names.gpuResource] },
                            },
                            securityContext: { ...c.securityContext, runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, readOnlyRootFilesystem: true },
                            volumeMounts: [...c.volumeMounts, { name: "vllm-standin", mountPath: "/opt/vllm-standin", readOnly: true }],
                        },
                    ],
                },
            };
        };

        /** The SandboxTemplate's pod as the controller would make it, both containers on the fixture's sandbox runtime image. */
        const sandboxPod = (template: Manifest) => {
            const t = template.spec.podTemplate;
            const onNode = (ctr: any) => ({ ...ctr, image: node.names.runtimeImage, imagePullPolicy: "Never" });
            return {
                apiVersion: "v1",
                kind: "Pod",
                metadata: { name: "sandbox-ingress", namespace: sandboxNs, labels: t.metadata.labels },
                spec: {
                    ...t.spec,
                    nodeName: node.names.nodeName,
                    initContainers: t.spec.initContainers.map(onNode),
                    containers: t.spec.containers.map(onNode),
                },
            };
        };

        /**
         * CONTROL for the key search: the same pod with a test Secret (controlValue) mounted as a volume in the agent's
         * container (the mistake issue 42's held-out review found every behavioural test blind to). Not the pool's labels: no
         * policy change.
         */
        const leakySandboxPod = (template: Manifest) => {
            const pod = sandboxPod(template);
            const [c, ...rest] = pod.spec.containers;
            return {
                ...pod,
                metadata: { name: "sandbox-leaky", namespace: sandboxNs, labels: { app: "sandbox-leaky" } },
                spec: {
                    ...pod.spec,
                    containers: [
                        {
                            ...c,
                            // Small: the node has 2 CPUs; the search needs little.
                            resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "100m", memory: "128Mi" } },
                            volumeMounts: [...c.volumeMounts, { name: "leak", mountPath: "/var/run/leak", readOnly: true }],
                        },
                        ...rest,
                    ],
                    volumes: [...pod.spec.volumes, { name: "leak", secret: { secretName: "leak-control" } }],
                },
            };
        };

        const clientPod = (name: string, namespace: string, labels: Record<string, string>) =>
            openenvClientPod(node, name, namespace, labels, node.names.nodeName);
        // Every request here reaches the ingress or the model by a Service name: run again while the pod's name lookup fails.
        const exec = (ns: string, pod: string, container: string, argv: readonly string[], timeoutMs?: number) =>
            whileNameLookupFails(`${ns}/${pod}: ${argv.slice(-3).join(" ")}`, () => podExec(node, ns, pod, container, argv, timeoutMs));
        const lastJson = (s: string) => JSON.parse(s.trim().split("\n").pop() ?? "{}");
        const ingressDeployment = () => byKind("Deployment").find((d) => !isVerifier(d))!;
        /** The trainer's side of a rollout key, run in the vLLM stand-in (the training pod's labels and env). */
        const asTrainer = async (argv: readonly string[]) => {
            const standin = one("Job").spec.template.spec.containers[0].name;
            const r = await exec(trainingNs, "vllm-standin", standin, ["python3", "-I", "-c", ROLLOUT_KEY_PY, ...argv]);
            assert.equal(r.code, 0, r.out);
            return lastJson(r.stdout);
        };
        const openai = async (key: string) => {
            const r = await exec(sandboxNs, "openai-client", "client", ["python3", "-c", OPENAI_PY, ingressUrl, key, model]);
            assert.equal(r.code, 0, r.out);
            return lastJson(r.stdout);
        };

        const waitReady = async (ns: string, what: string, seconds: number) => {
            const r = await node.kubectl(["-n", ns, "wait", "--for=condition=Ready", what, `--timeout=${seconds}s`], undefined, (seconds + 10) * 1000);
            if (r.code !== 0) {
                const pods = await node.kubectl(["-n", ns, "get", "pods", "-o", "wide"]);
                const events = await node.kubectl(["-n", ns, "get", "events", "--sort-by=.lastTimestamp"]);
                assert.fail(`${ns}/${what} not Ready: ${r.stdout}${r.stderr}\n${pods.stdout}\n${events.stdout.split("\n").slice(-25).join("\n")}`);
            }
        };

        it("the ingress Deployment as rendered, the vLLM stand-in and the sandbox come Ready behind their real probes", async () => {
            const t0 = Date.now();
            await waitReady(trainingNs, "pod/vllm-standin", 180);
            await waitReady(sandboxNs, "pod/sandbox-ingress", 180);
            await waitReady(sandboxNs, "pod/sandbox-leaky", 180);
            await waitReady(sandboxNs, "pod/openai-client", 180);
            const rollout = await node.kubectl(
                ["-n", ingressNs, "rollout", "status", "deployment", ingressDeployment().metadata.name, `--timeout=${scaledSeconds(180)}s`],
                undefined,
                190_000,
            );
            if (rollout.code !== 0) {
                const pods = await node.kubectl(["-n", ingressNs, "get", "pods", "-o", "wide"]);
                const logs = await node.kubectl(["-n", ingressNs, "logs", "-l", "app.kubernetes.io/name=vllm-ingress", "--tail=20", "--all-containers"]);
                assert.fail(`the ingress not rolled out: ${rollout.stdout}${rollout.stderr}\n${pods.stdout}\n${logs.stdout}${logs.stderr}`);
            }
            const selector = Object.entries(ingressDeployment().spec.selector.matchLabels as Record<string, string>)
                .map(([k, v]) => `${k}=${v}`)
                .join(",");
            const pods = JSON.parse(await node.kubectlOk(["-n", ingressNs, "get", "pods", "-l", selector, "-o", "json"])).items;
            assert.equal(pods.length, ingressDeployment().spec.replicas, "every replica the Deployment asks for");
            for (const p of pods) {
                const nginx = p.spec.containers.find((c: any) => c.name === "nginx");
                assert.equal(nginx.image, imageRefByDigest(node.names, "nginx"), "the nginx image by digest");
                assert.equal(p.status.containerStatuses.find((c: any) => c.name === "nginx").restartCount, 0, `${p.metadata.name} never restarted`);
            }
            const verifier = byKind("Deployment").find(isVerifier)!;
            const verifierRollout = await node.kubectl(
                ["-n", ingressNs, "rollout", "status", "deployment", verifier.metadata.name, `--timeout=${scaledSeconds(180)}s`],
                undefined,
                190_000,
            );
            assert.equal(verifierRollout.code, 0, `the verifier not rolled out: ${verifierRollout.stdout}${verifierRollout.stderr}`);
            process.stderr.write(
                `# ingress (${pods.length} pods), verifier, vLLM stand-in and sandbox Ready ${((Date.now() - t0) / 1000).toFixed(1)} s after kubectl apply\n`,
            );
        });

        it("the trainer's pod mints a rollout key at the verifier and delivers it to the sandbox's forwarder; OpenAI's client gets a completion through the ingress with it, and with the operators' key", async () => {
            const ip = await node.kubectlOk(["-n", sandboxNs, "get", "pod", "sandbox-ingress", "-o", "jsonpath={.status.podIP}"]);
            const minted = await asTrainer(["mint", ROLLOUT, `http://${ip.trim()}:${SANDBOX_KEY_PORT}/rollout-key`]);
            assert.equal(minted.delivered, 204, `the forwarder took the key: ${JSON.stringify({ ...minted, key: undefined })}`);
            assert.match(minted.key, /^rk1\./, "a rollout key");
            rolloutKey = minted.key;
            for (const key of [rolloutKey, operatorsKey]) {
                const r = await openai(key);
                assert.equal(r.ok, true, JSON.stringify(r));
                assert.equal(r.model, model, "the stand-in's model id, through the ingress");
                assert.ok(typeof r.content === "string" && r.content.length > 0, JSON.stringify(r));
            }
        });

        it("with a wrong key or a forged rollout key OpenAI's client gets AuthenticationError (401); without a key the request is 401 (the client itself refuses to send none); /pause is 404 even with a key", async () => {
            assert.deepEqual(await openai(testKey("wrong")), { ok: false, error: "AuthenticationError", status: 401 }, "a wrong key");
            const forged = `rk1.${randomBytes(32).toString("base64url")}`;
            assert.deepEqual(await openai(forged), { ok: false, error: "AuthenticationError", status: 401 }, "a forged rollout key");
            const body = JSON.stringify({ model, messages: [{ role: "user", content: "Name this." }] });
            const none = await exec(sandboxNs, "openai-client", "client", [
                "python3",
                "-I",
                "-c",
                REQUEST_PY,
                `${ingressUrl}/v1/chat/completions`,
                "POST",
                body,
            ]);
            assert.equal(lastJson(none.stdout).status, 401, `no Authorization header: ${none.out}`);
            const pause = await exec(sandboxNs, "openai-client", "client", [
                "python3",
                "-c",
                `import urllib.request, urllib.error\nreq = urllib.request.Request("${ingressUrl}/pause", method="POST", headers={"Authorization": "Bearer ${operatorsKey}"})\ntry:\n    print(urllib.request.urlopen(req, timeout=5).status)\nexcept urllib.error.HTTPError as e:\n    print(e.code)`,
            ]);
            assert.equal(pause.stdout.trim(), "404", pause.out);
        });

        it(`the sandbox's agent side reaches the model through its forwarder on 127.0.0.1:${SANDBOX_FORWARDER_PORT}, holding no key itself`, async () => {
            const env = await exec(sandboxNs, "sandbox-ingress", "sandbox", ["sh", "-c", "env | grep -c OPENCODE_UPSTREAM_API_KEY || true"]);
            assert.equal(env.stdout.trim(), "0", "the agent's container has no key in its environment");
            const body = JSON.stringify({ model, messages: [{ role: "user", content: "Name this." }] });
            const r = await exec(sandboxNs, "sandbox-ingress", "sandbox", [
                "python3",
                "-I",
                "-c",
                REQUEST_PY,
                `http://127.0.0.1:${SANDBOX_FORWARDER_PORT}/v1/chat/completions`,
                "POST",
                body,
            ]);
            const out = lastJson(r.stdout);
            assert.equal(out.status, 200, r.out);
            assert.equal(out.model, model, `the stand-in's reply, through the forwarder and the ingress: ${out.body}`);
        });

        it("the agent's uid finds the rollout key's value nowhere it can read: env, every mounted file, /proc (a pod with a Secret mounted finds its value: the search is not blind)", async () => {
            assert.ok(rolloutKey !== "", "the rollout key minted above");
            const search = async (pod: string, container: string, value: string) => {
                const hex = Buffer.from(value).toString("hex");
                const r = await exec(sandboxNs, pod, container, ["python3", "-I", "-c", KEY_SEARCH_PY, hex], 300_000);
                assert.equal(r.code, 0, r.out);
                return lastJson(r.stdout) as { found: string[]; files: number; unreadable: number };
            };
            const agent = await search("sandbox-ingress", "sandbox", rolloutKey);
            process.stderr.write(
                `# the agent's uid searched ${agent.files} files (${agent.unreadable} unreadable), env and /proc: ${JSON.stringify(agent.found)}\n`,
            );
            assert.ok(agent.files > 1000, `the search walked the container's whole root: ${agent.files} files`);
            assert.deepEqual(agent.found, [], "the key's value, readable by the agent's uid");
            // CONTROL: a Secret mounted in the agent's container is found (the forwarder holds the rollout key in memory
            // alone: it came over its key port, so no file or environ of its own holds it either).
            const leaky = await search("sandbox-leaky", "sandbox", controlValue);
            assert.ok(
                leaky.found.some((p) => p.includes("/leak/")),
                `the Secret mounted in the agent's container: ${JSON.stringify(leaky.found)}`,
            );
        });

        it(`the trainer reads the forwarder's trace on the pod IP's port ${SANDBOX_TRACE_PORT}; the agent's side is refused it`, async () => {
            const ip = await node.kubectl(["-n", sandboxNs, "get", "pod", "sandbox-ingress", "-o", "jsonpath={.status.podIP}"]);
            assert.equal(ip.code, 0, ip.stderr);
            const url = `http://${ip.stdout.trim()}:${SANDBOX_TRACE_PORT}/trace`;
            // The vLLM stand-in carries the training pod's labels in the training namespace: the trainer, as the NetworkPolicy sees it.
            const standin = one("Job").spec.template.spec.containers[0].name;
            const trainer = lastJson((await exec(trainingNs, "vllm-standin", standin, ["python3", "-I", "-c", TRACE_PY, url])).stdout);
            assert.equal(trainer.status, 200, JSON.stringify(trainer));
            assert.ok(
                trainer.header.calls >= 1 && trainer.header.recorded === trainer.header.calls,
                `the call through the forwarder is recorded: ${JSON.stringify(trainer.header)}`,
            );
            for (const u of [url, `http://127.0.0.1:${SANDBOX_TRACE_PORT}/trace`]) {
                const agent = lastJson((await exec(sandboxNs, "sandbox-ingress", "sandbox", ["python3", "-I", "-c", TRACE_PY, u])).stdout);
                assert.equal(agent.status, 403, `${u} from the agent's container: ${JSON.stringify(agent)}`);
            }
            // Another pod of the sandboxes namespace (no trainer labels): the NetworkPolicy drops it.
            const other = lastJson((await exec(sandboxNs, "openai-client", "client", ["python3", "-I", "-c", TRACE_PY, url])).stdout);
            assert.match(other.error ?? JSON.stringify(other), /timed out|refused|TimeoutError/i, JSON.stringify(other));
        });

        it("the trainer's pod revokes the rollout key at the verifier: the ingress answers it 401", async () => {
            assert.ok(rolloutKey !== "", "the rollout key minted above");
            assert.deepEqual(await asTrainer(["revoke", ROLLOUT]), { revoked: 204 });
            assert.deepEqual(await openai(rolloutKey), { ok: false, error: "AuthenticationError", status: 401 }, "the revoked key");
        });

        it("the ingress's NetworkPolicy: a pod with the trainer's labels in the training namespace is refused (its own egress policy would let it out)", async () => {
            // The stand-in carries the Job pod's labels: its own egress policy lets it reach the ingress's port, the ingress's policy does not admit it.
            let refused = { error: "" } as { error?: string; status?: number };
            for (let i = 0; i < scaledCount(10); i++) {
                const r = await exec(trainingNs, "vllm-standin", "trainer", ["python3", "-I", "-c", REQUEST_PY, `${ingressUrl}/v1/models`, "GET"]);
                refused = lastJson(r.stdout);
                if (refused.error !== undefined) break;
                await sleep(1000);
            }
            assert.match(
                refused.error ?? JSON.stringify(refused),
                /timed out|Connection refused|TimeoutError/i,
                `from the training namespace: ${JSON.stringify(refused)}`,
            );
            // A name that failed to resolve is not a refusal.
            assert.doesNotMatch(refused.error ?? "", /Name or service not known|name resolution|Temporary failure/i, JSON.stringify(refused));
            process.stderr.write(`# from the training namespace to the ingress: ${refused.error}\n`);
            // The client in the sandboxes namespace, without a key: the ingress answers it (401), so the refusal above is the policy's.
            const r = await exec(sandboxNs, "openai-client", "client", ["python3", "-I", "-c", REQUEST_PY, `${ingressUrl}/v1/models`, "GET"]);
            assert.equal(lastJson(r.stdout).status, 401, r.out);
        });
    });
}
