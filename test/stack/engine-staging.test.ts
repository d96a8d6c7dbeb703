// The staging stack (stacks/Pulumi.staging.yaml, the opencode black-box run) through the real
// Pulumi engine on the simulated GPU cluster, as a platform engineer runs it: up from empty,
// up again, preview, refresh, the changes a user makes (each followed by one more up), a bad
// config, destroy, and up after destroy. One cluster and one stack for the whole file; the
// tests run in order and each builds on the state the previous one left.
//
// After a failed change the harness repairs the cluster by hand (as a user would: deleting a
// wedged Job) so the next step tests its own change. Skipped only when the fixtures are not
// built and CI is not set.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Cluster } from "../helpers/cluster";
import { changeCount, secretOutputValues, stackPlatform, steps, merge, type Engine, type EngineStack, type OpResult } from "../helpers/engine";
import { engineSkipReason } from "../helpers/engine-fixtures";
import {
    assertNoPlainSecrets,
    assertOk,
    assertTrainingPlaced,
    assertWorkloadsReady,
    jobPods,
    namesFor,
    objectsIn,
    secretData,
    secs,
    teardown,
    startEngineHarness,
} from "../helpers/engine-checks";
import { scaled, scaledSeconds } from "../helpers/waits";

const skip = engineSkipReason();
const STACK = "staging";
/**
 * Bounds per operation. Measured on the 2-core dev box (shared with other jobs): first up
 * 13-16 s, a change's up 2-6 s, destroy 8-13 s; the bounds leave room for a busy CI machine
 * running another test file beside this one.
 */
const FIRST_UP_MS = 120_000;
const UP_MS = 120_000;
/** A first black-box up may not wait for vLLM to load its model (5-20 min on real GPUs). */
const SLOW_MODEL_UP_MS = 120_000;
const SLOW_PREFIX = "arl-slowload";

const sentinel = (what: string) => `${what}-sentinel-${randomBytes(16).toString("hex")}`;
const OPERATORS_KEY_1 = sentinel("operators1");
const OPERATORS_KEY_2 = sentinel("operators2");
const HF_TOKEN = `hf_${sentinel("token")}`;

/**
 * The state's resources, comparable across checkpoint writes: URN, id, inputs and outputs, with
 * secret values (re-encrypted with a fresh nonce on every write) and timestamps left out.
 */
function stateSummary(stack: EngineStack): string[] {
    const norm = (v: unknown): unknown => {
        if (Array.isArray(v)) return v.map(norm);
        if (v && typeof v === "object") {
            const o = v as Record<string, unknown>;
            if ("4dabf18193072939515e22adb298388d" in o) return "[secret]";
            return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, norm(x)]));
        }
        return v;
    };
    return stack.stateResources().map((r: any) => JSON.stringify(norm({ urn: r.urn, id: r.id, inputs: r.inputs, outputs: r.outputs })));
}

describe("engine: the staging stack on a simulated GPU cluster", { skip, timeout: scaled(90 * 60_000) }, () => {
    let cluster: Cluster;
    let engine: Engine;
    let release: (() => void) | undefined;
    let stack: EngineStack;
    let firstUp: OpResult | undefined;
    /** Every secret value the stack has held, for the final state scan. */
    const secrets: Record<string, string> = { "ingressKey-operators (first)": OPERATORS_KEY_1 };
    const log = (line: string) => process.stderr.write(`# ${line}\n`);

    const platform = () => stack.platform();
    const names = () => namesFor(STACK, platform());
    const needFirstUp = () => assert.ok(firstUp?.ok, "needs the first up (see 'up from empty'), which failed");

    /** After a product failure, what a user does: delete the run's Job by hand and run up again. */
    const repairWedgedJob = async (why: string): Promise<void> => {
        const n = names();
        await cluster.kubectl([
            "delete",
            "job",
            n.training.job,
            "-n",
            n.namespaces.training,
            "--cascade=foreground",
            "--wait=true",
            `--timeout=${scaledSeconds(60)}s`,
        ]);
        const r = await stack.up(`repair after ${why}`, { timeoutMs: UP_MS });
        log(`repair after ${why}: up ${r.ok ? "succeeded" : `failed: ${r.error?.split("\n").slice(0, 3).join(" ")}`}`);
    };

    before(async () => {
        ({ cluster, engine, release } = await startEngineHarness({ volumes: 16, slowNamespaces: [`${SLOW_PREFIX}-training`] }));
        stack = await engine.stack(STACK, stackPlatform(STACK, cluster), { secrets: { "ingressKey-operators": OPERATORS_KEY_1 } });
    });

    after(async () => {
        const t = engine?.timings.map((x) => `${x.label} ${secs(x.ms)}${x.ok ? "" : " (failed)"}`).join(", ");
        if (t) log(`staging timings: ${t}`);
        await teardown(engine, cluster, release);
    });

    it("up from empty succeeds with the provider's awaits on, within the bound", async () => {
        firstUp = await stack.up("first up", { timeoutMs: FIRST_UP_MS });
        assertOk(firstUp, "first up");
        log(`staging first up: ${secs(firstUp.ms)} (${JSON.stringify(firstUp.changes)})`);
        assert.ok((firstUp.changes.create ?? 0) > 20, `the first up creates the stack's resources: ${JSON.stringify(firstUp.changes)}`);
    });

    it("places the Job's pod on the GPU node with the GPUs it asks for; Deployments and StatefulSets are Ready", async () => {
        needFirstUp();
        const n = names();
        const pod = await assertTrainingPlaced(cluster, n.namespaces.training, n.training.job, 2);
        assert.equal(pod.spec.nodeSelector?.["nvidia.com/gpu.present"], "true");
        const ready = await assertWorkloadsReady(cluster, Object.values(n.namespaces));
        assert.ok(
            ready.some((w) => w.startsWith("Deployment/") && w.includes("vllm-ingress")),
            `the ingress proxy is among the Ready workloads: ${ready.join(", ")}`,
        );
        // The warm pool is a SandboxWarmPool for the agent-sandbox controller, which is not run here.
        const pool = await cluster.getJson<{ items: any[] }>(["sandboxwarmpools.extensions.agents.x-k8s.io", "-n", n.namespaces.sandboxes]);
        assert.equal(pool?.items.length, 1);
    });

    it("stack outputs hold the URLs, and the ingress keys as secrets", async () => {
        needFirstUp();
        const o = firstUp!.outputs!;
        assert.equal(o.ingressKeys?.secret, true, "ingressKeys is a secret output");
        const keys = o.ingressKeys.value as Record<string, string>;
        assert.equal(keys.operators, OPERATORS_KEY_1, "the supplied operators key is used");
        assert.equal(keys.sandboxes, undefined, "no shared sandboxes key: agent-sandbox pools take per-rollout keys only (docs/design/rollout-keys.md)");
        // The generated secret the state must not hold in plain text: the verifier's admin key, read back from the trainer's Secret.
        const n = names();
        const admin = await cluster.getJson<any>(["secret", n.training.rolloutAdminKeySecret, "-n", n.namespaces.training]);
        const adminKey = Buffer.from(String(admin?.data?.SANDBOX_ROLLOUT_ADMIN_KEY ?? ""), "base64").toString("utf8");
        assert.match(adminKey, /^[A-Za-z0-9]{16,}$/, "the verifier's admin key is generated");
        secrets["rollout admin key (generated)"] = adminKey;
        for (const k of ["sandboxUrl", "vllmInternalUrl"]) {
            assert.ok(o[k], `output ${k}`);
            assert.doesNotThrow(() => new URL(String(o[k].value)), `${k} is a URL: ${o[k].value}`);
        }
        assert.equal(new URL(o.sandboxUrl.value).hostname, `${names().ingress.deployment}.${names().namespaces.ingress}.svc.cluster.local`);
        assert.match(o.trainingJob.value, new RegExp(`^${names().training.job}-[0-9a-f]{8}$`), "the run's name plus a hash of its pod template");
        for (const v of secretOutputValues(o)) assert.ok(!firstUp!.output.includes(v), "no secret value in the CLI's output");
    });

    it("a second up and a preview report zero changes; refresh finds no drift", async () => {
        needFirstUp();
        const up = await stack.up("no-change up", { timeoutMs: UP_MS });
        assertOk(up, "second up");
        assert.equal(
            changeCount(up.changes),
            0,
            `second up changed: ${JSON.stringify(up.changes)} ${JSON.stringify(steps(up).filter((s) => s.op !== "same"))}`,
        );
        const preview = await stack.preview("no-change preview");
        assertOk(preview, "preview");
        assert.equal(changeCount(preview.changes), 0, `preview: ${JSON.stringify(preview.changes)}`);
        const refresh = await stack.refresh("refresh");
        assertOk(refresh, "refresh");
        assert.equal(
            changeCount(refresh.changes),
            0,
            `refresh found drift: ${JSON.stringify(refresh.changes)} ${JSON.stringify(steps(refresh).filter((s) => s.op !== "same" && s.op !== "refresh"))}`,
        );
        const after = await stack.preview("preview after refresh");
        assertOk(after, "preview after refresh");
        assert.equal(changeCount(after.changes), 0, `preview after refresh: ${JSON.stringify(after.changes)}`);
        log(`staging no-change up: ${secs(up.ms)}, preview ${secs(preview.ms)}, refresh ${secs(refresh.ms)}`);
    });

    it("rotating an ingress key rolls the proxy pods and removes the old key from the Secret", async () => {
        needFirstUp();
        const n = names();
        const ns = n.namespaces.ingress;
        const before = (await cluster.pods(ns, "app.kubernetes.io/name=vllm-ingress")).map((p) => p.metadata.name);
        assert.ok(before.length > 0, "proxy pods before the rotation");
        await stack.setSecret("ingressKey-operators", OPERATORS_KEY_2);
        secrets["ingressKey-operators (rotated)"] = OPERATORS_KEY_2;
        const up = await stack.up("rotate ingress key", { timeoutMs: UP_MS });
        assertOk(up, "up after rotating ingressKey-operators");
        const data = Object.values(await secretData(cluster, ns, n.ingress.keysSecret)).join("\n");
        assert.ok(data.includes(OPERATORS_KEY_2), "the new key is in the keys Secret");
        assert.ok(!data.includes(OPERATORS_KEY_1), "the old key is gone from the keys Secret");
        const after = await cluster.waitFor("the old proxy pods to be gone", async () => {
            const pods = (await cluster.pods(ns, "app.kubernetes.io/name=vllm-ingress")).map((p) => p.metadata.name);
            return pods.length > 0 && pods.every((p) => !before.includes(p)) ? pods : undefined;
        });
        assert.equal(after.length, before.length, "as many proxy pods after the roll");
        assert.equal((up.outputs?.ingressKeys?.value as Record<string, string> | undefined)?.operators, OPERATORS_KEY_2);
        await assertWorkloadsReady(cluster, [ns]);
    });

    /**
     * Each change is refused by preview and by up with its message, no stack trace and nothing
     * changed; afterwards the state is as before and the restored config previews clean.
     */
    const assertRefused = async (cases: ReadonlyArray<[what: string, change: Record<string, unknown>, message: RegExp]>) => {
        const good = platform();
        const before = stateSummary(stack);
        try {
            for (const [what, change, message] of cases) {
                await stack.setPlatform(merge(good, change));
                for (const op of ["preview", "up"] as const) {
                    const r = await stack[op](`${what}: ${op}`, { timeoutMs: UP_MS });
                    assert.equal(r.ok, false, `${op} with ${what} must fail`);
                    assert.match(r.error!, message);
                    assert.doesNotMatch(r.error!, /\n\s+at .+\(.+:\d+:\d+\)/, `${op}: no stack trace in the message`);
                    assert.equal(changeCount(r.changes), 0, `${op} with ${what}: nothing changed`);
                }
            }
            assert.deepEqual(stateSummary(stack), before, "the state's resources are unchanged");
        } finally {
            await stack.setPlatform(good);
        }
        const back = await stack.preview("preview after restoring the config");
        assertOk(back, "preview after restoring the config");
        assert.equal(changeCount(back.changes), 0, `restored config previews clean: ${JSON.stringify(back.changes)}`);
    };

    it("a bad config fails preview and up with the clean message and leaves the state unchanged", async () => {
        needFirstUp();
        await assertRefused([
            ["trainerGpus 5 on a 2-GPU node", { training: { trainerGpus: 5 } }, /training\.trainerGpus: vLLM 1 \+ trainer 5 = 6 GPUs, but the node has 2/],
        ]);
    });

    it("a changed class or a smaller size of the claims is refused before anything changes (issue 13 point 2)", async () => {
        needFirstUp();
        // Runs after the no-change up, which recorded the stack's read of its own outputs: the refused
        // ups read the same outputs again, so the state compares equal (run alone, right after the first
        // up, that read would differ: the first up read an empty stack).
        const n = names();
        const claimBefore = await cluster.getJson(["pvc", "-n", n.namespaces.training, n.training.checkpoints]);
        assert.equal(claimBefore?.spec.storageClassName, cluster.storageClass, "the claim got the cluster's default class");
        await assertRefused([
            [
                "another StorageClass",
                { target: { storageClassName: "other-class" } },
                new RegExp(`target\\.storageClassName: 'other-class' differs from '${cluster.storageClass}', the class of the checkpoints claim`),
            ],
            [
                "a smaller checkpoints volume",
                { training: { checkpoints: { size: "1Gi" } } },
                /training\.checkpoints\.size: 1Gi is smaller than the \d+\w+ of the claim/,
            ],
        ]);
        const claimAfter = await cluster.getJson(["pvc", "-n", n.namespaces.training, n.training.checkpoints]);
        assert.equal(claimAfter?.metadata.uid, claimBefore?.metadata.uid, "the same claim");
        assert.deepEqual(claimAfter?.spec.resources, claimBefore?.spec.resources, "with its size");
    });

    it("a new runId starts a new run: up succeeds and the new Job's pod is placed", async () => {
        needFirstUp();
        const old = names();
        await stack.setPlatform(merge(platform(), { runId: "stg-002" }));
        const up = await stack.up("new runId", { timeoutMs: UP_MS });
        assertOk(up, "up with a new runId");
        const n = names();
        assert.notEqual(n.training.job, old.training.job);
        await assertTrainingPlaced(cluster, n.namespaces.training, n.training.job, 2);
        const inState = stack
            .stateResources()
            .filter((r: any) => r.type === "kubernetes:batch/v1:Job")
            .map((r: any) => r.outputs?.metadata?.name);
        assert.equal(inState.length, 1, "only the new run's Job is in the state");
        assert.match(inState[0], new RegExp(`^${n.training.job}-[0-9a-f]{8}$`));
        const oldPods = await jobPods(cluster, old.namespaces.training, old.training.job);
        log(`new runId: ${secs(up.ms)}; old Job ${old.training.job} pods still in the cluster: ${oldPods.length}`);
        await assertWorkloadsReady(cluster, Object.values(n.namespaces));
    });

    it("changing the sandbox pool size under the same runId: up succeeds", async () => {
        needFirstUp();
        const n = names();
        await stack.setPlatform(merge(platform(), { sandboxes: { poolSize: 14 } }));
        const up = await stack.up("sandbox pool size", { timeoutMs: UP_MS });
        if (!up.ok) await repairWedgedJob("pool size");
        assertOk(up, "up after changing sandboxes.poolSize (issue 13 point 1 when the Job collides)");
        const pool = await cluster.getJson<{ items: any[] }>(["sandboxwarmpools.extensions.agents.x-k8s.io", "-n", n.namespaces.sandboxes]);
        assert.equal(pool?.items[0]?.spec?.replicas, 14);
        await assertTrainingPlaced(cluster, n.namespaces.training, n.training.job, 2);
    });

    it("setting hfToken after the first up: up succeeds and the trainer gets HF_TOKEN", async () => {
        needFirstUp();
        const n = names();
        await stack.setSecret("hfToken", HF_TOKEN);
        secrets.hfToken = HF_TOKEN;
        const up = await stack.up("hfToken set", { timeoutMs: UP_MS });
        if (!up.ok) await repairWedgedJob("hfToken");
        assertOk(up, "up after setting hfToken (issue 13 point 1 when the Job collides)");
        const pod = await assertTrainingPlaced(cluster, n.namespaces.training, n.training.job, 2);
        const env = pod.spec.containers.flatMap((c: any) => c.env ?? []);
        assert.ok(
            env.some((e: any) => e.name === "HF_TOKEN" && e.valueFrom?.secretKeyRef),
            "HF_TOKEN from a Secret",
        );
        assert.equal(Object.values(await secretData(cluster, n.namespaces.training, n.training.hfSecret)).join(), HF_TOKEN);
    });

    it("a trainer setting changed under the same runId: up succeeds, never two trainers of one run", async () => {
        needFirstUp();
        const n = names();
        await stack.setPlatform(merge(platform(), { training: { temperature: 0.9 } }));
        const up = await stack.up("trainer setting", { timeoutMs: UP_MS });
        if (!up.ok) await repairWedgedJob("trainer setting");
        assertOk(up, "up after changing training.temperature under the same runId");
        // One live Job of the run, whose pod runs the new args; the old Job's pod stops (its grace period) and is not replaced.
        const pod = await assertTrainingPlaced(cluster, n.namespaces.training, n.training.job, 2);
        assert.ok(JSON.stringify(pod.spec.containers).includes("--temperature"), "the live pod runs the changed trainer args");
        await cluster.waitFor(
            `one trainer pod of run ${n.training.job} once the old one stopped`,
            async () => (await jobPods(cluster, n.namespaces.training, n.training.job)).length === 1,
            30_000,
        );
        const second = await stack.up("after trainer setting", { timeoutMs: UP_MS });
        assertOk(second, "the up after that");
        assert.equal(changeCount(second.changes), 0, `and it changes nothing: ${JSON.stringify(second.changes)}`);
    });

    it("the state never holds a secret in plain text (sentinels and generated keys, every checkpoint and backup)", () => {
        needFirstUp();
        assertNoPlainSecrets(stack, secrets);
    });

    let checkpointsBefore: any;
    it("destroy removes what the stack made", async () => {
        needFirstUp();
        const n = names();
        checkpointsBefore = await cluster.getJson(["pvc", n.training.checkpoints, "-n", n.namespaces.training]);
        const down = await stack.destroy("destroy", { timeoutMs: UP_MS });
        assertOk(down, "destroy");
        log(`staging destroy: ${secs(down.ms)}`);
        assert.equal(stack.stateResources().length, 0, "the state is empty");
        for (const ns of [n.namespaces.ingress, n.namespaces.envs, n.namespaces.sandboxes]) {
            await cluster.waitFor(`namespace ${ns} gone`, async () => (await cluster.getJson(["namespace", ns])) === undefined, 120_000);
        }
        const vap = await cluster.getJson<{ items: any[] }>(["validatingadmissionpolicies,validatingadmissionpolicybindings"]);
        assert.deepEqual(
            vap?.items.map((i) => i.metadata.name).filter((x) => x.includes("staging")),
            [],
            "no cluster-scoped object of the stack left",
        );
        // The training namespace goes too, unless the checkpoints are kept in it (next test).
        const left = (await objectsIn(cluster, n.namespaces.training)).filter(
            (o) =>
                !/persistentvolumeclaim\/|configmap\/kube-root-ca\.crt|serviceaccount\/default/.test(o) && !o.startsWith("job.batch/") && !o.startsWith("pod/"),
        );
        assert.deepEqual(left, [], `only kept data (and retained Jobs) may stay in ${n.namespaces.training}`);
    });

    it("destroy keeps the checkpoints volume with its data (issue 13 point 2)", async () => {
        needFirstUp();
        const n = names();
        assert.ok(checkpointsBefore, "the checkpoints PVC existed before destroy");
        const kept = await cluster.getJson(["pvc", n.training.checkpoints, "-n", n.namespaces.training]);
        assert.ok(kept && !kept.metadata.deletionTimestamp, `the checkpoints PVC ${n.namespaces.training}/${n.training.checkpoints} survives destroy`);
        assert.equal(kept.metadata.uid, checkpointsBefore.metadata.uid, "the same claim");
        assert.equal(kept.spec.volumeName, checkpointsBefore.spec.volumeName, "bound to the same volume (the data)");
    });

    it("up after destroy succeeds", async () => {
        needFirstUp();
        const up = await stack.up("up after destroy", { timeoutMs: FIRST_UP_MS });
        assertOk(up, "up after destroy");
        log(`staging up after destroy: ${secs(up.ms)}`);
        const n = names();
        await assertTrainingPlaced(cluster, n.namespaces.training, n.training.job, 2);
        await assertWorkloadsReady(cluster, Object.values(n.namespaces));
        const pvc = await cluster.getJson(["pvc", n.training.checkpoints, "-n", n.namespaces.training]);
        assert.equal(pvc?.metadata.uid, checkpointsBefore?.metadata.uid, "the up after destroy adopts the kept checkpoints claim (same claim, same volume)");
        assert.equal(pvc?.spec.volumeName, checkpointsBefore?.spec.volumeName);
        const again = await stack.up("no-change up after adoption", { timeoutMs: UP_MS });
        assertOk(again, "the up after that");
        assert.equal(changeCount(again.changes), 0, `and it changes nothing: ${JSON.stringify(again.changes)}`);
    });

    it("the first black-box up, a refresh and the next up do not wait for vLLM to load the model (issue 13 point 3)", async () => {
        // Pods in arl-slowload-training stay Running but not Ready, as while vLLM loads a model.
        const slow = await engine.stack("staging-slowload", stackPlatform(STACK, cluster, { target: { namespacePrefix: SLOW_PREFIX }, runId: "slow-001" }));
        const up = await slow.up("first up, model still loading", { timeoutMs: SLOW_MODEL_UP_MS });
        try {
            assertOk(up, `first up while the model loads (bound ${secs(SLOW_MODEL_UP_MS)})`);
            const n = namesFor("staging-slowload", slow.platform());
            await assertWorkloadsReady(cluster, [n.namespaces.ingress]);
            const pods = await jobPods(cluster, n.namespaces.training, n.training.job);
            assert.equal(pods.length, 1, "the run's pod exists (still loading)");
            // A refresh while the model loads finds nothing unhealthy (an awaited vLLM Service would be,
            // and the engine then updates it on the next up, which waits for the model).
            const refresh = await slow.refresh("refresh, model still loading", { timeoutMs: SLOW_MODEL_UP_MS });
            assertOk(refresh, "refresh while the model loads");
            assert.doesNotMatch(refresh.output, /unhealthy state/, "refresh while the model loads: no resource reported unhealthy");
            // (It may record the Job's new status: its pod started after the up.)
            log(`refresh while loading: ${JSON.stringify(refresh.changes)} ${JSON.stringify(steps(refresh).filter((x) => x.op === "update"))}`);
            const again = await slow.up("second up, model still loading", { timeoutMs: SLOW_MODEL_UP_MS });
            assertOk(again, `second up after that refresh, model still loading (bound ${secs(SLOW_MODEL_UP_MS)})`);
            assert.equal(changeCount(again.changes), 0, `second up while loading: ${JSON.stringify(again.changes)}`);
        } finally {
            const down = await slow.destroy("destroy slowload", { timeoutMs: UP_MS });
            log(`slowload: up ${up.ok ? "ok" : "failed"} after ${secs(up.ms)}; destroy ${down.ok ? "ok" : `failed: ${down.error?.slice(0, 300)}`}`);
        }
    });
});
