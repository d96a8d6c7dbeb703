/**
 * The per-rollout key verifier on Kubernetes (verifier.ts decides it): its admin key in a Secret (a file
 * of the verifier only, mounted read-only), a single-replica Deployment (Recreate: never two tables at once), a ClusterIP
 * Service, and a NetworkPolicy: the nginx pods on the verify port, the trainer's pods on the admin port,
 * no egress at all. The bodies are pure functions of the description (exported for tests).
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { imagePullPolicy } from "../shared/images";
import { hardenedServicePod, podsInNamespace, pullSecretRefs, restrictedContainerSecurity, tcpProbes } from "../shared/kubernetes";
import type { IngressDescription } from "./resolve";
import { VERIFIER_ADMIN_KEY_DIR, VERIFIER_ADMIN_KEY_SECRET_KEY, VERIFIER_STATE_DIR, type RolloutKeyVerifier } from "./verifier";

/** The pod volume holding the admin key (the verifier's Secret). */
const ADMIN_KEY_VOLUME = "admin-key";
/** The pod volume holding the table across container restarts (--state-file). */
const STATE_VOLUME = "state";

/** The verifier container's security: the sandbox image's non-root user, read-only root, no capabilities. */
function verifierSecurity(v: RolloutKeyVerifier) {
    return {
        runAsUser: v.runAsUser,
        runAsGroup: v.runAsUser,
        readOnlyRootFilesystem: true as const,
        allowPrivilegeEscalation: false as const,
        dropCapabilities: ["ALL"] as const,
        seccompProfile: "RuntimeDefault" as const,
        terminationGraceSeconds: 10,
    };
}

/** The verifier's pod: one container, the admin key as a read-only file from its Secret (no env var), TCP probes on the verify port. */
export function verifierPodSpec(d: IngressDescription, v: RolloutKeyVerifier): k8s.types.input.core.v1.PodSpec {
    const sec = verifierSecurity(v);
    // GET /verify without a key is 401 (not a success for an HTTP probe): a TCP check proves it accepts connections.
    return {
        ...hardenedServicePod(sec, v.podLabels),
        ...pullSecretRefs(d.imagePullSecrets),
        containers: [
            {
                name: "verifier",
                image: v.image,
                imagePullPolicy: imagePullPolicy(v.image),
                command: [...v.command],
                volumeMounts: [
                    { name: ADMIN_KEY_VOLUME, mountPath: VERIFIER_ADMIN_KEY_DIR, readOnly: true },
                    { name: STATE_VOLUME, mountPath: VERIFIER_STATE_DIR },
                ],
                ports: [
                    { name: "verify", containerPort: v.verifyPort, protocol: "TCP" },
                    { name: "admin", containerPort: v.adminPort, protocol: "TCP" },
                ],
                resources: { requests: { ...v.resources.requests }, limits: { ...v.resources.limits } },
                securityContext: restrictedContainerSecurity(sec),
                ...tcpProbes("verify"),
            },
        ],
        // 0440: root-owned, readable by the pod's fsGroup (the verifier's gid, hardenedServicePod) and no one else.
        volumes: [
            {
                name: ADMIN_KEY_VOLUME,
                secret: {
                    secretName: v.names.secret,
                    items: [{ key: VERIFIER_ADMIN_KEY_SECRET_KEY, path: VERIFIER_ADMIN_KEY_SECRET_KEY }],
                    defaultMode: 0o440,
                },
            },
            // At most 4096 rows of about 160 bytes (rollout_keys.py MAX_STATE_BYTES is 2 MiB).
            { name: STATE_VOLUME, emptyDir: { sizeLimit: "4Mi" } },
        ],
    };
}

/** One replica, replaced with Recreate: the table of live keys lives in exactly one process. */
export function verifierDeploymentSpec(d: IngressDescription, v: RolloutKeyVerifier): k8s.types.input.apps.v1.DeploymentSpec {
    return {
        replicas: 1,
        selector: { matchLabels: { ...v.podLabels } },
        strategy: { type: "Recreate" },
        template: { metadata: { labels: { ...v.podLabels } }, spec: verifierPodSpec(d, v) },
    };
}

export function verifierServiceSpec(v: RolloutKeyVerifier): k8s.types.input.core.v1.ServiceSpec {
    return {
        type: "ClusterIP",
        selector: { ...v.podLabels },
        ports: [
            { name: "verify", port: v.verifyPort, targetPort: "verify", protocol: "TCP" },
            { name: "admin", port: v.adminPort, targetPort: "admin", protocol: "TCP" },
        ],
    };
}

/** In: nginx's pods on the verify port, the trainer's pods on the admin port. Out: nothing (it answers from memory). */
export function verifierNetworkPolicySpec(d: IngressDescription, v: RolloutKeyVerifier): k8s.types.input.networking.v1.NetworkPolicySpec {
    return {
        podSelector: { matchLabels: { ...v.podLabels } },
        policyTypes: ["Ingress", "Egress"],
        ingress: [
            { from: [podsInNamespace(d.names.namespace, d.podLabels)], ports: [{ protocol: "TCP", port: v.verifyPort }] },
            { from: [podsInNamespace(v.trainer.namespace, v.trainer.podLabels)], ports: [{ protocol: "TCP", port: v.adminPort }] },
        ],
        egress: [],
    };
}

/** nginx's egress rule to the verifier (added to the ingress's NetworkPolicy). */
export function verifierEgressRule(d: IngressDescription, v: RolloutKeyVerifier): k8s.types.input.networking.v1.NetworkPolicyEgressRule {
    return { to: [podsInNamespace(d.names.namespace, v.podLabels)], ports: [{ protocol: "TCP", port: v.verifyPort }] };
}

/** Registers the verifier's objects as children of `parent`, named `${name}-rollout-keys-<role>`; returns what nginx waits for. */
export function registerKubernetesVerifier(
    name: string,
    d: IngressDescription,
    v: RolloutKeyVerifier,
    adminKey: pulumi.Output<string>,
    meta: (objName: string) => k8s.types.input.meta.v1.ObjectMeta,
    parent: pulumi.Resource,
): pulumi.Resource[] {
    const child = { parent };
    const secret = new k8s.core.v1.Secret(
        `${name}-rollout-keys-admin`,
        { metadata: meta(v.names.secret), type: "Opaque", stringData: { [VERIFIER_ADMIN_KEY_SECRET_KEY]: pulumi.secret(adminKey) } },
        child,
    );
    const policy = new k8s.networking.v1.NetworkPolicy(
        `${name}-rollout-keys-network`,
        { metadata: meta(v.names.networkPolicy), spec: verifierNetworkPolicySpec(d, v) },
        child,
    );
    const deployment = new k8s.apps.v1.Deployment(
        `${name}-rollout-keys-deployment`,
        { metadata: meta(v.names.deployment), spec: verifierDeploymentSpec(d, v) },
        { ...child, dependsOn: [secret, policy] },
    );
    const service = new k8s.core.v1.Service(`${name}-rollout-keys-service`, { metadata: meta(v.names.service), spec: verifierServiceSpec(v) }, child);
    return [deployment, service];
}
