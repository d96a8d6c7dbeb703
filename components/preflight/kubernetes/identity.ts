/**
 * A run stack on a cluster stack: its cluster is the cluster stack's (the kube-system namespace's
 * UID against the cluster stack's clusterId output), and, with target.team, the team's namespaces
 * the run deploys into exist (the cluster stack makes them; the run stack makes none).
 */
import type { PlatformPlan } from "../../platform";
import { fail, type Finding, ok, warn } from "../report";
import type { NamespaceFacts } from "./facts";

/** `uid`: the kube-system UID read from the cluster. Nothing to check without clusterStack. */
export function checkClusterIdentity(plan: PlatformPlan, uid: string): Finding[] {
    const c = plan.config;
    const ref = c.clusterStack;
    if (ref === undefined) return [];
    const exported = c.cluster?.id;
    if (exported === undefined)
        return [
            warn(
                "Cluster identity",
                `this cluster's kube-system UID is ${uid}; the cluster stack ${ref}'s clusterId could not be read here (unchecked; pulumi up checks it before anything registers)`,
                `compare: pulumi stack output clusterId --stack ${ref}`,
            ),
        ];
    if (exported !== uid)
        return [
            fail(
                "Cluster identity",
                `the cluster stack ${ref} was up'd on another cluster (its clusterId ${exported}; this cluster's kube-system UID ${uid})`,
                "point target.context at the cluster stack's cluster, or clusterStack at this cluster's cluster stack",
            ),
        ];
    return [ok("Cluster identity", `kube-system UID ${uid} is the cluster stack ${ref}'s clusterId`)];
}

/** With target.team: every namespace the run places pods in (`names`) exists (made by the cluster stack's teams). */
export function checkTeamNamespaces(plan: PlatformPlan, names: readonly string[], namespaces: Readonly<Record<string, NamespaceFacts | undefined>>): Finding[] {
    const c = plan.config;
    if (c.target.kind !== "kubernetes" || c.target.team === undefined) return [];
    const missing = names.filter((n) => namespaces[n] === undefined);
    if (missing.length > 0)
        return [
            fail(
                "Team namespaces",
                `team ${c.target.team}: ${missing.join(", ")} missing (the run stack makes no namespace in team mode)`,
                `add { name: ${c.target.team} } to the teams of the cluster stack ${c.clusterStack} and pulumi up it`,
            ),
        ];
    return [ok("Team namespaces", `team ${c.target.team}: ${names.join(", ")} exist`)];
}
