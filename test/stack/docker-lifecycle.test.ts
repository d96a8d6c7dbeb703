/**
 * Issue 13, the Docker points: what a real Docker host does with the settings the program sends.
 * The program (index.ts) runs under the mocks for a Docker white-box stack with vLLM as a container of its own and an
 * env server (Docker runs no black box: the docker sandbox pool and hosted sandboxes are refused for it); its recorded
 * inputs are then created on a real dockerd started by the
 * test (test/helpers/dockerd.ts: own network namespace, data root, socket; stand-in images), the
 * way the provider would create them, and dockerd's answers are checked:
 * - 8: the trainer joins vLLM's namespaces by container id, which is what dockerd stores (a name
 *   is stored as the id, so the provider would see a change on every `up` and replace the trainer);
 * - 9: GPUs by explicit device ids reach the nvidia hook as NVIDIA_VISIBLE_DEVICES;
 * - 10: vLLM's create budget follows modelLoadSeconds (mocks: the customTimeouts option);
 * - 11: env replicas (model-written code) do not reach vLLM; the trainer reaches the env router at
 *   the URL it is given;
 * - 12: the Docker ingress config looks vLLM up while it runs (real nginx and a stub DNS): no Docker stack renders
 *   an ingress (the black box is refused there), so VllmIngress's own Docker renderer, usable alone, on the docker-pool
 *   config the refusal stops (test/helpers/config parseDockerPoolConfig).
 * The dockerd part is skipped, with the reason, only when dockerd cannot start and CI is not set.
 * Run: node --import tsx --test test/stack/docker-lifecycle.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";
import { deepMerge, platformNames } from "../../components/config";
import { parseDockerPoolConfig } from "../helpers/config";
import { localOverrides, resolveVllmIngress } from "../../components/ingress";
import { startLocalIngress, type LocalIngress } from "../../components/ingress/local";
import { renderNginxConfig, UPSTREAM_RESOLVER_VALID_SECONDS } from "../../components/ingress/nginx";
import { DOCKER_EMBEDDED_DNS } from "../../components/shared/docker";
import { VLLM_CREATE_MARGIN_SECONDS, vllmWaitSeconds } from "../../components/training/docker";
import { planToDir, type PlanResult } from "../../scripts/lib/plan";
import { containerCreateBody, createContainer, DockerdSession, dockerdMissing, startContainer, startDockerd, type Dockerd } from "../helpers/dockerd";
import { unwrapSecrets } from "../helpers/secrets";
import { ofType, type RecordedResource } from "../helpers/mock";
import { skipWithoutNginx } from "../helpers/nginx";
import { startStubDns, type StubDns } from "../helpers/stub-dns";
import { scaled, scaledCount, scaledSeconds } from "../helpers/waits";

const T = { container: "docker:index/container:Container", network: "docker:index/network:Network" } as const;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-docker-lifecycle-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A Docker white box on one host: vLLM as a container of its own (the server layout) + trainer, and one deployed env (the echo server, as the program's one env). */
const STACK = { training: { layout: "whitebox-server", gpusOnNode: 2 }, envs: { coding: { catalog: "echo", replicas: 3 } } };
let planCount = 0;
function plan(override: Record<string, unknown> = {}, preview = false): Promise<PlanResult> {
    const dir = path.join(tmp, String(planCount++));
    return planToDir(
        { recipe: "mbpp-whitebox", target: "docker" },
        { outDir: dir, preview, platformOverride: deepMerge(STACK, override) as Record<string, unknown> },
    );
}

/** The Docker ingress (black box only, refused on Docker): VllmIngress's own config, from the docker-pool config the refusal stops. */
function dockerIngress() {
    const c = parseDockerPoolConfig({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "docker" } }, "test");
    return { ingress: resolveVllmIngress(c, platformNames(c)), names: platformNames(c) };
}

function byName(rs: readonly RecordedResource[], suffix: string): RecordedResource {
    const found = rs.filter((r) => r.name.endsWith(suffix));
    assert.equal(found.length, 1, `one resource named *${suffix}, got ${found.map((r) => r.name).join(", ")}`);
    return found[0]!;
}

/** Mock ids are `<resource name>-id` (scripts/lib/mockrun.ts); the provider's id of a container is dockerd's. */
const mockId = (r: RecordedResource) => `${r.name}-id`;

describe("what the program sends (mocks)", () => {
    let up: PlanResult;
    let preview: PlanResult;
    before(async () => {
        up = await plan();
        preview = await plan({}, true);
    });

    test("8: the trainer joins vLLM's network and IPC namespaces by vLLM's container id, never its name", () => {
        const vllm = byName(up.resources, "-training-vllm");
        const trainer = byName(up.resources, "-training-trainer");
        assert.equal(trainer.inputs.networkMode, `container:${mockId(vllm)}`);
        assert.equal(trainer.inputs.ipcMode, `container:${mockId(vllm)}`);
        // Preview: a vLLM still to be created has no id yet, so the trainer is planned anew with it.
        const pt = byName(preview.resources, "-training-trainer");
        for (const mode of [pt.inputs.networkMode, pt.inputs.ipcMode])
            assert.equal(mode?.__pulumiUnknown, true, `unknown in preview, got ${JSON.stringify(mode)}`);
    });

    test("10: vLLM's create and update budget follows modelLoadSeconds, past the provider's 20-minute default", async () => {
        const minutes = (s: string | undefined) => Number(/^(\d+)m$/.exec(s ?? "")?.[1]);
        for (const modelLoadSeconds of [undefined, 3600]) {
            const p = modelLoadSeconds === undefined ? up : await plan({ training: { modelLoadSeconds } });
            const load = p.plan.config.training.modelLoadSeconds;
            const vllm = byName(p.resources, "-training-vllm");
            assert.equal(vllm.inputs.waitTimeout, vllmWaitSeconds(load));
            const t = vllm.customTimeouts;
            assert.ok(t, "vLLM has customTimeouts");
            assert.equal(t.create, t.update);
            assert.equal(minutes(t.create), Math.ceil((load + 60 + VLLM_CREATE_MARGIN_SECONDS) / 60), `create ${t.create} for modelLoadSeconds ${load}`);
            assert.ok(minutes(t.create) * 60 >= vllm.inputs.waitTimeout + VLLM_CREATE_MARGIN_SECONDS);
        }
        assert.ok(
            minutes(byName(up.resources, "-training-vllm").customTimeouts?.create) > 20,
            "the default 1200 s load plus the wait margin is past 20 minutes",
        );
    });

    test("11: each env has a network of its own; only its router is also on the training network", () => {
        const names = up.plan.names;
        const env = up.plan.envs.find((e) => e.name === "coding")!;
        assert.equal(env.kind, "deployed");
        const envNet = env.kind === "deployed" ? env.replicaNetwork : "";
        // echo runs no model code but needs no data: DNS-only egress, so its network is internal (no route out).
        const nets = ofType(up.resources, T.network).map((r) => [r.inputs.name, r.inputs.internal]);
        assert.deepEqual(
            nets.sort(),
            [
                [envNet, true],
                [names.networks.training, false],
            ].sort(),
        );
        const containers = ofType(up.resources, T.container);
        const on = (c: RecordedResource) => [
            ...(c.inputs.networksAdvanced ?? []).map((n: any) => n.name),
            ...(c.inputs.networkMode ? [c.inputs.networkMode] : []),
        ];
        const members = containers
            .filter((c) => on(c).includes(envNet))
            .map((c) => c.inputs.name)
            .sort();
        assert.deepEqual(members, [...(env.kind === "deployed" ? env.replicas.containerNames : []), names.envs.coding!.routerService].sort());
        for (const r of containers.filter((c) => c.name.includes("-env-coding-replica-")))
            assert.deepEqual(on(r), [envNet], "replicas are on their own network only");
        assert.deepEqual(on(byName(up.resources, "-env-coding-router")), [names.networks.training, envNet]);
        assert.deepEqual(
            on(byName(up.resources, "-training-vllm")),
            [names.networks.training],
            "vLLM (and the trainer in its namespace) never joins an env network",
        );
    });

    test("12: on Docker the ingress looks vLLM's name up while it runs; on Kubernetes it keeps its upstream group", async () => {
        const docker = dockerIngress();
        const dockerConf = docker.ingress.configText;
        assert.match(dockerConf, new RegExp(`resolver ${DOCKER_EMBEDDED_DNS.replace(/\./g, "\\.")} valid=${UPSTREAM_RESOLVER_VALID_SECONDS}s ipv6=off;`));
        assert.match(dockerConf, new RegExp(`set \\$ingress_upstream_host ${docker.names.training.vllmUpstream};`));
        assert.doesNotMatch(dockerConf, /upstream vllm_upstream/, "no group: nginx would resolve its server once, at start");
        assert.ok(dockerConf.split("proxy_pass http://$ingress_upstream_host$ingress_upstream_uri;").length - 1 >= 2);
        // The black-box recipe's own sandboxes and ingress on Kubernetes (agent-sandbox, in-cluster).
        const k8s = await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir: path.join(tmp, "k8s") });
        const k8sConf = k8s.plan.ingress!.configText;
        assert.match(k8sConf, /upstream vllm_upstream \{\n\s+server \S+ max_fails=0;\n\s+# Reuse TCP connections/);
        assert.doesNotMatch(k8sConf, /resolver /);
        assert.equal(k8s.plan.ingress!.settings.upstreamResolver, undefined);
    });
});

/** An HTTP server on one loopback address answering every request with its own label. */
function labelled(host: string, port: number, label: string): Promise<http.Server> {
    const server = http.createServer((req, res) => {
        req.resume();
        req.on("end", () => {
            res.setHeader("content-type", "application/json");
            res.end(JSON.stringify({ id: label, object: "chat.completion", choices: [] }));
        });
    });
    return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => resolve(server));
    });
}

describe("12: real nginx with the Docker ingress config follows vLLM to a new address", {
    skip: skipWithoutNginx,
}, () => {
    const KEY = "docker-lifecycle-test-key-0123456789";
    const HOST = "vllm.agentrl.test";
    let dns: StubDns;
    let servers: http.Server[] = [];
    let ing: LocalIngress | undefined;
    let port = 0;
    const dockerSettings = () => {
        return dockerIngress().ingress.settings;
    };
    const ask = () =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
            const req = http.request(
                `${ing!.url}/v1/chat/completions`,
                { method: "POST", agent: false, headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" } },
                (res) => {
                    const parts: Buffer[] = [];
                    res.on("data", (c: Buffer) => parts.push(c));
                    res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString("utf8") }));
                },
            );
            req.setTimeout(10_000, () => req.destroy(new Error("no answer in 10 s")));
            req.on("error", reject);
            req.end(JSON.stringify({ model: "m", messages: [] }));
        });
    /** Asks until `ok` holds (bounded: the resolver's valid time, the behaviour, plus a margin scaled by the machine's load). */
    async function until(ok: (r: { status: number; body: string }) => boolean): Promise<{ status: number; body: string; tries: number }> {
        let last = { status: 0, body: "" };
        const margin = scaledSeconds(10);
        for (let tries = 1; tries <= (UPSTREAM_RESOLVER_VALID_SECONDS + margin) * 4; tries++) {
            last = await ask();
            if (ok(last)) return { ...last, tries };
            await new Promise((r) => setTimeout(r, 250));
        }
        assert.fail(`still ${last.status} ${last.body} after ${UPSTREAM_RESOLVER_VALID_SECONDS + margin} s`);
    }

    before(async () => {
        dns = await startStubDns();
        // Two "vLLM containers": the same port on two loopback addresses, as a recreated container on a new address.
        const first = await labelled("127.0.0.2", 0, "old-vllm");
        port = (first.address() as { port: number }).port;
        servers = [first, await labelled("127.0.0.3", port, "new-vllm")];
    });
    after(async () => {
        await ing?.stop();
        for (const s of servers) await new Promise((r) => s.close(() => r(undefined)));
        await dns?.stop();
    });

    test("the Docker config without a resolver (the old one) cannot even start before vLLM's name resolves", async () => {
        const { upstreamResolver: _drop, ...rest } = localOverrides(dockerSettings()) as Record<string, unknown>;
        await assert.rejects(
            startLocalIngress({ upstream: `http://${HOST}:${port}`, keys: [{ name: "sandboxes", key: KEY }], settings: rest }),
            /host not found in upstream/,
        );
    });

    test("starts before vLLM exists (502), finds it, and follows it to its new address", async () => {
        ing = await startLocalIngress({
            upstream: `http://${HOST}:${port}`,
            keys: [{ name: "sandboxes", key: KEY }],
            settings: { ...localOverrides(dockerSettings()), upstreamResolver: dns.address },
        });
        // Exactly the deployed Docker config but for paths, listen address, upstream port and the resolver's address.
        const deployed = renderNginxConfig(dockerSettings());
        assert.ok(deployed.includes(`resolver ${DOCKER_EMBEDDED_DNS} `) && ing.configText.includes(`resolver ${dns.address} `));
        const none = await ask();
        assert.equal(none.status, 502, "no vLLM yet: 502, and nginx keeps running");
        assert.match(none.body, /upstream model server unavailable/);
        dns.records.set(HOST, "127.0.0.2");
        assert.match((await until((r) => r.status === 200)).body, /"old-vllm"/);
        // vLLM is recreated: the old container is gone, its name now points at a new address.
        await new Promise((r) => servers[0]!.close(() => r(undefined)));
        servers = servers.slice(1);
        dns.records.set(HOST, "127.0.0.3");
        const moved = await until((r) => r.status === 200 && r.body.includes("new-vllm"));
        assert.ok(moved.tries <= (UPSTREAM_RESOLVER_VALID_SECONDS + 5) * 4, `followed within the resolver's valid time (${moved.tries} tries)`);
        assert.ok(dns.queries.filter((q) => q === HOST).length >= 2, "nginx asked the DNS again");
    });
});

const missing = dockerdMissing();
const dockerdSkip = missing !== undefined && !process.env.CI ? `dockerd cannot start: ${missing}` : false;

describe("a real dockerd with the program's inputs (8, 9, 11)", { skip: dockerdSkip, timeout: scaled(10 * 60_000) }, () => {
    const session = new DockerdSession();
    let d: Dockerd | undefined;
    let p: PlanResult;
    /** Resource name -> dockerd's container id, and the mock ids replaced by them. */
    const ids = session.ids;
    const real = (v: string) => session.real(v);
    const need = (t: TestContext) => session.need(t);
    const inspect = async (id: string) => (await d!.api("GET", `/containers/${id}/json`)).body;
    const exec = (container: string, args: readonly string[]) => d!.docker(["exec", container, "/standin", ...args], { allowFail: true, timeoutMs: 20_000 });

    const create = (r: RecordedResource, args: readonly string[], role: string) => session.create(r, args, role);

    before(async () => {
        d = await session.start({ fakeNvidiaHook: true });
        if (!d) return;
        d.importStandin();
        p = await plan();
        for (const n of ofType(p.resources, T.network)) {
            const r = await d.api("POST", "/networks/create", {
                Name: n.inputs.name,
                Driver: n.inputs.driver ?? "bridge",
                Internal: n.inputs.internal ?? false,
                CheckDuplicate: true,
            });
            assert.equal(r.status, 201, JSON.stringify(r.body));
        }
        const env = p.plan.envs.find((e) => e.name === "coding")!;
        assert.equal(env.kind, "deployed");
        const port = env.kind === "deployed" ? env.replicas.port : 0;
        await create(byName(p.resources, "-training-vllm"), ["serve", ":8000"], "vllm");
        await create(byName(p.resources, "-training-trainer"), ["serve", "127.0.0.1:9999"], "trainer");
        const replicas = ofType(p.resources, T.container).filter((c) => c.name.includes("-env-coding-replica-"));
        for (const [i, r] of replicas.entries()) await create(r, ["serve", `:${port}`], `replica-${i}`);
        const firstReplica = env.kind === "deployed" ? env.replicas.containerNames[0]! : "";
        // The router stand-in forwards to a replica by name (the real one is nginx over the same network).
        await create(byName(p.resources, "-env-coding-router"), ["proxy", `:${port}`, `${firstReplica}:${port}`], "router");
    });
    after(async () => {
        await d?.stop();
    });

    test("8: dockerd stores the trainer's namespace modes exactly as sent (by id); a name is stored as the id", async (t) => {
        if (!need(t)) return;
        const trainer = byName(p.resources, "-training-trainer");
        const vllmId = ids.get(byName(p.resources, "-training-vllm").name)!;
        const hc = (await inspect(ids.get(trainer.name)!)).HostConfig;
        const sent = { NetworkMode: real(trainer.inputs.networkMode), IpcMode: real(trainer.inputs.ipcMode) };
        assert.deepEqual(
            { NetworkMode: hc.NetworkMode, IpcMode: hc.IpcMode },
            sent,
            "what the provider reads back equals what the program sends: no diff on the next up",
        );
        assert.equal(sent.NetworkMode, `container:${vllmId}`);
        // The old form, by name: dockerd stores the id, so the read-back differs from the input on every up.
        const vllmName = byName(p.resources, "-training-vllm").inputs.name;
        const byNameId = await createContainer(d!, "trainer-by-name", {
            Image: "agentrl-standin:test",
            Cmd: ["serve", "127.0.0.1:9998"],
            HostConfig: { NetworkMode: `container:${vllmName}`, IpcMode: `container:${vllmName}` },
        });
        assert.equal(await startContainer(d!, byNameId), undefined);
        const old = (await inspect(byNameId)).HostConfig;
        assert.deepEqual({ NetworkMode: old.NetworkMode, IpcMode: old.IpcMode }, { NetworkMode: `container:${vllmId}`, IpcMode: `container:${vllmId}` });
        assert.notEqual(old.NetworkMode, `container:${vllmName}`);
        await d!.api("DELETE", `/containers/${byNameId}?force=1`);
        // And the trainer really is in vLLM's network namespace: localhost:8000 is vLLM.
        const r = exec(trainer.inputs.name, ["get", "http://127.0.0.1:8000/"]);
        assert.equal(r.status, 0, r.stderr);
        assert.match(r.stdout, /^vllm /);
    });

    test("11: the trainer reaches the env router at its ENV_CODING_URL; replicas do not reach vLLM", async (t) => {
        if (!need(t)) return;
        const trainer = byName(p.resources, "-training-trainer").inputs.name;
        const envUrl = (unwrapSecrets(byName(p.resources, "-training-trainer").inputs.envs) as string[])
            .find((e) => e.startsWith("ENV_CODING_URL="))!
            .slice("ENV_CODING_URL=".length);
        let reached = exec(trainer, ["get", `${envUrl}/`]);
        for (let i = 0; i < scaledCount(20) && reached.status !== 0; i++) {
            await new Promise((r) => setTimeout(r, 250));
            reached = exec(trainer, ["get", `${envUrl}/`]);
        }
        assert.equal(reached.status, 0, `trainer -> ${envUrl}: ${reached.stderr}`);
        assert.match(reached.stdout, /^replica-0 /, "through the router to a replica");

        const training = p.plan.names.networks.training;
        const ipOn = async (resource: string, network: string) =>
            (await inspect(ids.get(byName(p.resources, resource).name)!)).NetworkSettings.Networks[network]?.IPAddress as string;
        const vllmIp = await ipOn("-training-vllm", training);
        assert.ok(vllmIp);
        // Control: vLLM really answers on the training network (the env router, on it too, reaches it by address).
        const router = byName(p.resources, "-env-coding-router").inputs.name;
        const control = exec(router, ["get", `http://${vllmIp}:8000/`]);
        assert.equal(control.status, 0, control.stderr);
        assert.match(control.stdout, /^vllm /);

        const replica = byName(p.resources, "-env-coding-replica-0").inputs.name;
        const refused = [
            ["vLLM by address", `http://${vllmIp}:8000/`],
            ["vLLM by its upstream name", `http://${p.plan.names.training.vllmUpstream}/`],
            ["vLLM by container name", `http://${byName(p.resources, "-training-vllm").inputs.name}:8000/`],
        ];
        for (const [what, url] of refused) {
            const r = exec(replica, ["get", url!, "1500"]);
            assert.notEqual(r.status, 0, `a replica reached ${what} (${url}): ${r.stdout}`);
        }
    });

    test("9: GPUs by explicit ids reach the nvidia hook as NVIDIA_VISIBLE_DEVICES; the old CSV string without quotes is refused", async (t) => {
        if (!need(t)) return;
        const vllm = byName(p.resources, "-training-vllm");
        const stored = (await inspect(ids.get(vllm.name)!)).HostConfig.DeviceRequests;
        assert.deepEqual(stored, [{ Driver: "nvidia", Count: 0, DeviceIDs: ["0", "1"], Capabilities: [["gpu"]], Options: null }]);
        // A one-shot container with the same request prints the environment dockerd hands the nvidia hook.
        const body = containerCreateBody({ deviceRequests: vllm.inputs.deviceRequests }, ["env"]);
        const id = await createContainer(d!, "gpu-env", body);
        assert.equal(await startContainer(d!, id), undefined);
        await d!.api("POST", `/containers/${id}/wait`);
        const env = d!.docker(["logs", id]).stdout;
        assert.match(env, /^NVIDIA_VISIBLE_DEVICES=0,1$/m);
        // The `gpus` string through docker/cli's CSV parser (the provider's): unquoted, "device=0,1" is device 0 and count 1.
        const csv = d!.docker(["create", "--gpus", "device=0,1", "agentrl-standin:test", "env"]).stdout.trim();
        const parsed = (await inspect(csv)).HostConfig.DeviceRequests;
        assert.deepEqual(
            parsed.map((r: any) => [r.Count, r.DeviceIDs]),
            [[1, ["0"]]],
        );
        assert.match((await startContainer(d!, csv)) ?? "", /cannot set both Count and DeviceIDs/);
        const quoted = (await inspect(d!.docker(["create", "--gpus", '"device=0,1"', "agentrl-standin:test", "env"]).stdout.trim())).HostConfig.DeviceRequests;
        t.diagnostic(`docker/cli parses the quoted string '"device=0,1"' as ${JSON.stringify(quoted)} (dockerd ${d!.version})`);
    });

    test("9: on a host without the NVIDIA runtime the same request is refused at start, naming the driver", async (t) => {
        if (!need(t)) return;
        const bare = await startDockerd();
        try {
            bare.importStandin();
            const id = await createContainer(
                bare,
                "gpu",
                containerCreateBody({ deviceRequests: byName(p.resources, "-training-vllm").inputs.deviceRequests }, ["env"]),
            );
            assert.match((await startContainer(bare, id)) ?? "", /could not select device driver "nvidia" with capabilities: \[\[gpu\]\]/);
        } finally {
            await bare.stop();
        }
    });
});
