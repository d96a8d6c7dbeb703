// Per-rollout keys against a real nginx and the real verifier (python/agent_rl_sandbox/rollout_keys.py), all on
// loopback: nginx listens on 127.0.0.1; a client standing for a sandbox pod sends from an address of its own in
// 127.0.0.0/8 (lo holds the whole block on Linux), as each pod has its own IP in a cluster. vLLM is the stub
// upstream (test/helpers/stub-upstream.ts, a stand-in). Needs nginx (nginx-light) and python3.
import * as crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { platformNames } from "../../components/config";
import { startLocalIngress, type LocalIngress } from "../../components/ingress/local";
import { renderNginxConfig, validateProxySettings } from "../../components/ingress/nginx";
import { ROLLOUT_KEY_PATTERN } from "../../components/ingress/rollout-keys";
import { freePort, request } from "../helpers/http";
import { startProgram, type Started } from "../helpers/processes";
import { skipWithoutNginx } from "../helpers/nginx";
import { parseDockerPoolConfig, parseHostedConfig, parseWithTestImages } from "../helpers/config";
import { startStubUpstream, type StubUpstream } from "../helpers/stub-upstream";
import { pollUntil } from "../helpers/waits";
import { localOverrides, resolveVllmIngress, VllmIngress, type IngressDescription } from "../../components/ingress";
import { VERIFIER_ADMIN_KEY_DIR, VERIFIER_PATH, VERIFIER_STATE_DIR } from "../../components/ingress/verifier";
import * as os from "node:os";
import { runBoth, type RecordedResource } from "../helpers/mock";
import { Platform, resolvePlatform } from "../../components/platform";
import { manifests } from "../helpers/manifests";

const REPO = path.resolve(__dirname, "..", "..");
const VERIFIER = path.join(REPO, "python/agent_rl_sandbox/rollout_keys.py");
const ADMIN_KEY = "admin-key-for-the-test-0123456789";
const OPERATOR_KEY = "operator-key-0123456789abcdef";
const OTHER_OPERATOR_KEY = "other-operator-key-0123456789ab";
const CHAT_BODY = JSON.stringify({ model: "stub-model", messages: [{ role: "user", content: "hi" }] });

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
/** Simulated sandbox pods' source addresses (loopback): one per test, so no test spends another's per-source bucket. */
const [POD_A, POD_NOISY, POD_QUIET, POD_SHORT, POD_DOWN, POD_FLOOD, POD_BESIDE] = [11, 12, 13, 14, 15, 16, 17].map((n) => `127.0.0.${n}`);
const tally = (statuses: readonly number[]) => {
    const t: Record<number, number> = {};
    for (const s of statuses) t[s] = (t[s] ?? 0) + 1;
    return t;
};

/** A running verifier: its admin API (mint, revoke) as the trainer calls it. */
interface Verifier {
    readonly program: Started;
    readonly verifyAddress: string;
    mint(rollout: string, ttlSeconds: number): Promise<string>;
    revoke(rollout: string): Promise<number>;
}

async function startVerifier(): Promise<Verifier> {
    const verifyPort = await freePort();
    const adminPort = await freePort();
    const program = await startProgram(
        "python3",
        ["-I", VERIFIER, "--verify-host", "127.0.0.1", "--verify-port", String(verifyPort), "--admin-port", String(adminPort)],
        // GET /verify without a key answers 401 once it listens.
        { readyUrl: `http://127.0.0.1:${verifyPort}/verify`, readyStatus: 401, env: { ...process.env, AGENT_RL_ROLLOUT_ADMIN_KEY: ADMIN_KEY } },
    );
    const admin = `http://127.0.0.1:${adminPort}`;
    return {
        program,
        verifyAddress: `127.0.0.1:${verifyPort}`,
        async mint(rollout, ttlSeconds) {
            const r = await request(`${admin}/rollouts`, {
                method: "POST",
                headers: bearer(ADMIN_KEY),
                body: JSON.stringify({ rollout, ttl_seconds: ttlSeconds }),
            });
            assert.equal(r.status, 201, r.body);
            const key = (JSON.parse(r.body) as { key: string }).key;
            assert.match(key, new RegExp(`^${ROLLOUT_KEY_PATTERN}$`));
            return key;
        },
        async revoke(rollout) {
            return (await request(`${admin}/rollouts/${rollout}`, { method: "DELETE", headers: bearer(ADMIN_KEY) })).status;
        },
    };
}

describe("per-rollout keys: rendering", () => {
    test("without a verifier the config is the operators'-keys config of before (no auth_request, limit keyed on the key's name)", () => {
        const text = renderNginxConfig({ upstream: "vllm:8000" });
        assert.ok(!text.includes("auth_request"));
        assert.ok(!text.includes("ingress_rollout") && !text.includes("rollout-key") && !text.includes("@ingress_401"));
        assert.ok(text.includes("limit_req_zone $ingress_key_name zone=ingress_per_key"));
    });

    test("with a verifier: auth_request on every authenticated route, the limit keyed per rollout key, the verifier's address validated", () => {
        const text = renderNginxConfig({ upstream: "vllm:8000", rolloutKeyVerifier: "trainer.rl.svc.cluster.local:7200", allowCompletions: true });
        assert.equal(text.match(/auth_request \/_ingress\/rollout-key;/g)?.length, 3, "chat, completions, models");
        assert.ok(text.includes("limit_req_zone $ingress_limit_key zone=ingress_per_key"));
        // Rollout-key-shaped headers are limited per source address too, at the per-key rate and burst.
        const perKey = /limit_req_zone \$ingress_limit_key zone=ingress_per_key:10m (rate=\d+r\/s);/.exec(text)?.[1];
        const perKeyBurst = /limit_req zone=ingress_per_key (burst=\d+) nodelay;/.exec(text)?.[1];
        assert.ok(perKey && perKeyBurst);
        assert.ok(text.includes(`limit_req_zone $ingress_rollout_source zone=ingress_rollout_per_source:10m ${perKey};`));
        assert.equal(text.split(`limit_req zone=ingress_rollout_per_source ${perKeyBurst} nodelay;`).length - 1, 3);
        assert.ok(text.includes("server trainer.rl.svc.cluster.local:7200 max_fails=0;"));
        assert.deepEqual(validateProxySettings({ upstream: "v:1", rolloutKeyVerifier: "http://x:1/verify" }), [
            'rolloutKeyVerifier: "http://x:1/verify" must be "host:port" of the rollout key verifier (e.g. "trainer.rl.svc.cluster.local:7200"), or unset for operators\' keys only',
        ]);
        // Docker: the verifier's name is looked up per request like vLLM's.
        const docker = renderNginxConfig({ upstream: "vllm:8000", upstreamResolver: "127.0.0.11", rolloutKeyVerifier: "trainer:7200" });
        assert.ok(docker.includes("set $ingress_verifier_host trainer:7200;"));
        assert.ok(docker.includes("proxy_pass http://$ingress_verifier_host/verify;"));
    });
});

describe("per-rollout keys: real nginx and verifier on loopback", () => {
    let stub: StubUpstream;
    let verifier: Verifier;
    let ing: LocalIngress;
    /** The access log once it holds `text` (nginx logs a request after answering it). */
    const logWith = (text: string) =>
        pollUntil(
            `the access log holds ${text}`,
            async () => {
                const log = fs.readFileSync(ing.accessLogPath, "utf8");
                return log.includes(text) ? log : undefined;
            },
            { budgetMs: 5000, intervalMs: 50 },
        );
    /** A chat call from `from`: each simulated pod its own source address (the per-source bucket is keyed on it). */
    const chat = (key: string, from = "127.0.0.1") =>
        request(`${ing.url}/v1/chat/completions`, { method: "POST", headers: bearer(key), body: CHAT_BODY, localAddress: from });

    before(async () => {
        stub = await startStubUpstream();
        verifier = await startVerifier();
        ing = await startLocalIngress({
            upstream: stub.url,
            keys: [
                { name: "operator", key: OPERATOR_KEY },
                { name: "other-operator", key: OTHER_OPERATOR_KEY },
            ],
            // A small rate so a bounded loop drives one key past it: 1 r/s, burst 3.
            settings: { rolloutKeyVerifier: verifier.verifyAddress, rateLimitPerSecond: 1, rateLimitBurst: 3 },
        });
    });
    after(async () => {
        await ing?.stop();
        await verifier?.program.stop();
        await stub?.stop();
    });

    test("a rollout's key works while the rollout lives and is refused once it ended (revoked)", async () => {
        const key = await verifier.mint("rollout-a", 600);
        const before = stub.requests.length;
        const ok = await chat(key, POD_A);
        assert.equal(ok.status, 200, ok.body);
        const seen = stub.requests.slice(before);
        assert.equal(seen.length, 1);
        assert.equal(seen[0]!.headers.authorization, undefined, "the key never reaches vLLM");
        assert.equal((await request(`${ing.url}/v1/models`, { headers: bearer(key), localAddress: POD_A })).status, 200);

        assert.equal(await verifier.revoke("rollout-a"), 204);
        const refused = await chat(key, POD_A);
        assert.equal(refused.status, 401, refused.body);
        assert.equal((JSON.parse(refused.body) as { error: { type: string } }).error.type, "authentication_error");
        assert.equal(stub.requests.length, before + 2, "nothing reached vLLM after the revocation");
        // The log names the rollout and never the key (nginx writes the line after the response: polled).
        const log = await logWith('"key":"rollout"');
        assert.ok(log.includes('"rollout":"rollout-a"'));
        assert.ok(!log.includes(key.slice(4)));
    });

    test("one rollout driven past its limit leaves another rollout's normal calls unthrottled (and shows a shared key would not)", async () => {
        const noisy = await verifier.mint("rollout-noisy", 600);
        const quiet = await verifier.mint("rollout-quiet", 600);
        // Bounded: 20 calls at once from the noisy rollout.
        const burst = await Promise.all(Array.from({ length: 20 }, () => chat(noisy, POD_NOISY)));
        const limited = burst.filter((r) => r.status === 429).length;
        assert.ok(limited >= 15, `the noisy rollout is limited: ${burst.map((r) => r.status).join(",")}`);
        // The quiet rollout's normal calls (within its own burst): none is throttled.
        const quietStatuses: number[] = [];
        for (let i = 0; i < 3; i++) quietStatuses.push((await chat(quiet, POD_QUIET)).status);
        assert.deepEqual(quietStatuses, [200, 200, 200]);

        // Control, today's model: two sandboxes sharing one key share its bucket.
        await Promise.all(Array.from({ length: 20 }, () => chat(OTHER_OPERATOR_KEY)));
        assert.equal((await chat(OTHER_OPERATOR_KEY)).status, 429, "a shared key's bucket is spent by whoever spends it");
    });

    test("a rollout key on a non-inference route is refused, by nginx and by the verifier", async () => {
        const key = await verifier.mint("rollout-routes", 600);
        const before = stub.requests.length;
        for (const [method, route] of [
            ["POST", "/pause"],
            ["GET", "/metrics"],
            ["POST", "/update_weights"],
            ["POST", "/v1/tokenize"],
            ["GET", "/rollouts"],
            ["GET", "/_ingress/rollout-key"],
        ] as const) {
            const r = await request(`${ing.url}${route}`, { method, headers: bearer(key), ...(method === "POST" ? { body: "{}" } : {}) });
            assert.equal(r.status, 404, `${method} ${route}: ${r.body}`);
        }
        assert.equal(stub.requests.length, before, "nothing reached vLLM");
        // The verifier's own scope check (if a route were ever added to nginx without it): 403.
        const direct = await request(`http://${verifier.verifyAddress}/verify`, {
            headers: { ...bearer(key), "x-original-uri": "/pause", "x-original-method": "POST" },
        });
        assert.equal(direct.status, 403);
        const allowed = await request(`http://${verifier.verifyAddress}/verify`, {
            headers: { ...bearer(key), "x-original-uri": "/v1/chat/completions", "x-original-method": "POST" },
        });
        assert.equal(allowed.status, 204);
        assert.equal(allowed.headers["x-rollout-id"], "rollout-routes");
    });

    test("an expired key is refused without a revocation", async () => {
        const key = await verifier.mint("rollout-short", 2);
        // The first call may already be past 2 s on a loaded machine: only the refusal after expiry is asserted.
        const statuses = [(await chat(key, POD_SHORT)).status];
        await pollUntil(
            "the expired key is refused",
            async () => {
                const s = (await chat(key, POD_SHORT)).status;
                statuses.push(s);
                return s === 401;
            },
            { budgetMs: 10_000, intervalMs: 1100 },
        );
        assert.ok(
            statuses.every((s) => s === 200 || s === 401),
            statuses.join(","),
        );
    });

    test("a flood of forged rollout keys from one pod is limited before the verifier, and another pod's rollout keeps its calls", async () => {
        const real = await verifier.mint("rollout-beside-a-flood", 600);
        const forgedKey = () => `rk1.${crypto.randomBytes(32).toString("base64url")}`;
        // Bounded: 300 forged keys (each its own per-key bucket), 30 in flight at once, from one pod's address.
        const FLOOD = 300;
        const statuses: number[] = [];
        let sent = 0;
        const started = Date.now();
        const flood = Promise.all(
            Array.from({ length: 30 }, async () => {
                while (sent < FLOOD) {
                    sent++;
                    statuses.push((await chat(forgedKey(), POD_FLOOD)).status);
                }
            }),
        );
        // The other pod's rollout, during the flood: its calls within its own burst all succeed.
        const realStatuses: number[] = [];
        for (let i = 0; i < 3; i++) realStatuses.push((await chat(real, POD_BESIDE)).status);
        await flood;
        const seconds = (Date.now() - started) / 1000;
        assert.deepEqual(realStatuses, [200, 200, 200]);
        // Only the pod's own bucket (burst 3, 1 r/s) of forged keys reached the verifier (401); the rest were refused before it (429).
        const asked = statuses.filter((s) => s === 401).length;
        const bound = 3 + Math.ceil(seconds * 1) + 1;
        assert.equal(statuses.length, FLOOD);
        assert.ok(
            asked <= bound && statuses.every((s) => s === 401 || s === 429),
            `${asked} forged keys reached the verifier in ${seconds.toFixed(1)} s (at most ${bound}): ${JSON.stringify(tally(statuses))}`,
        );
    });

    test("forged and unknown keys are refused; the operators' keys work as before, with or without the verifier", async () => {
        const forged = `rk1.${"A".repeat(43)}`;
        assert.equal((await chat(forged, POD_DOWN)).status, 401);
        assert.equal((await chat("not-a-key-of-anyone-0123456789")).status, 401);
        assert.equal((await chat(OPERATOR_KEY)).status, 200);
        await logWith('"key":"operator"');
        // The verifier gone: rollout keys fail closed (500), the operators' keys never ask it.
        const key = await verifier.mint("rollout-down", 600);
        await verifier.program.stop();
        assert.equal((await chat(key, POD_DOWN)).status, 500);
        assert.equal((await chat(OPERATOR_KEY)).status, 200);
    });
});

/** An opencode-blackbox stack on Kubernetes (agent-sandbox pool) or with another sandbox provider / target. */
function blackbox(over: Record<string, unknown> = {}) {
    return parseWithTestImages({ runId: "r1", target: { kind: "kubernetes", context: "test" }, recipe: "opencode-blackbox", ...over }, "staging");
}

/** The ingress plan (its Kubernetes manifests) of a config, from a mock run of the component. */
async function ingressPlan(d: IngressDescription): Promise<{ objects: Array<Record<string, any>>; resources: readonly RecordedResource[] }> {
    const run = await runBoth(() => {
        new VllmIngress("ing", { description: d });
    });
    return { objects: manifests(run.update.resources), resources: run.update.resources };
}

const byKind = (objects: Array<Record<string, any>>, kind: string, name: string) => {
    const found = objects.filter((o) => o.kind === kind && o.metadata?.name === name);
    assert.equal(found.length, 1, `${kind} ${name}: ${objects.map((o) => `${o.kind}/${o.metadata?.name}`).join(" ")}`);
    return found[0]!;
};

describe("per-rollout keys: rendered on Kubernetes with an agent-sandbox pool", () => {
    test("opencode-blackbox on Kubernetes: one verifier (Deployment, Service, admin Secret, NetworkPolicy) and nginx asks it", async () => {
        const config = blackbox();
        const names = platformNames(config);
        const d = resolveVllmIngress(config, names);
        const v = d.rolloutKeys!;
        assert.ok(v, "rendered by default on agent-sandbox pools");
        assert.equal(v.names.deployment, `${names.ingress.deployment}-rollout-keys`);
        const { objects } = await ingressPlan(d);
        const dep = byKind(objects, "Deployment", v.names.deployment);
        assert.equal(dep.spec.replicas, 1, "one table of live keys: every nginx replica asks the same process");
        assert.equal(dep.spec.strategy.type, "Recreate");
        const c = dep.spec.template.spec.containers[0];
        assert.equal(c.image, config.sandboxes.image);
        assert.equal(c.securityContext.runAsNonRoot, true);
        assert.equal(c.securityContext.readOnlyRootFilesystem, true);
        assert.deepEqual(c.securityContext.capabilities.drop, ["ALL"]);
        assert.ok(c.readinessProbe.tcpSocket && c.livenessProbe.tcpSocket && c.resources.limits.memory);
        assert.ok(!c.command.some((a: string) => a.includes("mock-random")), "the admin key is never a flag");
        // The admin key is a read-only file from the verifier's Secret, never an env var (checkov CKV_K8S_35).
        assert.equal(c.env, undefined);
        assert.deepEqual(c.command.slice(c.command.indexOf("--admin-key-file")), [
            "--admin-key-file",
            `${VERIFIER_ADMIN_KEY_DIR}/admin-key`,
            "--state-file",
            `${VERIFIER_STATE_DIR}/table.json`,
        ]);
        // The table outlives a restart of the container (issue 56): its state file on an emptyDir, writable under a read-only root.
        const state = c.volumeMounts.find((m: { mountPath: string }) => m.mountPath === VERIFIER_STATE_DIR);
        assert.ok(state && !state.readOnly, JSON.stringify(c.volumeMounts));
        assert.deepEqual(
            dep.spec.template.spec.volumes.find((vol: { name: string }) => vol.name === state.name),
            { name: state.name, emptyDir: { sizeLimit: "4Mi" } },
        );
        const mount = c.volumeMounts.find((m: { mountPath: string }) => m.mountPath === VERIFIER_ADMIN_KEY_DIR);
        assert.equal(mount.readOnly, true);
        const volume = dep.spec.template.spec.volumes.find((vol: { name: string }) => vol.name === mount.name);
        assert.deepEqual(volume.secret, { secretName: v.names.secret, items: [{ key: "admin-key", path: "admin-key" }], defaultMode: 0o440 });
        assert.equal(dep.spec.template.spec.securityContext.fsGroup, c.securityContext.runAsGroup ?? dep.spec.template.spec.securityContext.runAsGroup);
        const svc = byKind(objects, "Service", v.names.service);
        assert.deepEqual(
            svc.spec.ports.map((p: { port: number }) => p.port),
            [7200, 7201],
        );
        // nginx's config names that Service, and the ingress's egress reaches its pods on the verify port only.
        const nginxConf = byKind(objects, "ConfigMap", names.ingress.config).data["nginx.conf"] as string;
        assert.ok(nginxConf.includes(`server ${v.names.service}.${names.namespaces.ingress}.svc.cluster.local:7200 max_fails=0;`));
        const ingressEgress = byKind(objects, "NetworkPolicy", d.names.networkPolicy).spec.egress as Array<Record<string, any>>;
        assert.ok(ingressEgress.some((r) => r.ports?.[0]?.port === 7200 && r.to[0].podSelector.matchLabels["app.kubernetes.io/name"] === "rollout-keys"));
        const vp = byKind(objects, "NetworkPolicy", v.names.networkPolicy).spec;
        assert.deepEqual(vp.egress, [], "the verifier sends nothing");
        assert.deepEqual(
            vp.ingress.map((r: any) => [r.from[0].podSelector.matchLabels["app.kubernetes.io/name"], r.ports[0].port]),
            [
                ["vllm-ingress", 7200],
                ["trainer", 7201],
            ],
        );
    });

    test("the trainer mints: its admin key from a Secret of its namespace holding the verifier's key, its URL, its egress, the forwarders' key port", async () => {
        const config = blackbox();
        const names = platformNames(config);
        const plan = resolvePlatform(config);
        const v = plan.ingress!.rolloutKeys!;
        const run = await runBoth(() => {
            new Platform("agentrl", { plan, secrets: { ingressKeys: {} } });
        });
        const objects = manifests(run.update.resources);
        const ofKind = (kind: string) => objects.filter((o) => o.kind === kind);
        const job = ofKind("Job")[0]!;
        const trainer = job.spec.template.spec.containers.find((c: any) => c.name === "trainer");
        const env = Object.fromEntries((trainer.env as any[]).map((e) => [e.name, e]));
        // The admin key: a secretKeyRef to the training namespace's own Secret, never a plain value, holding the verifier's key.
        const ref = env.SANDBOX_ROLLOUT_ADMIN_KEY.valueFrom.secretKeyRef;
        assert.equal(env.SANDBOX_ROLLOUT_ADMIN_KEY.value, undefined);
        assert.equal(ref.name, names.training.rolloutAdminKeySecret);
        const trainerSecret = byKind(objects, "Secret", ref.name);
        assert.equal(trainerSecret.metadata.namespace, names.namespaces.training);
        const verifierSecret = byKind(objects, "Secret", v.names.secret);
        assert.equal(trainerSecret.stringData[ref.key], verifierSecret.stringData["admin-key"], "the trainer's copy is the verifier's admin key");
        assert.ok(String(trainerSecret.stringData[ref.key]).length >= 16);
        assert.equal(env.SANDBOX_ROLLOUT_KEYS_URL.value, `http://${v.names.service}.${names.namespaces.ingress}.svc.cluster.local:7201`);
        assert.equal(env.SANDBOX_FORWARDER_KEY_PORT.value, "7102");
        // No other container of the stack reads the admin key.
        const readers = objects.flatMap((o) =>
            [
                ...(o.spec?.template?.spec?.containers ?? []),
                ...(o.spec?.podTemplate?.spec?.containers ?? []),
                ...(o.spec?.podTemplate?.spec?.initContainers ?? []),
            ]
                .filter(
                    (c: any) =>
                        (c.env ?? []).some((e: any) => [ref.name, v.names.secret].includes(e.valueFrom?.secretKeyRef?.name)) ||
                        (c.volumeMounts ?? []).some((m: any) =>
                            [...(o.spec?.template?.spec?.volumes ?? []), ...(o.spec?.podTemplate?.spec?.volumes ?? [])].some(
                                (vol: any) => vol.name === m.name && [ref.name, v.names.secret].includes(vol.secret?.secretName),
                            ),
                        ),
                )
                .map((c: any) => `${o.metadata.name}/${c.name}`),
        );
        assert.deepEqual(readers.sort(), [`${job.metadata.name}/trainer`, `${v.names.deployment}/verifier`].sort());
        // The trainer's egress reaches the verifier on its admin port; the verifier admits the trainer there and only there.
        const trainerEgress = ofKind("NetworkPolicy")
            .filter((p) => p.spec.podSelector.matchLabels?.["app.kubernetes.io/name"] === "trainer")
            .flatMap((p) => p.spec.egress ?? []);
        assert.ok(trainerEgress.some((r: any) => r.ports?.[0]?.port === 7201 && r.to[0].podSelector.matchLabels["app.kubernetes.io/name"] === "rollout-keys"));
        const vp = byKind(objects, "NetworkPolicy", v.names.networkPolicy).spec;
        const admits7201 = vp.ingress.filter((r: any) => r.ports.some((p: any) => p.port === 7201));
        assert.deepEqual(
            admits7201.map((r: any) =>
                r.from.map((f: any) => [f.namespaceSelector.matchLabels["kubernetes.io/metadata.name"], f.podSelector.matchLabels["app.kubernetes.io/name"]]),
            ),
            [[[names.namespaces.training, "trainer"]]],
        );
        // The sandbox template's forwarder takes the key on the pod IP; the sandboxes' policy admits only the trainer to 7102.
        const template = ofKind("SandboxTemplate")[0]!;
        const forwarder = template.spec.podTemplate.spec.initContainers[0];
        assert.deepEqual(forwarder.command.slice(forwarder.command.indexOf("--key-host")), ["--key-host", "0.0.0.0", "--key-port", "7102"]);
        // No shared pool key beside the rollout's: no env in the forwarder, no --key-env (forwarder.py refuses both at once).
        assert.equal(forwarder.env, undefined);
        assert.ok(!forwarder.command.includes("--key-env"));
        const sp = byKind(objects, "NetworkPolicy", plan.sandboxes!.names.networkPolicy).spec;
        const admits7102 = sp.ingress.filter((r: any) => r.ports.some((p: any) => p.port === 7102));
        assert.deepEqual(
            admits7102.map((r: any) =>
                r.from.map((f: any) => [f.namespaceSelector.matchLabels["kubernetes.io/metadata.name"], f.podSelector.matchLabels["app.kubernetes.io/name"]]),
            ),
            [[[names.namespaces.training, "trainer"]]],
        );
    });

    test("the sandbox image the verifier runs from installs rollout_keys.py where the command looks, and runs it at build", () => {
        const dockerfile = fs.readFileSync(path.join(REPO, "python/Dockerfile"), "utf8");
        assert.ok(dockerfile.includes(`install -m 0444 /tmp/rollout_keys.py ${VERIFIER_PATH}`), "python/Dockerfile installs the verifier");
        assert.ok(dockerfile.includes(`python3 -I ${VERIFIER_PATH} --help`), "the build runs it as the pod does (python3 -I, standard library only)");
    });

    test("not rendered on Docker or for hosted sandboxes (no claim backend / no per-claim config there), and the config is unchanged", () => {
        for (const config of [
            parseHostedConfig(
                {
                    runId: "r1",
                    target: { kind: "kubernetes", context: "test" },
                    recipe: "opencode-blackbox",
                    sandboxes: { provider: "hf" },
                    ingress: { exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "vllm-tls", publiclyTrusted: true } },
                },
                "staging",
            ),
            parseDockerPoolConfig({ runId: "r1", target: { kind: "docker" }, recipe: "opencode-blackbox" }, "dev"),
        ]) {
            const d = resolveVllmIngress(config, platformNames(config));
            assert.equal(d.rolloutKeys, undefined, config.sandboxes.provider);
            assert.ok(!d.configText.includes("auth_request"));
        }
    });

    describe("the rendered nginx and verifier, run on loopback: mint, call, revoke, refused", { skip: skipWithoutNginx }, () => {
        let stub: StubUpstream;
        let verifierProgram: Started | undefined;
        let ing: LocalIngress | undefined;
        after(async () => {
            await ing?.stop();
            await verifierProgram?.stop();
            await stub?.stop();
        });

        test("the plan's verifier command, admin Secret (as its mounted file) and nginx settings", async () => {
            const config = blackbox();
            const names = platformNames(config);
            const d = resolveVllmIngress(config, names);
            const v = d.rolloutKeys!;
            const { objects } = await ingressPlan(d);
            // nginx: the ConfigMap is renderNginxConfig of these settings; a local run keeps them all but paths,
            // listen, upstream and the verifier's address (the Service's DNS name, which loopback does not have).
            const conf = byKind(objects, "ConfigMap", names.ingress.config).data["nginx.conf"] as string;
            assert.equal(conf, d.configText);
            const dep = byKind(objects, "Deployment", v.names.deployment);
            const c = dep.spec.template.spec.containers[0];
            const secret = byKind(objects, "Secret", v.names.secret);
            // The admin key as the pod has it: the Secret's item written where its volume is mounted (a temp dir here).
            const volume = dep.spec.template.spec.volumes[0].secret as { secretName: string; items: Array<{ key: string; path: string }> };
            assert.equal(volume.secretName, secret.metadata.name);
            const adminKey = secret.stringData[volume.items[0]!.key] as string;
            assert.ok(adminKey.length >= 16);
            const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), "rollout-admin-"));
            fs.writeFileSync(path.join(keyDir, volume.items[0]!.path), adminKey, { mode: 0o440 });
            // The verifier as rendered; only the listen addresses and the script's path are this machine's.
            const verifyPort = await freePort();
            const adminPort = await freePort();
            const local: Record<string, string> = {
                [VERIFIER_PATH]: VERIFIER,
                [v.adminKeyFile]: path.join(keyDir, path.basename(v.adminKeyFile)),
                [`${VERIFIER_STATE_DIR}/table.json`]: path.join(keyDir, "table.json"),
                "0.0.0.0": "127.0.0.1",
                [String(v.verifyPort)]: String(verifyPort),
                [String(v.adminPort)]: String(adminPort),
            };
            const [bin, ...args] = (c.command as string[]).map((a) => local[a] ?? a);
            verifierProgram = await startProgram(bin!, args, {
                readyUrl: `http://127.0.0.1:${verifyPort}/verify`,
                readyStatus: 401,
                env: { PATH: process.env.PATH },
            });
            stub = await startStubUpstream();
            ing = await startLocalIngress({
                upstream: stub.url,
                keys: [{ name: "operator", key: OPERATOR_KEY }],
                settings: { ...localOverrides(d.settings), rolloutKeyVerifier: `127.0.0.1:${verifyPort}` },
            });
            const admin = `http://127.0.0.1:${adminPort}`;
            const minted = await request(`${admin}/rollouts`, {
                method: "POST",
                headers: bearer(adminKey),
                body: JSON.stringify({ rollout: "r1-claim", ttl_seconds: 600 }),
            });
            assert.equal(minted.status, 201, minted.body);
            const key = (JSON.parse(minted.body) as { key: string }).key;
            const call = () => request(`${ing!.url}/v1/chat/completions`, { method: "POST", headers: bearer(key), body: CHAT_BODY });
            assert.equal((await call()).status, 200);
            assert.equal((await request(`${admin}/rollouts/r1-claim`, { method: "DELETE", headers: bearer(adminKey) })).status, 204);
            assert.equal((await call()).status, 401, "refused once its rollout ended");
            // A wrong admin key mints nothing.
            const wrong = await request(`${admin}/rollouts`, {
                method: "POST",
                headers: bearer(`${adminKey}x`),
                body: JSON.stringify({ rollout: "r2", ttl_seconds: 60 }),
            });
            assert.equal(wrong.status, 401);
        });
    });
});
