/**
 * Every object name and in-cluster address, computed up front from the stack, the run id
 * and the role (DNS-1123, at most 63 characters), so two stacks or two runs never collide,
 * URLs are known at plan time, and components that need each other's addresses (the
 * ingress and the training node) do not wait for each other.
 */
import { createHash } from "node:crypto";
import type { PlatformConfig } from "./types";
import { teamNamespaces } from "./tenancy";

export const MAX_NAME = 63;

/** Joins parts into a DNS-1123 label; if longer than `max`, keeps a prefix and a stable hash. */
export function dnsName(parts: ReadonlyArray<string>, max = MAX_NAME): string {
    const joined = parts
        .join("-")
        .toLowerCase()
        .replace(/[^a-z0-9-]+/g, "-")
        .replace(/-+/g, "-")
        .replace(/^-+|-+$/g, "");
    if (joined.length <= max) return joined;
    const hash = createHash("sha256").update(joined).digest("hex").slice(0, 8);
    return `${joined.slice(0, max - 9).replace(/-+$/, "")}-${hash}`;
}

export interface EnvNames {
    /** StatefulSet of the env replicas (Kubernetes) / container prefix (Docker). */
    readonly replicas: string;
    /** Headless Service giving each replica a stable DNS name. */
    readonly headless: string;
    /** The session-aware router (Deployment / container). */
    readonly router: string;
    /** The router's ClusterIP Service (what the trainer connects to). */
    readonly routerService: string;
    /** Base URL of the env for the trainer (http://...). */
    readonly url: string;
}

export interface PlatformNames {
    /** Prefix of everything this stack creates. */
    readonly prefix: string;
    /** Per-role namespaces (Kubernetes). */
    readonly namespaces: { readonly training: string; readonly ingress: string; readonly envs: string; readonly sandboxes: string };
    /** Kubernetes: the image pull Secret (kubernetes.io/dockerconfigjson) in each of the stack's namespaces, made from the registryAuth secret. */
    readonly pullSecret: string;
    /** Docker networks: the private training network. */
    readonly networks: { readonly training: string };
    readonly training: {
        /** The run's Job (a new run is a new Job) / the trainer container. */
        readonly job: string;
        /** vLLM container (Docker) / sidecar name. */
        readonly vllm: string;
        /** ClusterIP Service in front of vLLM for the ingress (black box only). */
        readonly vllmService: string;
        /** The trainer's ServiceAccount. */
        readonly serviceAccount: string;
        /** Kubernetes Secret holding HF_TOKEN. */
        readonly hfSecret: string;
        /** Kubernetes Secret holding the rollout-key verifier's admin key for the trainer (agent-sandbox pools). */
        readonly rolloutAdminKeySecret: string;
        /** Prefix of the Kubernetes Secret of each referenced `envSecret-<name>` (`<prefix>-<name>`). */
        readonly envSecretPrefix: string;
        /** Model cache volume (shared by runs of the stack). */
        readonly modelCache: string;
        /** Checkpoint volume (shared by runs so a new run can resume). */
        readonly checkpoints: string;
        /** The address the ingress proxies to (host:port). */
        readonly vllmUpstream: string;
    };
    readonly ingress: {
        readonly deployment: string;
        readonly service: string;
        readonly keysSecret: string;
        readonly config: string;
        /** cert-manager Certificate and the TLS Secret it writes (tls.mode cert-manager). */
        readonly certificate: string;
        readonly tlsSecret: string;
        /** URL sandboxes use: the proxy's in-cluster address (their egress policy admits the proxy pods, not a public load balancer). */
        readonly sandboxUrl: string;
        /** The proxy's in-cluster (Docker: in-network) URL. */
        readonly inClusterUrl: string;
        /** The public URL when the proxy is exposed with a host. */
        readonly publicUrl?: string;
    };
    readonly sandboxes: {
        readonly template: string;
        readonly warmPool: string;
        readonly runLabel: string;
        readonly keySecret: string;
        /** The Harbor path: one SandboxTemplate + SandboxWarmPool per task image, named from the run's and the image's key (empty: off). */
        readonly taskPools: ReadonlyArray<{ readonly key: string; readonly template: string; readonly warmPool: string }>;
    };
    readonly envs: Readonly<Record<string, EnvNames>>;
}

/** Label key carrying the run id on every sandbox (pods, claims, containers). */
export const RUN_LABEL = "agentrl.dev/run";

/** vLLM's HTTP port in every layout (`vllm serve` default). */
export const VLLM_PORT = 8000;
/** Port the ingress proxy listens on without TLS. */
export const INGRESS_HTTP_PORT = 8080;
/** Port the ingress proxy listens on with TLS. */
export const INGRESS_HTTPS_PORT = 8443;

export function platformNames(c: PlatformConfig): PlatformNames {
    const prefix = c.target.kind === "kubernetes" ? (c.target.namespacePrefix ?? dnsName(["arl", c.stack])) : dnsName(["arl", c.stack], 40);
    const k8s = c.target.kind === "kubernetes";
    // A team's run stacks share the team's namespaces (the cluster stack makes them: tenancy.ts).
    const team = c.target.kind === "kubernetes" ? c.target.team : undefined;
    const ns =
        team !== undefined
            ? teamNamespaces(team)
            : {
                  training: dnsName([prefix, "training"]),
                  ingress: dnsName([prefix, "ingress"]),
                  envs: dnsName([prefix, "envs"]),
                  sandboxes: dnsName([prefix, "sandboxes"]),
              };
    // On Docker every container shares one daemon, and a team's namespaces hold several run stacks,
    // so there names carry the stack prefix.
    const local = (...parts: string[]) => (k8s && team === undefined ? dnsName(parts) : dnsName([prefix, ...parts]));
    const svc = (name: string, namespace: string) => `${name}.${namespace}.svc.cluster.local`;
    const vllmService = local("vllm", c.runId);
    const vllmUpstream = k8s ? `${svc(vllmService, ns.training)}:${VLLM_PORT}` : `${local("vllm", c.runId)}:${VLLM_PORT}`;
    const ingressService = local("vllm-ingress");
    const scheme = c.ingress.tls.mode === "none" ? "http" : "https";
    const ingressPort = scheme === "https" ? INGRESS_HTTPS_PORT : INGRESS_HTTP_PORT;
    // In-cluster sandboxes (and Docker ones, on the internal network) always take the proxy's
    // own address: their egress policy admits the proxy pods, not a public load balancer.
    const inClusterUrl = k8s ? `${scheme}://${svc(ingressService, ns.ingress)}:${ingressPort}` : `${scheme}://${ingressService}:${ingressPort}`;
    const envs: Record<string, EnvNames> = {};
    for (const e of c.envs) {
        const routerService = local("env", e.name);
        envs[e.name] = {
            replicas: local("env", e.name, "replica"),
            headless: local("env", e.name, "replicas"),
            router: local("env", e.name, "router"),
            routerService,
            url: e.external ? e.external.url : k8s ? `http://${svc(routerService, ns.envs)}:${e.port}` : `http://${routerService}:${e.port}`,
        };
    }
    return {
        prefix,
        namespaces: ns,
        pullSecret: dnsName([prefix, "registry-pull"]),
        networks: { training: dnsName([prefix, "training"]) },
        training: {
            job: local("train", c.runId),
            vllm: local("vllm", c.runId, "server"),
            vllmService,
            serviceAccount: local("trainer"),
            hfSecret: local("hf-token"),
            rolloutAdminKeySecret: local("trainer", "rollout-admin-key"),
            envSecretPrefix: local("env-secret"),
            modelCache: local("model-cache"),
            checkpoints: local("checkpoints"),
            vllmUpstream,
        },
        ingress: {
            deployment: ingressService,
            service: ingressService,
            keysSecret: local("vllm-ingress-keys"),
            config: local("vllm-ingress-config"),
            certificate: local("vllm-ingress"),
            tlsSecret: local("vllm-ingress-tls"),
            sandboxUrl: inClusterUrl,
            inClusterUrl,
            publicUrl: c.ingress.exposure !== "cluster" && c.ingress.host ? `https://${c.ingress.host}` : undefined,
        },
        sandboxes: {
            template: local("sandbox", c.runId),
            warmPool: local("sandbox-pool", c.runId),
            runLabel: RUN_LABEL,
            keySecret: local("sandbox-key"),
            taskPools: (c.harbor?.taskImages ?? []).map((t) => ({
                key: t.key,
                template: local("sandbox", c.runId, t.key),
                warmPool: local("sandbox-pool", c.runId, t.key),
            })),
        },
        envs,
    };
}

/** Names longer than 63 characters or not DNS-1123 (a guard on the table above). */
export function validateNames(n: PlatformNames): string[] {
    const bad: string[] = [];
    const visit = (path: string, v: unknown) => {
        if (typeof v === "string") {
            if (path.endsWith("url") || path.endsWith("Url") || path.endsWith("Upstream") || path.endsWith("runLabel")) return;
            if (v.length > MAX_NAME || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(v)) bad.push(`${path}: '${v}' is not a DNS-1123 label of at most 63 characters`);
        } else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) visit(path ? `${path}.${k}` : k, x);
    };
    visit("", n);
    return bad;
}

/** Roles whose pods other components select (NetworkPolicies, Services). */
export type PodRole = "trainer" | "vllm" | "vllm-ingress" | "rollout-keys" | "env-replica" | "env-router" | "sandbox";

/**
 * The one object that makes both a selector and the pod labels, so they cannot drift
 * apart. `instance` is the owning object's name (Job, Deployment, StatefulSet, pool).
 */
export function podLabels(role: PodRole, instance: string): Record<string, string> {
    return { "app.kubernetes.io/name": role, "app.kubernetes.io/instance": instance, "app.kubernetes.io/part-of": "agent-rl-infra" };
}

/**
 * The pods that serve vLLM on port 8000: the trainer's pod on one node (vLLM runs in it), the JobSet's
 * vLLM pod with training.nodes > 1. The ingress proxies to them and the training node selects them.
 */
export function vllmPodLabels(c: Pick<PlatformConfig, "training">, n: Pick<PlatformNames, "training">): Record<string, string> {
    return c.training.nodes > 1 ? podLabels("vllm", n.training.vllm) : podLabels("trainer", n.training.job);
}
