/**
 * Settings one target does not carry out. Each is refused when a stack (or its recipe) writes it
 * for that target, so a stack file never promises what the deployment does not do; docs/reference/stack-file.md's
 * "What each target ignores" table lists the same rows (test/config/target-settings.test.ts holds them
 * equal). Defaults of these fields are not refused: they stay unused, and plan.md does not claim them.
 */
import type { TargetKind } from "./terms";

/** A setting the target does not carry out: why, and what to do instead. */
export interface IgnoredSetting {
    /** Field path in `agent-rl-infra:platform`; `*` stands for an env name. */
    readonly path: string;
    readonly target: TargetKind;
    /** What the target does instead (why the field would be a dead letter). */
    readonly why: string;
    readonly fix: string;
}

/**
 * A target field written for the other target, where the same setting lives on this one
 * (`target.gpuProduct` pins a Kubernetes node; on one Docker host the GPU the run is sized for is
 * training.gpuMemory.product). A field of the other target with no counterpart is to be removed.
 */
export const TARGET_COUNTERPARTS: Readonly<Record<TargetKind, Readonly<Record<string, string>>>> = {
    docker: { gpuProduct: "training.gpuMemory.product" },
    kubernetes: {},
};

/** The line's fix for `target.<key>`, a field of `other` written on a `kind` target. */
export function otherTargetFieldMessage(kind: TargetKind, other: TargetKind, key: string): string {
    const counterpart = TARGET_COUNTERPARTS[kind][key];
    return counterpart !== undefined
        ? `a ${other} target's field, not ${kind}'s: on ${kind} set ${counterpart} instead`
        : `a ${other} target's field, not ${kind}'s: remove it, or set target.kind: ${other}`;
}

export const IGNORED_SETTINGS: readonly IgnoredSetting[] = [
    {
        path: "training.activeDeadlineSeconds",
        target: "docker",
        why: "a Docker container has no deadline (it is a Kubernetes Job's activeDeadlineSeconds): the trainer runs until its script exits",
        fix: "remove it, and bound the run in the script (training.maxSteps) or stop it with docker stop",
    },
    {
        path: "training.backoffLimit",
        target: "docker",
        why: "the trainer container is never restarted (restart: no), so a failed run is not retried (it is a Kubernetes Job's backoffLimit)",
        fix: "remove it; after a failure start the run again (training.resumeFromCheckpoint resumes it)",
    },
    {
        path: "training.egress",
        target: "docker",
        why: "the docker target writes no egress rules (they are a Kubernetes NetworkPolicy): the trainer sits on the training network, a plain bridge with a route to the internet",
        fix: "remove it, or restrict the host's egress with its own firewall (DOCKER-USER chain)",
    },
    {
        path: "envs.*.ephemeralStorage",
        target: "docker",
        why: "the docker target sets no size on a container's writable layer (a Kubernetes ephemeral-storage limit)",
        fix: "remove it (a read-only replica's /tmp scratch is sized by scratchSize)",
    },
    {
        path: "envs.*.runtimeClassName",
        target: "docker",
        why: "a RuntimeClass is a Kubernetes object: the docker target sets no container runtime, so the replicas run under the daemon's default (runc)",
        fix: "remove it, or run the env on target.kind kubernetes with the RuntimeClass on the cluster",
    },
    {
        path: "sandboxes.runtimeClassName",
        target: "docker",
        why:
            "the docker target sets no container runtime, and gVisor (runsc) would make each container a sandbox of its own with its own network stack " +
            "(gVisor's netstack, not the network namespace Docker shares), so a sandbox could no longer reach its key-holding forwarder on loopback: the pool runs under runc",
        fix: "remove it (plan.md lists the isolation the pool has: runc, dropped capabilities, read-only root, internal network), or run the pool on Kubernetes (provider agent-sandbox), where a pod's containers share one gVisor sandbox",
    },
    {
        path: "sandboxes.priorityClassName",
        target: "docker",
        why: "a PriorityClass is Kubernetes scheduling: one Docker host does not preempt",
        fix: "remove it",
    },
    {
        path: "ingress.replicas",
        target: "docker",
        why: "the docker target runs one proxy container",
        fix: "remove it (rateLimitPerSecond is then the whole limit per key)",
    },
    {
        path: "observability.scraper",
        target: "docker",
        why: "the docker target writes no NetworkPolicy to admit a scraper (they are Kubernetes objects)",
        fix: "remove it",
    },
    {
        path: "observability.monitorLabels",
        target: "docker",
        why: "the docker target makes no PodMonitor or PrometheusRule to label (they are Prometheus Operator objects on Kubernetes)",
        fix: "remove it",
    },
    {
        path: "observability.hostPortBase",
        target: "kubernetes",
        why: "it places the metrics ports on a Docker host's loopback: on Kubernetes Prometheus scrapes the pods' metrics ports",
        fix: "remove it",
    },
    {
        path: "ingress.tls.certFile",
        target: "kubernetes",
        why: "it names a file on a Docker host: on Kubernetes the certificate comes from a Secret (tls.mode secret or cert-manager)",
        fix: "remove it and put the certificate in a kubernetes.io/tls Secret (tls.secretName)",
    },
    {
        path: "ingress.tls.keyFile",
        target: "kubernetes",
        why: "it names a file on a Docker host: on Kubernetes the key comes from a Secret (tls.mode secret or cert-manager)",
        fix: "remove it and put the key in a kubernetes.io/tls Secret (tls.secretName)",
    },
];

function isObject(v: unknown): v is Record<string, unknown> {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Concrete paths under `written` matching `pattern` (`*` matches any key) whose value is set. */
export function writtenPaths(written: unknown, pattern: string): string[] {
    const walk = (v: unknown, parts: readonly string[], at: readonly string[]): string[] => {
        if (parts.length === 0) return v === undefined ? [] : [at.join(".")];
        if (!isObject(v)) return [];
        const [head, ...rest] = parts;
        const keys = head === "*" ? Object.keys(v).sort() : [head!];
        return keys.flatMap((k) => walk(v[k], rest, [...at, k]));
    };
    return walk(written, pattern.split("."), []);
}

/** Every written setting the target ignores, each with why and the fix. `written`: the stack's config with its recipe merged. */
export function validateTargetSettings(written: unknown, target: TargetKind): string[] {
    return IGNORED_SETTINGS.filter((s) => s.target === target).flatMap((s) =>
        writtenPaths(written, s.path).map((p) => `${p}: not carried out on the ${target} target: ${s.why}: ${s.fix}`),
    );
}
