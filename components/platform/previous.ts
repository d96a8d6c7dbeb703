/**
 * What other stacks (and this stack's last `up`) exported, read before anything registers:
 * - this stack's own last outputs, for the checks that compare a config with what already
 *   exists (claimChangeProblems), through a StackReference to the stack itself (the engine hands
 *   back the outputs of the last completed update; empty on the first up; `destroy` clears them);
 * - the cluster stack's outputs (clusterStack), which fill in and check the run's references.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import {
    applyClusterStack,
    clusterIdentityProblems,
    claimChangeProblems,
    ConfigError,
    type ClaimRecords,
    type ClusterOutputs,
    type PlatformConfig,
    type PlatformNames,
} from "../config";

/** The outputs a cluster stack exports (ClusterOutputs' keys). */
const CLUSTER_OUTPUT_NAMES = ["kind", "agentSandbox", "priorityClasses", "runtimeClasses", "certIssuer", "teams", "tenants", "clusterId"] as const;

/** `config` with its cluster stack's outputs applied (applyClusterStack); unchanged without clusterStack. */
export async function withClusterStack(name: string, config: PlatformConfig): Promise<PlatformConfig> {
    if (config.clusterStack === undefined) return config;
    const ref = new pulumi.StackReference(`${name}-cluster`, { name: config.clusterStack });
    const values = await Promise.all(CLUSTER_OUTPUT_NAMES.map((k) => ref.getOutputDetails(k).then((d) => d.value ?? d.secretValue)));
    const outputs = Object.fromEntries(CLUSTER_OUTPUT_NAMES.map((k, i) => [k, values[i]]).filter(([, v]) => v !== undefined)) as Partial<ClusterOutputs>;
    return applyClusterStack(config, outputs);
}

/**
 * Throws a ConfigError when the run stack's cluster is not its cluster stack's: the kube-system
 * namespace's UID, read through the run's own provider before anything registers, against the
 * cluster stack's clusterId. Kubernetes run stacks with clusterStack only.
 */
export async function checkClusterIdentity(name: string, config: PlatformConfig, provider: pulumi.ProviderResource): Promise<void> {
    if (config.clusterStack === undefined || config.target.kind !== "kubernetes") return;
    const kubeSystem = k8s.core.v1.Namespace.get(`${name}-kube-system`, "kube-system", { provider });
    const live = await new Promise<string | undefined>((resolve) => kubeSystem.metadata.uid.apply((uid) => resolve(uid)));
    const problems = clusterIdentityProblems(config.clusterStack, config.cluster?.id, live, config.target.context);
    if (problems.length > 0) throw new ConfigError(problems);
}

/** The stack output that records the claims (Platform.outputs.claims). */
export const CLAIMS_OUTPUT = "claims";

/** The claims the last `up` of this stack recorded; undefined when none (first up, after destroy). */
export async function previousClaims(name: string): Promise<ClaimRecords | undefined> {
    const self = new pulumi.StackReference(`${name}-previous`, { name: `${pulumi.getOrganization()}/${pulumi.getProject()}/${pulumi.getStack()}` });
    const details = await self.getOutputDetails(CLAIMS_OUTPUT);
    return (details.value ?? details.secretValue) as ClaimRecords | undefined;
}

/**
 * Throws a ConfigError naming every change of an existing claim that Kubernetes would refuse
 * half way (its class, a smaller size). Kubernetes stacks only: Docker's volumes are host
 * directories with neither.
 */
export async function checkAgainstPrevious(name: string, config: PlatformConfig, names: PlatformNames): Promise<void> {
    if (config.target.kind !== "kubernetes") return;
    const problems = claimChangeProblems(await previousClaims(name), config, names);
    if (problems.length > 0) throw new ConfigError(problems);
}
