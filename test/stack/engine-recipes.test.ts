// Every recipe on Kubernetes through the real Pulumi engine on the simulated GPU cluster: the
// config `npm run plan -- --recipe <name> --target kubernetes` plans, with the test cluster as
// target and the GPU node's placement (what a recipe leaves to the stack). For each: up from
// empty, the Job's pod on the GPU node with its GPUs, workloads Ready, a no-change up,
// destroy. Plus env replicas changed (wordle) and the rollout timeouts of the 65-replica env.
// Skipped only when the fixtures are not built and CI is not set.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { parsePlatformConfig, RECIPE_NAMES } from "../../components/config";
import type { Cluster } from "../helpers/cluster";
import { changeCount, merge, recipePlatform, steps, type Engine, type EngineStack, type OpResult } from "../helpers/engine";
import { engineSkipReason } from "../helpers/engine-fixtures";
import { assertOk, assertTrainingPlaced, assertWorkloadsReady, namesFor, secs, teardown, startEngineHarness } from "../helpers/engine-checks";
import { scaled } from "../helpers/waits";

const skip = engineSkipReason();
const FIRST_UP_MS = 300_000;
const UP_MS = 240_000;
/** The provider's default await for a StatefulSet / Deployment (pulumi-kubernetes await: 10 minutes). */
const PROVIDER_DEFAULT_TIMEOUT_S = 600;

/** A resource's custom timeout in seconds from the checkpoint (numbers are seconds; strings like "20m"). */
function timeoutSeconds(v: unknown): number | undefined {
    if (typeof v === "number") return v;
    if (typeof v !== "string" || !v) return undefined;
    let s = 0;
    for (const [, n, u] of v.matchAll(/(\d+(?:\.\d+)?)(h|m|s)/g)) s += Number(n) * (u === "h" ? 3600 : u === "m" ? 60 : 1);
    return s || undefined;
}

describe("engine: every recipe on Kubernetes", { skip, timeout: scaled(120 * 60_000) }, () => {
    let cluster: Cluster;
    let engine: Engine;
    let release: (() => void) | undefined;
    const log = (line: string) => process.stderr.write(`# ${line}\n`);

    before(async () => {
        ({ cluster, engine, release } = await startEngineHarness({ volumes: 12 }));
    });

    after(async () => {
        const t = engine?.timings.map((x) => `${x.stack} ${x.label} ${secs(x.ms)}${x.ok ? "" : " (failed)"}`).join(", ");
        if (t) log(`recipe timings: ${t}`);
        await teardown(engine, cluster, release);
    });

    for (const recipe of RECIPE_NAMES) {
        describe(recipe, () => {
            const stackName = `${recipe}-k8s`;
            let stack: EngineStack;
            let first: OpResult | undefined;
            const names = () => namesFor(stackName, stack.platform());
            const needUp = () => assert.ok(first?.ok, `needs the first up of ${recipe}, which failed`);

            it("up from empty succeeds within the bound", async () => {
                stack = await engine.stack(stackName, recipePlatform(recipe, cluster));
                first = await stack.up(`first up`, { timeoutMs: FIRST_UP_MS });
                assertOk(first, `${recipe}: first up`);
                log(`${recipe}: first up ${secs(first.ms)} (${JSON.stringify(first.changes)})`);
            });

            it("the Job's pod is on the GPU node with the GPUs the layout gives it; Deployments and StatefulSets Ready", async () => {
                needUp();
                const c = parsePlatformConfig(stack.platform(), stackName);
                const n = names();
                await assertTrainingPlaced(cluster, n.namespaces.training, n.training.job, c.training.vllmGpus + c.training.trainerGpus);
                const ready = await assertWorkloadsReady(cluster, Object.values(n.namespaces));
                for (const env of c.envs.filter((e) => !e.external)) {
                    assert.ok(
                        ready.some((w) => w.startsWith(`StatefulSet/${n.namespaces.envs}/`)),
                        `env ${env.name}'s StatefulSet is Ready: ${ready.join(", ")}`,
                    );
                }
                const o = first!.outputs!;
                for (const [env, v] of Object.entries((o.envs?.value ?? {}) as Record<string, { url: string }>))
                    assert.doesNotThrow(() => new URL(v.url), `env ${env} url`);
                if (o.ingressKeys) assert.equal(o.ingressKeys.secret, true, "ingress keys are a secret output");
            });

            it("a second up reports zero changes", async () => {
                needUp();
                const up = await stack.up("no-change up", { timeoutMs: UP_MS });
                assertOk(up, `${recipe}: second up`);
                assert.equal(
                    changeCount(up.changes),
                    0,
                    `${recipe}: ${JSON.stringify(up.changes)} ${JSON.stringify(steps(up).filter((s) => s.op !== "same"))}`,
                );
                log(`${recipe}: no-change up ${secs(up.ms)}`);
            });

            if (recipe === "wordle-whitebox") {
                it("env replicas changed: up succeeds and the StatefulSet runs the new count", async () => {
                    needUp();
                    const c = parsePlatformConfig(stack.platform(), stackName);
                    const env = c.envs[0];
                    const replicas = (env.replicas ?? 1) + 2;
                    await stack.setPlatform(merge(stack.platform(), { envs: { [env.name]: { replicas } } }));
                    const up = await stack.up("env replicas", { timeoutMs: UP_MS });
                    assertOk(up, "up after changing env replicas");
                    const n = names();
                    const sts = await cluster.getJson<{ items: any[] }>(["statefulsets", "-n", n.namespaces.envs]);
                    assert.equal(sts?.items[0]?.status?.readyReplicas, replicas, `env ${env.name} runs ${replicas} Ready replicas`);
                    log(
                        `${recipe}: env replicas ${env.replicas} -> ${replicas}: ${secs(up.ms)} (${JSON.stringify(up.changes)}: ${steps(up)
                            .filter((x) => x.op !== "same")
                            .map((x) => `${x.op} ${x.urn.split("::").pop()}`)
                            .join(", ")})`,
                    );
                });
            }

            if (recipe === "mbpp-whitebox-64") {
                it("a rollout whose length scales with replicas gets an update timeout to match (issue 13 point 6)", () => {
                    needUp();
                    const sts = (first ? stack.stateResources() : []).filter((r: any) => r.type === "kubernetes:apps/v1:StatefulSet");
                    assert.equal(sts.length, 1);
                    const replicas = sts[0].outputs?.spec?.replicas;
                    const t = sts[0].customTimeouts ?? {};
                    const update = timeoutSeconds(t.update) ?? PROVIDER_DEFAULT_TIMEOUT_S;
                    // Creation starts every replica at once (podManagementPolicy Parallel); an update rolls them one at a time.
                    assert.ok(
                        update > PROVIDER_DEFAULT_TIMEOUT_S,
                        `the ${replicas}-replica StatefulSet's update timeout is ${update}s (customTimeouts ${JSON.stringify(t)}): a one-at-a-time rollout of ${replicas} pods needs more than the provider's ${PROVIDER_DEFAULT_TIMEOUT_S}s`,
                    );
                });
            }

            it("destroy removes what the stack made", async () => {
                needUp();
                const n = names();
                const down = await stack.destroy("destroy", { timeoutMs: UP_MS });
                assertOk(down, `${recipe}: destroy`);
                log(`${recipe}: destroy ${secs(down.ms)}`);
                assert.equal(stack.stateResources().length, 0);
                for (const ns of [n.namespaces.ingress, n.namespaces.envs, n.namespaces.sandboxes]) {
                    await cluster.waitFor(`namespace ${ns} gone`, async () => (await cluster.getJson(["namespace", ns])) === undefined, 120_000);
                }
            });
        });
    }
});
