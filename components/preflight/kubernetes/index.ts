/**
 * The Kubernetes preflight: what a stack needs from the cluster it points at, read with kubectl
 * (read.ts), then checked by pure functions over the plan and what was read, one file per group
 * of checks (connection, nodes, checkpoints, addons, ingress, dns, pull-secret, quota; the registry
 * coverage is ../registry.ts, shared with Docker), so every message is unit-tested without
 * a cluster. `checkKubernetes` runs them in order.
 */
import { sandboxPoolOf } from "../../config/sandbox-providers";
import type { PlatformPlan } from "../../platform";
import { type Finding, firstLine, warn } from "../report";
import { checkCni, checkJobSet, checkJobSetController, checkKueue, checkSandboxController, checkSandboxCrds } from "./addons";
import { checkRegistryCredentials } from "../registry";
import { checkCheckpointVolume } from "./checkpoints";
import { checkConnection, checkVersion } from "./connection";
import { checkDns } from "./dns";
import type { KubernetesFacts } from "./facts";
import { checkCertManager, checkGateway, checkTlsSecret } from "./ingress";
import { kubernetesNeeds } from "./needs";
import { checkGpuNodes, checkPriorityClass, checkRuntimeClass, checkStorage } from "./nodes";
import { checkGpuMemory } from "./gpu-memory";
import { checkPullSecret } from "./pull-secret";
import { checkQuotas } from "./quota";
import { checkClusterIdentity, checkTeamNamespaces } from "./identity";

export {
    checkCni,
    checkJobSet,
    checkJobSetController,
    checkKueue,
    checkSandboxController,
    checkSandboxCrds,
    preV1SandboxMarks,
    sandboxMigrationFix,
} from "./addons";
export { checkCheckpointVolume, ruleText } from "./checkpoints";
export { checkClusterStack, clusterStackCrds, readClusterStack, type ClusterStackFacts } from "./cluster-stack";
export { checkConnection, checkVersion, MIN_KUBERNETES } from "./connection";
export { checkDns, dnsPodSelector, NODE_LOCAL_DNS_DAEMONSET, nodeLocalAddresses, type DnsFacts } from "./dns";
export {
    type ClaimFacts,
    claimFacts,
    type ConnectionFacts,
    type KubernetesFacts,
    type NamespaceFacts,
    type PullSecretFacts,
    unansweredFacts,
} from "./facts";
export { checkCertManager, checkGateway, checkTlsSecret } from "./ingress";
export * from "./needs";
export { checkGpuMemory, nodeGpuGiB } from "./gpu-memory";
export { checkGpuNodes, checkPriorityClass, checkRuntimeClass, checkStorage, nodeMisfits, tolerates } from "./nodes";
export { checkPullSecret, DOCKER_CONFIG_JSON, PULL_SECRET_FIELDS, parsePullSecretFields, pullSecretNamespaces } from "./pull-secret";
export { checkQuotas } from "./quota";
export { checkClusterIdentity, checkTeamNamespaces } from "./identity";
export { type CommandResult, connect, kubeconfigMissing, type KubernetesReadOptions, readKubernetes } from "./read";

function unreadable(check: string, what: string, r: { error: string; forbidden?: boolean }): Finding {
    return warn(
        check,
        `could not read ${what}: ${firstLine(r.error)} (unchecked)`,
        r.forbidden ? `run the preflight with credentials that may list ${what} (read-only is enough)` : "run it again; if it persists, see the error",
    );
}

/** Every Kubernetes finding from the plan and what was read. Only the connection finding when the API server did not answer. */
export function checkKubernetes(plan: PlatformPlan, f: KubernetesFacts, timeoutSeconds = 10): Finding[] {
    const conn = checkConnection(f, timeoutSeconds);
    if (!f.version.ok) return [conn];
    const needs = kubernetesNeeds(plan);
    const out: Finding[] = [conn, checkVersion(f.version.value)];
    out.push(...(f.nodes.ok ? checkGpuNodes(plan, f.nodes.value) : [unreadable("GPU node", "nodes", f.nodes)]));
    const memory = f.nodes.ok ? checkGpuMemory(plan, f.nodes.value) : undefined;
    if (memory) out.push(memory);
    if (needs.storage)
        out.push(...(f.storageClasses.ok ? checkStorage(plan, f.storageClasses.value) : [unreadable("StorageClass", "storageclasses", f.storageClasses)]));
    if (plan.training.checkpoints && f.checkpointClaim) {
        if (!f.checkpointClaim.ok) out.push(unreadable("Checkpoint volume", "persistentvolumeclaims", f.checkpointClaim));
        else if (!f.storageClasses.ok) out.push(unreadable("Checkpoint volume", "storageclasses", f.storageClasses));
        else out.push(checkCheckpointVolume(plan, f.checkpointClaim.value, f.storageClasses.value)!);
    }
    out.push(checkRegistryCredentials(plan, "kubernetes"));
    if (plan.registryAuth !== undefined && f.pullSecrets)
        out.push(f.pullSecrets.ok ? checkPullSecret(plan, f.pullSecrets.value)! : unreadable("Pull Secret", "secrets", f.pullSecrets));
    for (const [name, fields] of Object.entries(needs.priorityClasses))
        out.push(
            f.priorityClasses.ok
                ? checkPriorityClass(name, fields, f.priorityClasses.value)
                : unreadable("PriorityClass", "priorityclasses", f.priorityClasses),
        );
    for (const [name, fields] of Object.entries(needs.runtimeClasses))
        out.push(
            f.runtimeClasses.ok ? checkRuntimeClass(name, fields, f.runtimeClasses.value) : unreadable("RuntimeClass", "runtimeclasses", f.runtimeClasses),
        );
    const crds = f.crds.ok ? f.crds.value : undefined;
    if (sandboxPoolOf(plan.config)?.controller === "agent-sandbox") {
        out.push(crds ? checkSandboxCrds(plan, crds) : unreadable("agent-sandbox CRDs", "customresourcedefinitions", f.crds as { error: string }));
        if (needs.sandboxController)
            out.push(
                f.sandboxControllers.ok
                    ? checkSandboxController(f.sandboxControllers.value)
                    : unreadable("agent-sandbox controller", "deployments", f.sandboxControllers),
            );
    }
    if (plan.training.multiNode) {
        out.push(crds ? checkJobSet(crds) : unreadable("JobSet", "customresourcedefinitions", f.crds as { error: string }));
        out.push(
            f.jobSetControllers.ok ? checkJobSetController(f.jobSetControllers.value) : unreadable("JobSet controller", "deployments", f.jobSetControllers),
        );
    }
    const nsExists = (ns: string) => f.namespaces.ok && f.namespaces.value[ns] !== undefined;
    if (needs.gateway) {
        if (!crds) out.push(unreadable("Gateway API", "customresourcedefinitions", f.crds as { error: string }));
        else if (f.gateway && !f.gateway.ok) out.push(unreadable("Gateway", "gateways", f.gateway));
        else out.push(...checkGateway(plan, crds, f.gateway?.ok ? f.gateway.value : undefined));
    }
    if (plan.config.ingress.enabled && plan.config.ingress.tls.mode === "cert-manager") {
        if (!crds) out.push(unreadable("cert-manager", "customresourcedefinitions", f.crds as { error: string }));
        else if (f.issuer && !f.issuer.ok) out.push(unreadable("Issuer", "issuers", f.issuer));
        else out.push(...checkCertManager(plan, crds, f.issuer?.ok ? f.issuer.value : undefined, nsExists(plan.names.namespaces.ingress)));
    }
    if (needs.tlsSecret) {
        if (f.tlsSecret && !f.tlsSecret.ok) out.push(unreadable("TLS Secret", "secrets", f.tlsSecret));
        else out.push(checkTlsSecret(plan, f.tlsSecret?.ok ? f.tlsSecret.value : undefined, nsExists(needs.tlsSecret.namespace)));
    }
    if (needs.kueue) {
        if (!crds) out.push(unreadable("Kueue LocalQueue", "customresourcedefinitions", f.crds as { error: string }));
        else if (f.localQueue && !f.localQueue.ok) out.push(unreadable("Kueue LocalQueue", "localqueues", f.localQueue));
        else out.push(checkKueue(needs.kueue, crds, f.localQueue?.ok ? f.localQueue.value : undefined, nsExists(needs.kueue.namespace)));
    }
    out.push(f.daemonSets.ok ? checkCni(f.daemonSets.value) : unreadable("NetworkPolicy CNI", "daemonsets", f.daemonSets));
    if (!f.daemonSets.ok) out.push(unreadable("Cluster DNS", "daemonsets", f.daemonSets));
    else if (!f.dnsPods.ok) out.push(unreadable("Cluster DNS", "pods in the DNS namespace", f.dnsPods));
    else out.push(checkDns(plan, f.daemonSets.value, { dnsPods: f.dnsPods.value }));
    out.push(f.namespaces.ok ? checkQuotas(plan, f.namespaces.value) : unreadable("Quota headroom", "namespaces and resourcequotas", f.namespaces));
    if (f.namespaces.ok) out.push(...checkTeamNamespaces(plan, needs.namespaces, f.namespaces.value));
    if (f.kubeSystemUid)
        out.push(
            ...(f.kubeSystemUid.ok
                ? checkClusterIdentity(plan, f.kubeSystemUid.value)
                : [unreadable("Cluster identity", "namespace kube-system", f.kubeSystemUid)]),
        );
    return out;
}
