/**
 * Observability on a real dockerd (issue #28 point 3, Docker): the containers the program sends with
 * observability on (recorded under the mocks) are created on a dockerd the test starts
 * (test/helpers/dockerd.ts: its own network namespace, stand-in images, no registry), the way the
 * provider creates them, with the ports the program publishes:
 * - vLLM's metrics sidecar runs in vLLM's network namespace (network_mode container:<id>) and reaches
 *   vLLM on loopback; the port vLLM's container publishes, 127.0.0.1:19400, answers from the host
 *   (a host-network container: the daemon's namespace) with what the sidecar relays;
 * - it is published on the host's loopback only: the daemon's bridge address does not answer it, and
 *   dockerd stores exactly the one binding (never 8000);
 * - dockerd refuses a port binding on a container that joins another's network namespace, which is why
 *   the main container publishes its sidecars' ports.
 * The stand-ins (one static binary, test/dockerd/standin) play vLLM (`serve`) and the sidecar (`proxy`
 * to vLLM on loopback), named as such. Skipped, with the reason, only when dockerd cannot start and CI is not set.
 * Run: node --import tsx --test test/observability/docker-observability.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";
import { planToDir, type PlanResult } from "../../scripts/lib/plan";
import { createContainer, DockerdSession, startContainer, STANDIN_IMAGE, type Dockerd } from "../helpers/dockerd";
import { ofType, type RecordedResource } from "../helpers/mock";
import { TEST_MTAIL_IMAGE } from "../helpers/observability";
import { scaledCount } from "../helpers/waits";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-docker-obs-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

function byName(rs: readonly RecordedResource[], suffix: string): RecordedResource {
    const found = rs.filter((r) => r.name.endsWith(suffix));
    assert.equal(found.length, 1, `one resource named *${suffix}, got ${found.map((r) => r.name).join(", ")}`);
    return found[0]!;
}

/** The provider's port mapping (terraform-provider-docker resource_docker_container_funcs.go: ports -> ExposedPorts, PortBindings). */
function withPorts(body: Record<string, unknown>, ports: ReadonlyArray<{ internal: number; external: number; ip: string; protocol: string }> | undefined) {
    if (ports === undefined || ports.length === 0) return body;
    const key = (p: { internal: number; protocol: string }) => `${p.internal}/${p.protocol}`;
    return {
        ...body,
        ExposedPorts: Object.fromEntries(ports.map((p) => [key(p), {}])),
        HostConfig: {
            ...(body.HostConfig as Record<string, unknown>),
            PortBindings: Object.fromEntries(ports.map((p) => [key(p), [{ HostIp: p.ip, HostPort: String(p.external) }]])),
        },
    };
}

describe("observability on a real dockerd: a sidecar in the main container's namespace, on the host's loopback", () => {
    const session = new DockerdSession();
    let d: Dockerd | undefined;
    let p: PlanResult;
    const ids = session.ids;
    const need = (t: TestContext) => session.need(t);
    /** A stand-in in the daemon's own network namespace (the host's, as a Prometheus on the host sees it). */
    const fromHost = async (url: string): Promise<{ status: number; out: string }> => {
        const name = `host-get-${ids.size}-${Math.random().toString(36).slice(2, 8)}`;
        const id = await createContainer(d!, name, { Image: STANDIN_IMAGE, Cmd: ["get", url, "2000"], HostConfig: { NetworkMode: "host" } });
        const refused = await startContainer(d!, id);
        if (refused) throw new Error(`start ${name}: ${refused}`);
        const waited = await d!.api("POST", `/containers/${id}/wait`);
        const logs = d!.docker(["logs", id], { allowFail: true, timeoutMs: 20_000 });
        return { status: waited.body.StatusCode, out: (logs.stdout + logs.stderr).trim() };
    };

    /** A recorded container, its ports published as the provider would. */
    const create = (r: RecordedResource, args: readonly string[], role: string) => session.create(r, args, role, (b, inputs) => withPorts(b, inputs.ports));

    before(async () => {
        d = await session.start({ fakeNvidiaHook: true });
        if (!d) return;
        d.importStandin();
        // vLLM as a container of its own: a white box in the server layout (Docker runs no black box: it is refused there).
        p = await planToDir(
            { recipe: "mbpp-whitebox", target: "docker" },
            {
                outDir: path.join(tmp, "plan"),
                platformOverride: {
                    training: { layout: "whitebox-server", gpusOnNode: 2 },
                    observability: { enabled: true },
                    images: { mtail: TEST_MTAIL_IMAGE },
                },
            },
        );
        for (const n of ofType(p.resources, "docker:index/network:Network")) {
            const r = await d.api("POST", "/networks/create", {
                Name: n.inputs.name,
                Driver: n.inputs.driver ?? "bridge",
                Internal: n.inputs.internal ?? false,
            });
            assert.equal(r.status, 201, JSON.stringify(r.body));
        }
        // Stand-ins: vLLM answers on :8000; its metrics sidecar (nginx in the stack) forwards to it on loopback.
        await create(byName(p.resources, "-training-vllm"), ["serve", ":8000"], "vllm-standin");
        await create(byName(p.resources, "-training-vllm-metrics"), ["proxy", ":9400", "127.0.0.1:8000"], "vllm-metrics-standin");
    });
    after(async () => {
        await d?.stop();
    });

    test("the published 127.0.0.1:19400 answers from the host, through the sidecar, from vLLM's loopback", async (t) => {
        if (!need(t)) return;
        const vllm = byName(p.resources, "-training-vllm");
        const sidecar = byName(p.resources, "-training-vllm-metrics");
        assert.equal((await d!.api("GET", `/containers/${ids.get(sidecar.name)}/json`)).body.HostConfig.NetworkMode, `container:${ids.get(vllm.name)}`);
        // Bounded: the stand-ins start in well under a second; a few tries cover a slow start.
        let got = { status: -1, out: "" };
        for (let i = 0; i < scaledCount(10) && got.status !== 0; i++) {
            got = await fromHost("http://127.0.0.1:19400/metrics");
            if (got.status !== 0) await new Promise((r) => setTimeout(r, 300));
        }
        assert.equal(got.status, 0, got.out);
        // The stand-in names its host: vLLM's container (its hostname is the id's first 12 characters).
        assert.equal(got.out, `vllm-standin ${ids.get(vllm.name)!.slice(0, 12)}`);
    });

    test("only on the loopback: the daemon's bridge address does not answer it, and the one binding is stored (never 8000)", async (t) => {
        if (!need(t)) return;
        const vllm = byName(p.resources, "-training-vllm");
        const hc = (await d!.api("GET", `/containers/${ids.get(vllm.name)}/json`)).body.HostConfig;
        assert.deepEqual(hc.PortBindings, { "9400/tcp": [{ HostIp: "127.0.0.1", HostPort: "19400" }] });
        const net = (await d!.api("GET", `/networks/${encodeURIComponent(p.plan.names.networks.training)}`)).body;
        const gateway: string = net.IPAM.Config[0].Gateway;
        assert.match(gateway, /^\d+\.\d+\.\d+\.\d+$/);
        const refused = await fromHost(`http://${gateway}:19400/metrics`);
        assert.notEqual(refused.status, 0, `the bridge address answered: ${refused.out}`);
    });

    test("dockerd refuses a port binding on a container that joins another's network namespace (so the main container publishes)", async (t) => {
        if (!need(t)) return;
        const vllmId = ids.get(byName(p.resources, "-training-vllm").name)!;
        const r = await d!.api(
            "POST",
            "/containers/create?name=publishing-sidecar",
            withPorts({ Image: STANDIN_IMAGE, Cmd: ["serve", ":9500"], HostConfig: { NetworkMode: `container:${vllmId}` } }, [
                { internal: 9500, external: 19500, ip: "127.0.0.1", protocol: "tcp" },
            ]),
        );
        assert.equal(r.status, 400, JSON.stringify(r.body));
        assert.match(String(r.body.message), /conflicting options: port publishing and the container type network mode/i);
    });
});
