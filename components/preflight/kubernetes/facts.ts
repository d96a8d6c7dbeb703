/**
 * What the Kubernetes checks look at: the cluster's objects as the API server returned them
 * (plain JSON), each read or the reason it could not be.
 */
import type { Read } from "../report";

/** Everything the checks look at, as the API server returned it (plain JSON objects). */
export interface KubernetesFacts {
    /** The context used: target.context, else the kubeconfig's current context. */
    readonly context: string;
    /** The kubeconfig file used (target.kubeconfig, else kubectl's default). */
    readonly kubeconfig: string;
    /** The API server URL of the context, when the kubeconfig names one. */
    readonly server?: string;
    /** None of the kubeconfig files kubectl would read exists (a fresh machine: no ~/.kube/config). */
    readonly kubeconfigMissing?: boolean;
    /** Contexts the kubeconfig has (for the message when the stack's is missing). */
    readonly contexts: readonly string[];
    /** `kubectl version -o json`'s serverVersion: the API server answered. */
    readonly version: Read<{ readonly gitVersion: string; readonly major: string; readonly minor: string }>;
    readonly nodes: Read<readonly any[]>;
    readonly storageClasses: Read<readonly any[]>;
    /** The PriorityClasses the config names that exist. */
    readonly priorityClasses: Read<readonly any[]>;
    /** The RuntimeClasses the config names that exist. */
    readonly runtimeClasses: Read<readonly any[]>;
    /** The CustomResourceDefinitions the config needs that exist. */
    readonly crds: Read<readonly any[]>;
    /** Deployments labelled as the agent-sandbox controller, in any namespace. */
    readonly sandboxControllers: Read<readonly any[]>;
    /** Deployments labelled as JobSet's controller, in any namespace (read with training.nodes > 1). */
    readonly jobSetControllers: Read<readonly any[]>;
    /** The LocalQueue of target.kueueQueue (undefined: not found, or Kueue not installed). */
    readonly localQueue?: Read<any | undefined>;
    /** Every DaemonSet (the CNI heuristic, NodeLocal DNSCache). */
    readonly daemonSets: Read<readonly any[]>;
    /** Pods matching target.dns's selector (kube-dns's by default), counted. */
    readonly dnsPods: Read<number>;
    /** The Gateway of exposure `httproute` (undefined: not found). */
    readonly gateway?: Read<any | undefined>;
    /** The cert-manager Issuer/ClusterIssuer (undefined: not found). */
    readonly issuer?: Read<any | undefined>;
    /** The TLS Secret of tls.mode `secret`: its type and data keys only (undefined: not found). */
    readonly tlsSecret?: Read<{ readonly type: string; readonly keys: readonly string[] } | undefined>;
    /** Per stack namespace: undefined when it does not exist, else its quotas and what the stack already runs there. */
    /** The kube-system namespace's UID (read with clusterStack: the cluster's identity). */
    readonly kubeSystemUid?: Read<string>;
    readonly namespaces: Read<Readonly<Record<string, NamespaceFacts | undefined>>>;
    /** With registryAuth: the Secret of names.pullSecret in each namespace the stack makes (undefined: none there), its type and part-of label only. */
    readonly pullSecrets?: Read<Readonly<Record<string, PullSecretFacts | undefined>>>;
    /** With training.checkpoints: the checkpoint claim in the training namespace (undefined: none yet). */
    readonly checkpointClaim?: Read<ClaimFacts | undefined>;
}

/** What the pull-Secret check reads of an existing Secret: never its data. */
export interface PullSecretFacts {
    readonly type: string;
    /** Its app.kubernetes.io/part-of label ("" when it has none). */
    readonly partOf: string;
}

/** What the checkpoint check reads of an existing claim. */
export interface ClaimFacts {
    /** spec.resources.requests.storage. */
    readonly requested: string;
    /** status.capacity.storage (undefined until bound). */
    readonly capacity?: string;
    /** spec.storageClassName ("" for a claim bound without a class). */
    readonly storageClassName: string;
    readonly phase: string;
    /** Types of its status.conditions that are True (Resizing, FileSystemResizePending). */
    readonly conditions: readonly string[];
    /** Its app.kubernetes.io/part-of label ("" when it has none). */
    readonly partOf: string;
}

/** A claim as the API server returns it, reduced to what the checkpoint check reads. */
export function claimFacts(pvc: any): ClaimFacts {
    return {
        requested: String(pvc.spec?.resources?.requests?.storage ?? "0"),
        ...(pvc.status?.capacity?.storage !== undefined ? { capacity: String(pvc.status.capacity.storage) } : {}),
        storageClassName: String(pvc.spec?.storageClassName ?? ""),
        phase: String(pvc.status?.phase ?? "Pending"),
        conditions: (pvc.status?.conditions ?? []).filter((c: any) => c.status === "True").map((c: any) => String(c.type)),
        partOf: String(pvc.metadata?.labels?.["app.kubernetes.io/part-of"] ?? ""),
    };
}

/** What the first check looks at: the kubeconfig, the context, and whether the API server answered. */
export type ConnectionFacts = Pick<KubernetesFacts, "context" | "kubeconfig" | "kubeconfigMissing" | "server" | "contexts" | "version">;

export interface NamespaceFacts {
    readonly quotas: readonly any[];
    /** Pods of this project (label app.kubernetes.io/part-of=agent-rl-infra) not finished: what an `up` replaces. */
    readonly stackPods: readonly any[];
    /** Names of PersistentVolumeClaims that exist (the stack's are reused, not counted twice). */
    readonly claims: readonly string[];
}

/** The facts when the API server did not answer: the connection as found, nothing else read. */
export function unansweredFacts(conn: ConnectionFacts): KubernetesFacts {
    const nothing = { ok: false as const, error: "not read: the API server did not answer" };
    return {
        ...conn,
        nodes: nothing,
        storageClasses: nothing,
        priorityClasses: nothing,
        runtimeClasses: nothing,
        crds: nothing,
        sandboxControllers: nothing,
        jobSetControllers: nothing,
        daemonSets: nothing,
        dnsPods: nothing,
        namespaces: nothing,
    };
}
