/**
 * One env on Kubernetes: a StatefulSet of OpenEnv replicas behind a headless Service (stable
 * per-pod DNS names), a PodDisruptionBudget, and the session-aware router: its nginx.conf in
 * a ConfigMap, a hardened Deployment (strategy Recreate), a PodDisruptionBudget and a ClusterIP
 * Service with ClientIP affinity, plus NetworkPolicies (replicas admit only the routers, routers
 * only the trainer pods). Nine objects whatever the replica count: the router re-resolves the
 * pod names through cluster DNS (`server ... resolve`), so no Service per replica is needed.
 *
 * The object bodies are pure functions of the description (exported for tests); the resources
 * are registered by `registerKubernetesEnvSpace`.
 */
import * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import { RESPONDER_CONFIG_FILE, RESPONDER_SCRIPT_FILE } from "./responder";
import { REPLICA_SCRATCH_PATH, ROUTER_CHECKSUM_ANNOTATION, type DeployedEnvDescription, type EnvProbe, type ExecProbeTiming } from "./model";
import {
    clusterDnsEgress,
    hardenedServicePod,
    metricsSidecarContainer,
    metricsSidecarVolumes,
    pullSecretRefs,
    NAMESPACE_NAME_LABEL,
    publicInternetEgress,
    restrictedContainerSecurity,
    scrapeIngressRule,
} from "../shared/kubernetes";

/** Labels on every object of the env (the pod labels are the selectors and come from podLabels()). */
function objectLabels(d: DeployedEnvDescription): Record<string, string> {
    return { "app.kubernetes.io/part-of": "agent-rl-infra", "app.kubernetes.io/component": "env", "agentrl.dev/env": d.name };
}

function httpProbe(p: EnvProbe): k8s.types.input.core.v1.Probe {
    return { httpGet: { path: p.path, port: p.port }, periodSeconds: p.periodSeconds, timeoutSeconds: p.timeoutSeconds, failureThreshold: p.failureThreshold };
}

function execProbe(command: readonly string[], t: ExecProbeTiming): k8s.types.input.core.v1.Probe {
    return { exec: { command: [...command] }, periodSeconds: t.periodSeconds, timeoutSeconds: t.timeoutSeconds, failureThreshold: t.failureThreshold };
}

/** The replicas' pod template body. */
export function replicaPodSpec(d: DeployedEnvDescription): k8s.types.input.core.v1.PodSpec {
    const r = d.replicas;
    const sec = r.security;
    const resources = { cpu: r.cpu, memory: r.memory, "ephemeral-storage": sec.ephemeralStorage };
    // observability: the session counter beside the server (same network namespace: it counts the server's connections).
    const m = d.metrics;
    const volumes = [
        ...(sec.readOnlyRootFilesystem ? [{ name: "scratch", emptyDir: { sizeLimit: sec.scratchSize } }] : []),
        ...(m ? metricsSidecarVolumes([m.sessions], m.configMap) : []),
    ];
    return {
        ...pullSecretRefs(d.imagePullSecrets),
        ...(sec.runtimeClassName !== undefined ? { runtimeClassName: sec.runtimeClassName } : {}),
        ...(volumes.length > 0 ? { volumes } : {}),
        // An env server never talks to the API server.
        automountServiceAccountToken: false,
        enableServiceLinks: false,
        terminationGracePeriodSeconds: r.terminationGraceSeconds,
        securityContext: {
            ...(sec.runAsNonRoot ? { runAsNonRoot: true } : {}),
            // Non-root (envs.<name>.runAsNonRoot, default for envs that run model code): fsGroup makes the scratch emptyDir writable for that uid.
            ...(sec.runAsUser !== undefined ? { runAsUser: sec.runAsUser, runAsGroup: sec.runAsUser, fsGroup: sec.runAsUser } : {}),
            seccompProfile: { type: sec.seccompProfile },
        },
        // Replicas on different nodes when possible, so one node drain costs at most the headroom.
        topologySpreadConstraints: [
            { maxSkew: 1, topologyKey: "kubernetes.io/hostname", whenUnsatisfiable: "ScheduleAnyway", labelSelector: { matchLabels: { ...r.podLabels } } },
        ],
        containers: [
            {
                name: "env",
                image: r.image,
                imagePullPolicy: r.imagePullPolicy,
                ports: [{ name: "http", containerPort: r.port, protocol: "TCP" }],
                env: [
                    ...Object.entries(r.env).map(([name, value]): [string, k8s.types.input.core.v1.EnvVar] => [name, { name, value }]),
                    // The Secret's value never enters the program: the kubelet reads it (settings' secretKeyRef).
                    ...Object.entries(r.secretEnv).map(([name, ref]): [string, k8s.types.input.core.v1.EnvVar] => [
                        name,
                        { name, valueFrom: { secretKeyRef: { name: ref.name, key: ref.key } } },
                    ]),
                ]
                    .sort(([a], [b]) => a.localeCompare(b))
                    .map(([, v]) => v),
                resources: { requests: resources, limits: resources },
                startupProbe: httpProbe(r.probes.startup),
                readinessProbe: httpProbe(r.probes.readiness),
                livenessProbe: httpProbe(r.probes.liveness),
                // OpenEnv images run as root unless runAsNonRoot (the default for envs that run model code); either way no privilege gain and no capabilities.
                ...(sec.readOnlyRootFilesystem ? { volumeMounts: [{ name: "scratch", mountPath: REPLICA_SCRATCH_PATH }] } : {}),
                securityContext: {
                    ...(sec.runAsNonRoot ? { runAsNonRoot: true } : {}),
                    readOnlyRootFilesystem: sec.readOnlyRootFilesystem,
                    allowPrivilegeEscalation: sec.allowPrivilegeEscalation,
                    privileged: false,
                    capabilities: { drop: [...sec.dropCapabilities] },
                    seccompProfile: { type: sec.seccompProfile },
                },
            },
            ...(m ? [metricsSidecarContainer(m.sessions)] : []),
        ],
    };
}

/** form annotations: a pod template's prometheus.io/* annotations (none otherwise). */
function scrapeAnnotationsOf(d: DeployedEnvDescription, role: string): { annotations?: Record<string, string> } {
    const a = d.metrics?.podAnnotations[role];
    return a !== undefined && Object.keys(a).length > 0 ? { annotations: { ...a } } : {};
}

/** The StatefulSet body: Parallel start (replicas are independent), stable names through the headless Service. */
export function replicaStatefulSetSpec(d: DeployedEnvDescription): k8s.types.input.apps.v1.StatefulSetSpec {
    const r = d.replicas;
    return {
        serviceName: r.headlessService,
        replicas: r.count,
        podManagementPolicy: "Parallel",
        selector: { matchLabels: { ...r.podLabels } },
        template: { metadata: { labels: { ...r.podLabels, ...d.metrics?.stackLabels }, ...scrapeAnnotationsOf(d, "env-replica") }, spec: replicaPodSpec(d) },
    };
}

/** Seconds one replica may take to be replaced and Ready again during a rolling update. */
export const REPLICA_ROLL_SECONDS = 60;

/**
 * The provider's await budget for the replicas: creation starts every pod at once (Parallel),
 * but a rolling update replaces them one at a time, so its budget grows with the count
 * (a 65-replica env would otherwise hit the provider's 10-minute default halfway).
 */
export function replicaRolloutTimeouts(replicas: number): { create: string; update: string } {
    return { create: "10m", update: `${10 + Math.ceil((replicas * REPLICA_ROLL_SECONDS) / 60)}m` };
}

/** The headless Service: one DNS name per ready pod (`<sts>-<i>.<headless>.<ns>.svc.cluster.local`), the router's upstream addresses. */
export function headlessServiceSpec(d: DeployedEnvDescription): k8s.types.input.core.v1.ServiceSpec {
    return {
        clusterIP: "None",
        // Only ready replicas get a DNS record, so the router never sends a session to a starting one.
        publishNotReadyAddresses: false,
        selector: { ...d.replicas.podLabels },
        ports: [{ name: "http", port: d.replicas.port, targetPort: d.replicas.port, protocol: "TCP" }],
    };
}

/** The router's pod template body: non-root, read-only root FS, config from the ConfigMap, runDir on an emptyDir. */
export function routerPodSpec(d: DeployedEnvDescription): k8s.types.input.core.v1.PodSpec {
    const r = d.router;
    const sec = r.security;
    const resources = { cpu: r.cpu, memory: r.memory };
    return {
        ...hardenedServicePod(sec, r.podLabels),
        ...pullSecretRefs(d.imagePullSecrets),
        containers: [
            {
                name: "router",
                image: r.image,
                imagePullPolicy: r.imagePullPolicy,
                // Setting command skips the image's entrypoint scripts, which would write to /etc/nginx (ROUTER.md).
                command: [...r.command],
                ports: [{ name: "http", containerPort: r.port, protocol: "TCP" }],
                resources: { requests: resources, limits: resources },
                readinessProbe: httpProbe(r.probes.readiness),
                livenessProbe: httpProbe(r.probes.liveness),
                securityContext: restrictedContainerSecurity(sec),
                volumeMounts: [
                    { name: "config", mountPath: r.configDir, readOnly: true },
                    { name: "run", mountPath: r.runDir },
                ],
            },
            {
                // At capacity nginx proxies WS /ws here (loopback): OpenEnv's CAPACITY_REACHED frame with the fix (ROUTER.md).
                // The env's own image for python3; same uid and hardening as nginx, nothing writable.
                name: "capacity-responder",
                image: r.responder.image,
                imagePullPolicy: r.responder.imagePullPolicy,
                command: [...r.responder.command],
                // observability: the responder's own metrics port (its CAPACITY_REACHED counter).
                ...(d.metrics ? { ports: [{ name: d.metrics.router.name, containerPort: d.metrics.router.port, protocol: "TCP" }] } : {}),
                resources: { requests: { cpu: r.responder.cpu, memory: r.responder.memory }, limits: { cpu: r.responder.cpu, memory: r.responder.memory } },
                // exec: it listens on loopback, which the kubelet's httpGet (to the pod's address) cannot reach.
                readinessProbe: execProbe(r.responder.probes.command, r.responder.probes.readiness),
                livenessProbe: execProbe(r.responder.probes.command, r.responder.probes.liveness),
                securityContext: restrictedContainerSecurity(sec),
                volumeMounts: [{ name: "config", mountPath: r.configDir, readOnly: true }],
            },
        ],
        volumes: [
            { name: "config", configMap: { name: d.names.routerConfig, defaultMode: 0o444 } },
            { name: "run", emptyDir: { sizeLimit: sec.runDirSizeLimit } },
        ],
    };
}

/**
 * The router Deployment body. Recreate, never RollingUpdate: each nginx counts only its own
 * sessions, so an old and a new router side by side would each fill a replica to k (ROUTER.md).
 * The config checksum on the pod template replaces the pods when the config changes; nginx is
 * never reloaded in place (a reload resets the session counts).
 */
export function routerDeploymentSpec(d: DeployedEnvDescription): k8s.types.input.apps.v1.DeploymentSpec {
    const r = d.router;
    return {
        replicas: r.replicas,
        selector: { matchLabels: { ...r.podLabels } },
        strategy: { type: "Recreate" },
        template: {
            metadata: {
                labels: { ...r.podLabels, ...d.metrics?.stackLabels },
                annotations: { ...scrapeAnnotationsOf(d, "env-router").annotations, [ROUTER_CHECKSUM_ANNOTATION]: r.configChecksum },
            },
            spec: routerPodSpec(d),
        },
    };
}

/** pulumi-kubernetes' override of its await logic (provider/pkg/metadata/annotations.go, AnnotationWaitFor). */
export const WAIT_FOR_ANNOTATION = "pulumi.com/waitFor";

/**
 * What `pulumi up` waits for on the router Deployment: every router of the current template
 * available. Needed because the provider's own Deployment await (provider/pkg/await/deployment.go)
 * passes a Recreate rollout at once: the Deployment controller first scales the old ReplicaSet to 0
 * without creating the new one, so the revision annotation is still the old one, the old
 * ReplicaSet's 0 replicas count as all ready and the Available / NewReplicaSetAvailable conditions
 * are the old ones; `up` returned while 0 of 2 routers were Ready. A JSONPath condition is checked
 * only once status.observedGeneration has caught up (provider/pkg/await/condition/jsonpath.go), and
 * with Recreate updatedReplicas = N and availableReplicas = N means N new routers serving and no old one.
 */
export function routerAwaitAnnotations(d: DeployedEnvDescription): Record<string, string> {
    const n = d.router.replicas;
    return { [WAIT_FOR_ANNOTATION]: JSON.stringify([`jsonpath={.status.updatedReplicas}=${n}`, `jsonpath={.status.availableReplicas}=${n}`]) };
}

/**
 * The router Service: the env URL's host. ClientIP affinity pins all sessions of one trainer pod
 * (one IP) to one router, so that router's per-replica cap of k is exact. With several trainer
 * pods (multi-node, or two runs sharing the env) two routers can each fill a replica to k and the
 * replica answers the excess with CAPACITY_REACHED (ROUTER.md, "Two router replicas").
 */
export function routerServiceSpec(d: DeployedEnvDescription): k8s.types.input.core.v1.ServiceSpec {
    const r = d.router;
    return {
        type: "ClusterIP",
        selector: { ...r.podLabels },
        ports: [{ name: "http", port: r.port, targetPort: "http", protocol: "TCP" }],
        sessionAffinity: "ClientIP",
        sessionAffinityConfig: { clientIP: { timeoutSeconds: r.affinityTimeoutSeconds } },
    };
}

/** Replicas: maxUnavailable 1; the headroom replica absorbs the one a node drain takes. */
export function replicaDisruptionBudgetSpec(d: DeployedEnvDescription): k8s.types.input.policy.v1.PodDisruptionBudgetSpec {
    return { maxUnavailable: 1, selector: { matchLabels: { ...d.replicas.podLabels } } };
}

/** Routers: one of the two always up. */
export function routerDisruptionBudgetSpec(d: DeployedEnvDescription): k8s.types.input.policy.v1.PodDisruptionBudgetSpec {
    return { minAvailable: 1, selector: { matchLabels: { ...d.router.podLabels } } };
}

/** Replicas admit only the router pods, on the env port; their egress stays open (some envs download data). */
export function replicaNetworkPolicySpec(d: DeployedEnvDescription): k8s.types.input.networking.v1.NetworkPolicySpec {
    return {
        podSelector: { matchLabels: { ...d.replicas.podLabels } },
        policyTypes: ["Ingress", "Egress"],
        ingress: [
            { from: [{ podSelector: { matchLabels: { ...d.router.podLabels } } }], ports: [{ protocol: "TCP", port: d.replicas.port }] },
            // observability: the scraper on the session counter's port alone.
            ...(d.metrics ? [scrapeIngressRule(d.metrics.scraper, [d.metrics.sessions.port])] : []),
        ],
        // Replicas may run model-written code: DNS, and the public internet only where the env needs
        // data (never the API server, the metadata service, vLLM or any other pod).
        egress: [clusterDnsEgress(d.dns), ...(d.replicas.security.egress === "internet" ? [publicInternetEgress([])] : [])],
    };
}

/**
 * Routers admit only the trainer pods (any run: selected by role and project, not by the Job name,
 * which carries the run id) on the env port; they may reach only cluster DNS (the resolver) and the
 * replicas (pod port: NetworkPolicy sees traffic after a Service's DNAT).
 */
export function routerNetworkPolicySpec(d: DeployedEnvDescription): k8s.types.input.networking.v1.NetworkPolicySpec {
    return {
        podSelector: { matchLabels: { ...d.router.podLabels } },
        policyTypes: ["Ingress", "Egress"],
        ingress: [
            {
                from: [
                    {
                        namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: d.trainer.namespace } },
                        podSelector: { matchLabels: { ...d.trainer.podLabels } },
                    },
                ],
                ports: [{ protocol: "TCP", port: d.router.port }],
            },
            // observability: the scraper on the responder's metrics port alone.
            ...(d.metrics ? [scrapeIngressRule(d.metrics.scraper, [d.metrics.router])] : []),
        ],
        egress: [
            clusterDnsEgress(d.dns),
            { to: [{ podSelector: { matchLabels: { ...d.replicas.podLabels } } }], ports: [{ protocol: "TCP", port: d.replicas.port }] },
        ],
    };
}

export interface KubernetesEnvArgs {
    readonly description: DeployedEnvDescription;
    /** Namespace of every object (the Platform's envs namespace Output, so the objects wait for it). */
    readonly namespace: pulumi.Input<string>;
}

export interface KubernetesEnvResources {
    readonly statefulSet: k8s.apps.v1.StatefulSet;
    readonly routerDeployment: k8s.apps.v1.Deployment;
    readonly routerService: k8s.core.v1.Service;
}

/** Registers the env's Kubernetes objects as children of `parent`, named `${name}-<role>`; the count does not depend on the replicas. */
export function registerKubernetesEnvSpace(name: string, args: KubernetesEnvArgs, parent: pulumi.Resource): KubernetesEnvResources {
    const d = args.description;
    const child = { parent };
    const labels = objectLabels(d);
    const meta = (objName: string) => ({ name: objName, namespace: args.namespace, labels });

    // Lock the pods down before they exist.
    const replicaPolicy = new k8s.networking.v1.NetworkPolicy(
        `${name}-replica-network`,
        { metadata: meta(d.names.replicaNetworkPolicy), spec: replicaNetworkPolicySpec(d) },
        child,
    );
    const routerPolicy = new k8s.networking.v1.NetworkPolicy(
        `${name}-router-network`,
        { metadata: meta(d.names.routerNetworkPolicy), spec: routerNetworkPolicySpec(d) },
        child,
    );

    // observability: the session counter's program, mounted by every replica.
    const m = d.metrics;
    const metricsConfig = m
        ? new k8s.core.v1.ConfigMap(
              `${name}-metrics`,
              { metadata: meta(m.configMap), data: Object.fromEntries(m.sessions.files.map((f) => [f.file, f.text])) },
              child,
          )
        : undefined;
    const headless = new k8s.core.v1.Service(`${name}-headless`, { metadata: meta(d.replicas.headlessService), spec: headlessServiceSpec(d) }, child);
    const statefulSet = new k8s.apps.v1.StatefulSet(
        `${name}-replicas`,
        { metadata: meta(d.replicas.name), spec: replicaStatefulSetSpec(d) },
        { ...child, dependsOn: [headless, replicaPolicy, ...(metricsConfig ? [metricsConfig] : [])], customTimeouts: replicaRolloutTimeouts(d.replicas.count) },
    );
    new k8s.policy.v1.PodDisruptionBudget(
        `${name}-replica-disruption-budget`,
        { metadata: meta(d.names.replicaDisruptionBudget), spec: replicaDisruptionBudgetSpec(d) },
        child,
    );

    const config = new k8s.core.v1.ConfigMap(
        `${name}-router-config`,
        {
            metadata: meta(d.names.routerConfig),
            data: {
                "nginx.conf": d.router.configText,
                [RESPONDER_SCRIPT_FILE]: d.router.responder.scriptText,
                [RESPONDER_CONFIG_FILE]: d.router.responder.configText,
                ...Object.fromEntries(d.router.responder.modules.map((m) => [m.file, m.text])),
            },
        },
        child,
    );
    // The router needs neither the replicas nor their DNS names to start (`resolve` tolerates missing names).
    const routerDeployment = new k8s.apps.v1.Deployment(
        `${name}-router`,
        { metadata: { ...meta(d.router.name), annotations: routerAwaitAnnotations(d) }, spec: routerDeploymentSpec(d) },
        { ...child, dependsOn: [config, routerPolicy] },
    );
    new k8s.policy.v1.PodDisruptionBudget(
        `${name}-router-disruption-budget`,
        { metadata: meta(d.names.routerDisruptionBudget), spec: routerDisruptionBudgetSpec(d) },
        child,
    );
    const routerService = new k8s.core.v1.Service(`${name}-router-service`, { metadata: meta(d.router.service), spec: routerServiceSpec(d) }, child);
    return { statefulSet, routerDeployment, routerService };
}
