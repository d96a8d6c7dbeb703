/**
 * target.dns against the cluster: which DNS shape the cluster has (a NodeLocal DNSCache DaemonSet,
 * the kube-dns pods, the configured selector's pods) and whether the setting matches it, so the
 * stack's pods do not lose DNS to a rule that allows the wrong peer.
 */
import { CLUSTER_DNS } from "../../shared/kubernetes";
import { NODE_LOCAL_DNS_ADDRESS } from "../../config/dns";
import type { PlatformPlan } from "../../platform";
import { fail, type Finding, ok } from "../report";

/** The DaemonSet name of NodeLocal DNSCache (kubernetes cluster/addons/dns/nodelocaldns/nodelocaldns.yaml; GKE's addon keeps it). */
export const NODE_LOCAL_DNS_DAEMONSET = "node-local-dns";

/** What the DNS check reads: DNS pods matching the configured selector (kube-dns's for the kube-dns and node-local shapes). */
export interface DnsFacts {
    /** Pods matching the shape's selector (kube-system k8s-app=kube-dns, or the selector's). */
    readonly dnsPods: number;
}

/** The addresses a node-local-dns DaemonSet listens on (its `-localip a,b` argument), [] when none is given. */
export function nodeLocalAddresses(ds: any): string[] {
    const args: string[] = (ds?.spec?.template?.spec?.containers ?? []).flatMap((c: any) => [...(c.command ?? []), ...(c.args ?? [])]);
    const i = args.findIndex((a) => a === "-localip" || a.startsWith("-localip="));
    if (i < 0) return [];
    const value = args[i].includes("=") ? args[i].split("=")[1] : args[i + 1];
    return (value ?? "").split(",").filter(Boolean);
}

/** The selector the DNS egress's pods are found with, as `kubectl get pods -n <ns> -l <selector>` takes it. */
export function dnsPodSelector(plan: PlatformPlan): { namespace: string; selector: string } {
    const t = plan.config.target;
    const pods =
        t.kind === "kubernetes" && t.dns.kind === "selector"
            ? { namespace: t.dns.namespace, labels: t.dns.podLabels }
            : { namespace: CLUSTER_DNS.namespace, labels: CLUSTER_DNS.podLabels };
    return {
        namespace: pods.namespace,
        selector: Object.entries(pods.labels)
            .map(([k, v]) => `${k}=${v}`)
            .join(","),
    };
}

/** target.dns against the DaemonSets and DNS pods the cluster runs. */
export function checkDns(plan: PlatformPlan, daemonSets: readonly any[], facts: DnsFacts): Finding {
    const check = "Cluster DNS";
    const t = plan.config.target;
    if (t.kind !== "kubernetes") return ok(check, "not a Kubernetes target");
    const dns = t.dns;
    const cache = daemonSets.find((d) => d.metadata?.name === NODE_LOCAL_DNS_DAEMONSET);
    const cacheId = cache ? `DaemonSet ${cache.metadata.namespace}/${cache.metadata.name}` : "";
    const listens = cache ? nodeLocalAddresses(cache) : [];
    const { namespace, selector } = dnsPodSelector(plan);
    const listensText = listens.length > 0 ? listens.join(", ") : `its default ${NODE_LOCAL_DNS_ADDRESS}`;
    const nodeLocalFix = `set target.dns to { kind: node-local${listens.length > 0 ? `, addresses: [${listens.join(", ")}]` : ""} }`;
    if (dns.kind === "kube-dns" && cache)
        return fail(
            check,
            `NodeLocal DNSCache runs (${cacheId}, listening on ${listensText}): pods send their queries there, which target.dns kube-dns does not allow, so every pod of the stack would lose DNS`,
            nodeLocalFix,
        );
    if (dns.kind === "node-local") {
        if (!cache)
            return fail(
                check,
                `target.dns is node-local, but no ${NODE_LOCAL_DNS_DAEMONSET} DaemonSet runs: the pods' queries go to kube-dns`,
                "set target.dns to { kind: kube-dns } (or install NodeLocal DNSCache)",
            );
        const missing = listens.filter((a) => !dns.addresses.includes(a));
        if (missing.length > 0)
            return fail(
                check,
                `${cacheId} listens on ${listens.join(", ")}, but target.dns.addresses allows ${dns.addresses.join(", ")}: queries to ${missing.join(", ")} would be dropped`,
                nodeLocalFix,
            );
    }
    if (facts.dnsPods === 0)
        return fail(
            check,
            `no pod matches ${selector} in namespace ${namespace}${dns.kind === "selector" ? " (target.dns)" : ""}: the DNS egress rule would allow a peer that does not exist`,
            dns.kind === "selector"
                ? `set target.dns.namespace / podLabels to your DNS pods' (kubectl get pods -n ${namespace} --show-labels)`
                : "set target.dns to { kind: selector, namespace, podLabels } naming your cluster's DNS pods",
        );
    return ok(
        check,
        dns.kind === "node-local"
            ? `${cacheId} listens on ${listens.length > 0 ? listens.join(", ") : "its default address"}, allowed by target.dns node-local; ${facts.dnsPods} pod(s) ${selector} in ${namespace} behind it`
            : `${facts.dnsPods} pod(s) ${selector} in ${namespace}${dns.kind === "kube-dns" ? ", and no NodeLocal DNSCache" : ""}: target.dns ${dns.kind} matches`,
    );
}
