/**
 * Reading the cluster: what `checkKubernetes` needs, with kubectl (`--kubeconfig/--context`,
 * `-o json`, bounded timeouts), with the stack's kubeconfig and context.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { PlatformPlan } from "../../platform";
import type { Read } from "../report";
import { claimFacts, type ConnectionFacts, type KubernetesFacts, type NamespaceFacts, type PullSecretFacts, unansweredFacts } from "./facts";
import { PULL_SECRET_FIELDS, parsePullSecretFields, pullSecretNamespaces } from "./pull-secret";
import { JOBSET_CONTROLLER_LABEL, kubernetesNeeds, SANDBOX_CONTROLLER_LABEL } from "./needs";
import { dnsPodSelector } from "./dns";

export interface CommandResult {
    readonly code: number;
    readonly stdout: string;
    readonly stderr: string;
}

export interface KubernetesReadOptions {
    /** kubectl binary. @default $KUBECTL, else "kubectl" */
    readonly kubectl?: string;
    /** Per request. @default 10000 */
    readonly timeoutMs?: number;
}

function runKubectl(bin: string, args: readonly string[], timeoutMs: number): Promise<CommandResult> {
    return new Promise((resolve) => {
        execFile(bin, [...args], { timeout: timeoutMs + 5000, maxBuffer: 256 * 1024 * 1024, killSignal: "SIGKILL" }, (err, stdout, stderr) => {
            const e = err as (NodeJS.ErrnoException & { killed?: boolean }) | null;
            let why = stderr;
            if (e?.code === "ENOENT") why = `cannot run ${bin}: not installed (install kubectl, or set KUBECTL to its path)`;
            else if (e?.killed) why = `${stderr}\nkubectl gave no answer within ${Math.round((timeoutMs + 5000) / 1000)} s`;
            resolve({ code: e ? (typeof e.code === "number" ? e.code : 1) : 0, stdout, stderr: why });
        });
    });
}

/** Whether none of the kubeconfig files kubectl would read exists (target.kubeconfig, else $KUBECONFIG's list, else ~/.kube/config). */
export function kubeconfigMissing(kubeconfig: string | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
    const files = (kubeconfig ?? env.KUBECONFIG ?? path.join(os.homedir(), ".kube", "config")).split(path.delimiter).filter(Boolean);
    return !files.some((f) => fs.existsSync(f.startsWith("~/") ? path.join(os.homedir(), f.slice(2)) : f));
}

/** A kubectl session with a target's kubeconfig and context: the connection as found, and readers bounded by the timeout. */
export async function connect(t: { readonly kubeconfig?: string; readonly context?: string }, opts: KubernetesReadOptions = {}) {
    const bin = opts.kubectl ?? process.env.KUBECTL ?? "kubectl";
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const kubeconfig = t.kubeconfig ?? process.env.KUBECONFIG ?? "~/.kube/config";
    const base = t.kubeconfig !== undefined ? [`--kubeconfig=${t.kubeconfig}`] : [];
    const contexts = (await runKubectl(bin, [...base, "config", "get-contexts", "-o", "name"], timeoutMs)).stdout.split("\n").filter(Boolean);
    const context = t.context ?? (await runKubectl(bin, [...base, "config", "current-context"], timeoutMs)).stdout.trim();
    const withCtx = [...base, ...(context ? [`--context=${context}`] : []), `--request-timeout=${Math.ceil(timeoutMs / 1000)}s`];
    let server: string | undefined;
    const view = await runKubectl(bin, [...base, "config", "view", "--minify", "-o", "json", ...(context ? [`--context=${context}`] : [])], timeoutMs);
    if (view.code === 0) {
        try {
            server = JSON.parse(view.stdout).clusters?.[0]?.cluster?.server;
        } catch {
            // no server then
        }
    }
    const json = async <T>(args: readonly string[], pick: (doc: any) => T): Promise<Read<T>> => {
        const r = await runKubectl(bin, [...withCtx, ...args, "-o", "json"], timeoutMs);
        if (r.code !== 0) return { ok: false, error: r.stderr || `kubectl exited ${r.code}`, forbidden: /forbidden/i.test(r.stderr) };
        try {
            return { ok: true, value: pick(r.stdout.trim() ? JSON.parse(r.stdout) : {}) };
        } catch (e) {
            return { ok: false, error: `unreadable kubectl output: ${(e as Error).message}` };
        }
    };
    /** kubectl's `-o jsonpath=` output of `template` (what leaves the API server is only what the template names). */
    const jsonpath = async <T>(args: readonly string[], template: string, pick: (out: string) => T): Promise<Read<T>> => {
        const r = await runKubectl(bin, [...withCtx, ...args, "-o", `jsonpath=${template}`], timeoutMs);
        if (r.code !== 0) return { ok: false, error: r.stderr || `kubectl exited ${r.code}`, forbidden: /forbidden/i.test(r.stderr) };
        return { ok: true, value: pick(r.stdout) };
    };
    const version = await json(["version"], (d) => {
        if (!d.serverVersion) throw new Error("no serverVersion");
        return d.serverVersion;
    });
    const items = (d: any): any[] => (Array.isArray(d.items) ? d.items : d.kind && d.kind !== "List" ? [d] : []);
    /** Named objects, missing ones left out. */
    const named = (resource: string, names: readonly string[]) =>
        names.length === 0 ? Promise.resolve({ ok: true as const, value: [] as any[] }) : json(["get", resource, ...names, "--ignore-not-found"], items);
    /** One object, undefined when not found. */
    const one = (args: readonly string[]) => json(["get", ...args, "--ignore-not-found"], (d) => (d.metadata ? d : undefined));
    const conn: ConnectionFacts = { context, kubeconfig, kubeconfigMissing: kubeconfigMissing(t.kubeconfig), server, contexts, version };
    return { conn, json, jsonpath, items, named, one };
}

/** A kubectl session (connect) and what the plan needs of the cluster. */
type Session = Awaited<ReturnType<typeof connect>>;
type Needs = ReturnType<typeof kubernetesNeeds>;

/** A list read only where the plan needs it (an empty list otherwise). */
function listIf(k: Session, wanted: unknown, args: readonly string[]): Promise<Read<any[]>> {
    return wanted ? k.json(args, k.items) : Promise.resolve({ ok: true as const, value: [] as any[] });
}

/** The stack's namespaces that exist, each with its quotas, the stack's running pods and its claims. */
async function readNamespaces(k: Session, needs: Needs): Promise<Read<Record<string, NamespaceFacts | undefined>>> {
    const { json, items } = k;
    const list = await k.named("namespaces", needs.namespaces);
    if (!list.ok) return list;
    const out: Record<string, NamespaceFacts | undefined> = {};
    for (const ns of needs.namespaces) {
        if (!list.value.some((n) => n.metadata?.name === ns)) continue;
        const [quotas, pods, claims] = await Promise.all([
            json(["get", "resourcequotas", "-n", ns], items),
            json(
                ["get", "pods", "-n", ns, "-l", "app.kubernetes.io/part-of=agent-rl-infra", "--field-selector=status.phase!=Succeeded,status.phase!=Failed"],
                items,
            ),
            json(["get", "persistentvolumeclaims", "-n", ns], items),
        ]);
        if (!quotas.ok) return quotas;
        out[ns] = { quotas: quotas.value, stackPods: pods.ok ? pods.value : [], claims: claims.ok ? claims.value.map((c) => c.metadata.name) : [] };
    }
    return { ok: true, value: out };
}

// The pull Secret's type and part-of label only (PULL_SECRET_FIELDS names nothing of its data).
async function readPullSecrets(k: Session, plan: PlatformPlan): Promise<Read<Record<string, PullSecretFacts | undefined>>> {
    const out: Record<string, PullSecretFacts | undefined> = {};
    for (const ns of pullSecretNamespaces(plan)) {
        const r = await k.jsonpath(["get", "secret", plan.names.pullSecret, "-n", ns, "--ignore-not-found"], PULL_SECRET_FIELDS, parsePullSecretFields);
        if (!r.ok) return r;
        out[ns] = r.value;
    }
    return { ok: true, value: out };
}

/** The cluster-wide objects: nodes, storage, priority and runtime classes, CRDs, controllers, the Kueue queue, DaemonSets. */
function readClusterObjects(k: Session, needs: Needs) {
    const { json, items, named, one } = k;
    return Promise.all([
        json(["get", "nodes"], items),
        listIf(k, needs.storage, ["get", "storageclasses.storage.k8s.io"]),
        named("priorityclasses.scheduling.k8s.io", Object.keys(needs.priorityClasses)),
        named("runtimeclasses.node.k8s.io", Object.keys(needs.runtimeClasses)),
        named("customresourcedefinitions.apiextensions.k8s.io", needs.crds),
        listIf(k, needs.sandboxController, ["get", "deployments.apps", "-A", "-l", SANDBOX_CONTROLLER_LABEL]),
        listIf(k, needs.jobSetController, ["get", "deployments.apps", "-A", "-l", JOBSET_CONTROLLER_LABEL]),
        needs.kueue ? one(["localqueues.kueue.x-k8s.io", needs.kueue.queue, "-n", needs.kueue.namespace]) : Promise.resolve(undefined),
        json(["get", "daemonsets.apps", "-A"], items),
    ] as const);
}

/** The ingress's Gateway, certificate issuer and TLS Secret, where the plan names them. */
function readIngressObjects(k: Session, needs: Needs) {
    const { json, one } = k;
    return Promise.all([
        needs.gateway ? one(["gateways.gateway.networking.k8s.io", needs.gateway.name, "-n", needs.gateway.namespace]) : Promise.resolve(undefined),
        needs.issuer && needs.issuer.group === "cert-manager.io"
            ? one(
                  needs.issuer.kind === "Issuer"
                      ? ["issuers.cert-manager.io", needs.issuer.name, "-n", needs.issuer.namespace]
                      : ["clusterissuers.cert-manager.io", needs.issuer.name],
              )
            : Promise.resolve(undefined),
        needs.tlsSecret
            ? json(["get", "secret", needs.tlsSecret.name, "-n", needs.tlsSecret.namespace, "--ignore-not-found"], (d) =>
                  // Only the type and the key names leave this function, never the data.
                  d.metadata ? { type: String(d.type ?? ""), keys: Object.keys(d.data ?? {}) } : undefined,
              )
            : Promise.resolve(undefined),
    ] as const);
}

/** The stack's own: its namespaces, the cluster DNS pods, pull Secrets, the checkpoint claim, kube-system's UID. */
function readStackObjects(k: Session, plan: PlatformPlan, needs: Needs) {
    const { json, items, one } = k;
    const dns = dnsPodSelector(plan);
    return Promise.all([
        readNamespaces(k, needs),
        json(["get", "pods", "-n", dns.namespace, "-l", dns.selector], (d) => items(d).length),
        plan.registryAuth !== undefined ? readPullSecrets(k, plan) : Promise.resolve(undefined),
        plan.training.checkpoints
            ? one(["persistentvolumeclaims", plan.training.checkpoints.name, "-n", plan.training.namespace]).then((r) =>
                  r.ok && r.value !== undefined ? { ok: true as const, value: claimFacts(r.value) } : r,
              )
            : Promise.resolve(undefined),
        plan.config.clusterStack !== undefined ? json(["get", "namespace", "kube-system"], (d) => String(d.metadata?.uid ?? "")) : Promise.resolve(undefined),
    ] as const);
}

// A missing CRD makes `get <kind>` fail with "the server doesn't have a resource type": that is "not found" here.
function noKind<T>(r: Read<T> | undefined): Read<T | undefined> | undefined {
    return r && !r.ok && /doesn't have a resource type|the server could not find the requested resource/i.test(r.error) ? { ok: true, value: undefined } : r;
}

/** Reads what `checkKubernetes` needs, with the stack's kubeconfig and context; every read bounded. */
export async function readKubernetes(plan: PlatformPlan, opts: KubernetesReadOptions = {}): Promise<KubernetesFacts> {
    const t = plan.config.target;
    if (t.kind !== "kubernetes") throw new Error("readKubernetes: the stack's target is not kubernetes");
    const k = await connect(t, opts);
    const { conn } = k;
    if (!conn.version.ok) return unansweredFacts(conn);
    const needs = kubernetesNeeds(plan);
    const [
        [nodes, storageClasses, priorityClasses, runtimeClasses, crds, sandboxControllers, jobSetControllers, localQueue, daemonSets],
        [gateway, issuer, secret],
        [nsFacts, dnsPods, pullSecrets, checkpointClaim, kubeSystemUid],
    ] = await Promise.all([readClusterObjects(k, needs), readIngressObjects(k, needs), readStackObjects(k, plan, needs)]);
    return {
        context: conn.context,
        kubeconfig: conn.kubeconfig,
        kubeconfigMissing: conn.kubeconfigMissing,
        server: conn.server,
        contexts: conn.contexts,
        version: conn.version,
        nodes,
        storageClasses,
        priorityClasses,
        runtimeClasses,
        crds,
        sandboxControllers,
        jobSetControllers,
        localQueue: noKind(localQueue),
        daemonSets,
        dnsPods,
        gateway: noKind(gateway),
        issuer: noKind(issuer),
        tlsSecret: secret,
        namespaces: nsFacts,
        ...(pullSecrets ? { pullSecrets } : {}),
        ...(checkpointClaim ? { checkpointClaim } : {}),
        ...(kubeSystemUid ? { kubeSystemUid } : {}),
    };
}
