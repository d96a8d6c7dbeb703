// What the engine tests assert on the simulated cluster after an operation: where the
// training pod landed and with which GPUs, whether workloads are Ready, what a stack left
// behind, whether a secret reached the state in plain text. Names come from the program's
// own naming (components/config/names.ts), so the checks follow the code.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parsePlatformConfig, platformNames, type PlatformNames } from "../../components/config";
import type { Cluster, ClusterOptions } from "./cluster";
import { GPU_RESOURCE, startCluster } from "./cluster";
import type { Engine, EngineStack, OpResult } from "./engine";
import { createEngine, plainSecretsIn } from "./engine";
import { engineFixtures, type EngineFixtures } from "./engine-fixtures";
import { scaled } from "./waits";

/** The object names the program computes for a stack's platform config. */
export function namesFor(stack: string, platform: Record<string, unknown>): PlatformNames {
    return platformNames(parsePlatformConfig(platform, stack));
}

/** The operation succeeded, or fails the test with the CLI's error and the tail of its output. */
export function assertOk(r: OpResult, what: string): void {
    if (r.ok) return;
    assert.fail(
        `${what} failed after ${(r.ms / 1000).toFixed(1)} s: ${errorLines(r).join("\n") || "(no error line)"}\n--- output (tail) ---\n${r.output.split("\n").slice(-25).join("\n")}`,
    );
}

/** The distinct "error: ..." lines of a failed operation (what the engine and the providers said). */
export function errorLines(r: OpResult): string[] {
    const lines = `${r.error ?? ""}\n${r.output}`
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => /error:|failed:|\*\*failed\*\*/.test(l) && !/^Command failed with exit code/.test(l));
    return [...new Set(lines.map((l) => l.replace(/^.*?(error: )/, "$1")))].slice(0, 8);
}

/** GPUs a pod asks for (containers and native sidecars). */
export function podGpus(pod: any): number {
    const all = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])];
    return all.reduce((n: number, c: any) => n + Number(c.resources?.limits?.[GPU_RESOURCE] ?? 0), 0);
}

/** The pods of a run (`train-<runId>`): its Jobs carry a hash of their pod template in their names, the pods the run's instance label. */
export async function jobPods(cluster: Cluster, namespace: string, job: string): Promise<any[]> {
    return cluster.pods(namespace, `app.kubernetes.io/instance=${job}`);
}

/**
 * The run's live Job (not being deleted: a replaced Job of the same run may still be stopping)
 * has a pod bound to the GPU node, Running, asking for `gpus` GPUs. Waits for the Job
 * controller and the scheduler (the provider does not wait for the Job). Fails if the run has
 * more than one live Job.
 */
export async function assertTrainingPlaced(cluster: Cluster, namespace: string, job: string, gpus: number, timeoutMs = 90_000): Promise<any> {
    let last: any;
    try {
        return await cluster.waitFor(
            `the live Job of run ${namespace}/${job} to have a Running pod on ${cluster.gpuNode}`,
            async () => {
                const jobs = (
                    (await cluster.getJson<{ items: any[] }>(["jobs", "-n", namespace, "-l", `app.kubernetes.io/instance=${job}`]))?.items ?? []
                ).filter((j) => !j.metadata?.deletionTimestamp);
                assert.ok(jobs.length <= 1, `one live Job of run ${job}, found ${jobs.map((j) => j.metadata.name).join(", ")}`);
                if (jobs.length === 0) return undefined;
                const pods = await cluster.pods(namespace, `batch.kubernetes.io/job-name=${jobs[0].metadata.name}`);
                last = pods;
                return pods.find(
                    (p) => !p.metadata?.deletionTimestamp && p.spec?.nodeName === cluster.gpuNode && p.status?.phase === "Running" && podGpus(p) === gpus,
                );
            },
            timeoutMs,
        );
    } catch (e) {
        const events = await cluster.kubectl([
            "get",
            "events",
            "-n",
            namespace,
            "--sort-by=.lastTimestamp",
            "-o",
            "custom-columns=OBJ:.involvedObject.name,REASON:.reason,MSG:.message",
        ]);
        const pods = (last ?? []).map((p: any) => `${p.metadata.name}: node=${p.spec?.nodeName ?? "-"} phase=${p.status?.phase} gpus=${podGpus(p)}`);
        assert.fail(`${(e as Error).message}\npods: ${pods.join("; ") || "(none)"}\nevents:\n${events.stdout.split("\n").slice(-15).join("\n")}`);
    }
}

/** Every Deployment and StatefulSet in the namespaces has all replicas updated and Ready. Returns "kind/ns/name replicas" lines. */
export async function assertWorkloadsReady(cluster: Cluster, namespaces: readonly string[]): Promise<string[]> {
    const seen: string[] = [];
    for (const ns of namespaces) {
        const list = await cluster.getJson<{ items: any[] }>(["deployments,statefulsets", "-n", ns]);
        for (const w of list?.items ?? []) {
            const want = w.spec?.replicas ?? 1;
            const s = w.status ?? {};
            const id = `${w.kind}/${ns}/${w.metadata.name}`;
            assert.equal(s.readyReplicas ?? 0, want, `${id}: ${s.readyReplicas ?? 0} of ${want} replicas Ready`);
            assert.equal(s.updatedReplicas ?? 0, want, `${id}: ${s.updatedReplicas ?? 0} of ${want} replicas updated`);
            seen.push(`${id} ${want}`);
        }
    }
    return seen;
}

/** No file the backend or the workspace holds for the stack contains a secret value in plain text (or base64). */
export function assertNoPlainSecrets(stack: EngineStack, secrets: Readonly<Record<string, string>>): void {
    const files = stack.persistedFiles();
    assert.ok(
        files.some((f) => f.endsWith(`${stack.name}.json`)),
        "the backend holds the stack's checkpoint",
    );
    const found = plainSecretsIn(files, secrets);
    assert.deepEqual(found, [], `secret values in plain text in the state: ${found.join("; ")}`);
}

/** Names of objects of `kinds` in a namespace ("kind/name"), for before/after comparisons. */
export async function objectsIn(
    cluster: Cluster,
    namespace: string,
    kinds = "all,configmaps,secrets,pvc,networkpolicies,roles,rolebindings,serviceaccounts,resourcequotas,poddisruptionbudgets",
): Promise<string[]> {
    const r = await cluster.kubectl(["get", kinds, "-n", namespace, "-o", "name"]);
    if (r.code !== 0) return [];
    return r.stdout.split("\n").filter(Boolean).sort();
}

/** Decoded data of a Secret. */
export async function secretData(cluster: Cluster, namespace: string, name: string): Promise<Record<string, string>> {
    const s = await cluster.getJson<any>(["secret", name, "-n", namespace]);
    assert.ok(s, `Secret ${namespace}/${name} exists`);
    return Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(String(v), "base64").toString("utf8")]));
}

/**
 * How many engine test files may hold a simulated cluster at once on this machine: 1 unless
 * AGENT_RL_ENGINE_LOCK_SLOTS says more (npm test sets 2 for the files it runs: its scheduler keeps
 * at most two clusters up, beside tests that use less CPU). A value that is not 1-8 is refused.
 */
export function engineLockSlots(env: NodeJS.ProcessEnv = process.env): number {
    const raw = env.AGENT_RL_ENGINE_LOCK_SLOTS;
    if (raw === undefined || raw === "") return 1;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1 || n > 8) throw new Error(`AGENT_RL_ENGINE_LOCK_SLOTS=${raw}: want a whole number from 1 to 8`);
    return n;
}

/**
 * At most engineLockSlots() engine test files at a time: each starts its own cluster, and more at
 * once on a 2-core machine would only slow them all. One directory per slot
 * (`.engine-tests.lock`, `.engine-tests.lock.2`, ...) holding the owner's pid (stale slots of dead
 * processes are taken over). Returns the release function.
 */
export async function acquireEngineLock(timeoutMs = 3 * 3600_000): Promise<() => void> {
    const cacheHome = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    const base = path.join(cacheHome, "agent-rl-infra", ".engine-tests.lock");
    const dirs = Array.from({ length: engineLockSlots() }, (_, i) => (i === 0 ? base : `${base}.${i + 1}`));
    fs.mkdirSync(path.dirname(base), { recursive: true });
    const until = Date.now() + scaled(timeoutMs);
    for (;;) {
        let anyAlive = false;
        for (const dir of dirs) {
            const release = tryLock(dir);
            if (typeof release === "function") return release;
            anyAlive ||= release.alive;
        }
        if (Date.now() > until) throw new Error(`engine test lock ${dirs.join(", ")} held for too long`);
        await new Promise((r) => setTimeout(r, anyAlive ? 2000 : 10));
    }
}

/** Takes the lock directory `dir` (a dead holder's is removed and taken), or says whether its holder is alive. */
function tryLock(dir: string, retry = true): (() => void) | { alive: boolean } {
    try {
        fs.mkdirSync(dir);
    } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        let owner = NaN;
        try {
            owner = Number(fs.readFileSync(path.join(dir, "pid"), "utf8"));
        } catch {
            /* being written or removed */
        }
        let alive = true;
        if (Number.isFinite(owner)) {
            try {
                process.kill(owner, 0);
            } catch (err) {
                alive = (err as NodeJS.ErrnoException).code === "EPERM";
            }
            if (!alive) {
                fs.rmSync(dir, { recursive: true, force: true });
                if (retry) return tryLock(dir, false);
            }
        }
        return { alive };
    }
    fs.writeFileSync(path.join(dir, "pid"), String(process.pid));
    let released = false;
    const release = () => {
        if (released) return;
        released = true;
        process.removeListener("exit", release);
        fs.rmSync(dir, { recursive: true, force: true });
    };
    process.on("exit", release);
    return release;
}

/** Milliseconds as "12.3 s". */
export function secs(ms: number): string {
    return `${(ms / 1000).toFixed(1)} s`;
}

/** Tears an engine test down in order, each step even if the one before failed: the engine's home, then the cluster, then the cross-file lock. */
export async function teardown(
    engine: { dispose(): Promise<void> } | undefined,
    cluster: { stop(): Promise<void> } | undefined,
    release: (() => void) | undefined,
): Promise<void> {
    try {
        await engine?.dispose();
    } finally {
        try {
            await cluster?.stop();
        } finally {
            release?.();
        }
    }
}

/**
 * What an engine test file (or the engine bench) starts first: the cross-file lock, the fixtures
 * (built when missing) and a simulated cluster. A step that fails releases what the ones before it
 * took, so the caller's teardown only ever sees a whole harness or nothing.
 */
export async function startHarnessCluster(
    options: ClusterOptions,
): Promise<{ cluster: Cluster; fixtures: Extract<EngineFixtures, { ok: true }>; release: () => void; clusterMs: number }> {
    const release = await acquireEngineLock();
    try {
        const fixtures = await engineFixtures({ build: true });
        if (!fixtures.ok) throw new Error(fixtures.reason);
        const t0 = Date.now();
        const cluster = await startCluster(options, fixtures);
        return { cluster, fixtures, release, clusterMs: Date.now() - t0 };
    } catch (e) {
        release();
        throw e;
    }
}

/** startHarnessCluster plus an engine home (CLI, plugins, backend) on that cluster. */
export async function startEngineHarness(
    options: ClusterOptions,
): Promise<{ cluster: Cluster; engine: Engine; release: () => void; clusterMs: number; engineMs: number }> {
    const { cluster, fixtures, release, clusterMs } = await startHarnessCluster(options);
    const t1 = Date.now();
    try {
        const engine = await createEngine(fixtures, cluster);
        return { cluster, engine, release, clusterMs, engineMs: Date.now() - t1 };
    } catch (e) {
        await teardown(undefined, cluster, release);
        throw e;
    }
}
