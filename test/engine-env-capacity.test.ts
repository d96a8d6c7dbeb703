// An env capacity change mid-run through the real Pulumi engine on the simulated cluster (issue 26
// point 7), as a user makes it: mbpp-whitebox-64 up, then `envs.coding.headroomReplicas` 1 -> 3 and
// one more `up`, then a replica change. The router config lists the replicas, so each change rolls
// the router Deployment (Recreate: both routers go, every live session through them with it); what
// is checked is that `up` returns only once the routers serve again: at the moment it returns, both
// router pods are Ready, of the new template (its config checksum), and no old one is left.
// Skipped only when the engine fixtures are not built and CI is not set.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ROUTER_CHECKSUM_ANNOTATION } from "../components/env/describe";
import type { Cluster } from "./helpers/cluster";
import { merge, recipePlatform, steps, type Engine, type EngineStack } from "./helpers/engine";
import { engineSkipReason } from "./helpers/engine-fixtures";
import { assertOk, namesFor, secs, startEngineHarness, teardown } from "./helpers/engine-checks";

const skip = engineSkipReason();
const STACK = "capacity";

describe("engine: an env capacity change returns only when the routers serve again", { skip, timeout: 30 * 60_000 }, () => {
    let cluster: Cluster;
    let engine: Engine;
    let release: (() => void) | undefined;
    let stack: EngineStack;
    const log = (line: string) => process.stderr.write(`# ${line}\n`);

    before(async () => {
        ({ cluster, engine, release } = await startEngineHarness({ volumes: 4 }));
        stack = await engine.stack(STACK, recipePlatform("mbpp-whitebox-64", cluster));
        const first = await stack.up("first up", { timeoutMs: 300_000 });
        assertOk(first, "first up");
        log(`mbpp-whitebox-64 first up ${secs(first.ms)}`);
    });

    after(async () => {
        await teardown(engine, cluster, release);
    });

    /** The router pods as they are the moment `up` returned, and the checksum the Deployment now asks for. */
    async function routersNow(): Promise<{ pods: any[]; checksum: string }> {
        const n = namesFor(STACK, stack.platform());
        const env = n.envs.coding!;
        const dep = await cluster.getJson(["deployment", env.router, "-n", n.namespaces.envs]);
        const pods = await cluster.pods(n.namespaces.envs, `app.kubernetes.io/name=env-router,app.kubernetes.io/instance=${env.router}`);
        return { pods, checksum: dep.spec.template.metadata.annotations[ROUTER_CHECKSUM_ANNOTATION] };
    }

    function assertServing(what: string, r: { pods: any[]; checksum: string }, before: string): void {
        const state = r.pods.map(
            (p) =>
                `${p.metadata.name} ${p.metadata.deletionTimestamp ? "terminating" : (p.status?.phase ?? "?")} ready=${(p.status?.conditions ?? []).find((c: any) => c.type === "Ready")?.status} checksum=${p.metadata.annotations?.[ROUTER_CHECKSUM_ANNOTATION]?.slice(0, 8)}`,
        );
        assert.notEqual(r.checksum, before, `${what}: the change rolls the routers (their config lists the replicas)`);
        assert.equal(r.pods.length, 2, `${what}: exactly two router pods when up returned: ${state.join("; ")}`);
        for (const p of r.pods) {
            assert.equal(p.metadata.deletionTimestamp, undefined, `${what}: no terminating router: ${state.join("; ")}`);
            assert.equal(p.metadata.annotations?.[ROUTER_CHECKSUM_ANNOTATION], r.checksum, `${what}: every router runs the new config: ${state.join("; ")}`);
            assert.equal(
                (p.status?.conditions ?? []).find((c: any) => c.type === "Ready")?.status,
                "True",
                `${what}: every router Ready when up returned: ${state.join("; ")}`,
            );
        }
    }

    /** The env's StatefulSet's replica count as deployed (demand + headroom). */
    const replicasNow = () => stack.stateResources().find((r: any) => r.type === "kubernetes:apps/v1:StatefulSet").outputs.spec.replicas as number;
    for (const change of [
        { what: "envs.coding.headroomReplicas 1 -> 3", override: () => ({ envs: { coding: { headroomReplicas: 3 } } }) },
        { what: "envs.coding.replicas + 1", override: () => ({ envs: { coding: { replicas: replicasNow() + 1 } } }) },
    ]) {
        it(`${change.what}: when up returns both routers are Ready on the new config`, async () => {
            const before = (await routersNow()).checksum;
            const override = change.override();
            await stack.setPlatform(merge(stack.platform(), override));
            const up = await stack.up(change.what, { timeoutMs: 300_000 });
            const now = await routersNow();
            assertOk(up, change.what);
            log(
                `${change.what}: up ${secs(up.ms)} (${steps(up)
                    .filter((s) => s.op !== "same")
                    .map((s) => `${s.op} ${s.urn.split("::").pop()}`)
                    .join(", ")})`,
            );
            assertServing(change.what, now, before);
        });
    }
});
