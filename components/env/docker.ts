/**
 * One env on a Docker host: one container per replica (`<replicas>-<i>`) and one router
 * container (named like the env URL's host). Nothing is published on the host but, with
 * observability on, the router's metrics ports on 127.0.0.1 (docker-metrics.ts says why the
 * replicas' session counters are relayed through the router). Docker has no
 * Service to hide the replicas behind, so the resource count grows with the replicas.
 *
 * Networks, mirroring the Kubernetes NetworkPolicies (kubernetes.ts): the replicas run
 * model-written code, and vLLM listens on all interfaces with its dev-mode weight routes open
 * (black box), so the replicas never join the training network. They sit alone with their
 * router on the env's own network (`replicaNetwork`); the router, and only the router, is on
 * the training network too, where the trainer reaches it (the trainer shares vLLM's network
 * namespace, so vLLM itself must stay off the env network: the replicas could reach it there).
 * dockerd drops traffic between two bridge networks (its DOCKER-ISOLATION chains), so a replica
 * reaches neither vLLM, nor the ingress, nor another env; test/stack/docker-lifecycle.test.ts shows
 * it on a real dockerd. The env network follows envs.<name>.egress as on Kubernetes: `dns` (the
 * catalog's default for envs that run model-written code) makes it `internal`, with no route out;
 * `internet` a plain bridge (some envs download data at start).
 *
 * The router resolves the replica containers through Docker's embedded DNS (127.0.0.11), which
 * answers names of every network the router is on, and re-resolves them (`server ... resolve`),
 * so a recreated replica is found again.
 */
import * as docker from "@pulumi/docker";
import type * as pulumi from "@pulumi/pulumi";
import { REPLICA_SCRATCH_PATH, ROUTER_CHECKSUM_ANNOTATION, type DeployedEnvDescription, type EnvProbe } from "./model";
import { dockerCpus, dockerMemoryMiB } from "../shared/quantity";
import { metricsPortsOnly, registerDockerMetricsSidecar } from "../shared/docker-metrics";
import { replicaMetricsRelay } from "./docker-metrics";

export interface DockerEnvArgs {
    readonly description: DeployedEnvDescription;
    /** The private training network (created by the Platform): the router's side the trainer reaches. */
    readonly network: pulumi.Input<string>;
}

export interface DockerEnvResources {
    /** The env's own network: its replicas and its router. */
    readonly network: docker.Network;
    readonly replicas: docker.Container[];
    readonly router: docker.Container;
    /** The capacity responder, in the router container's network namespace. */
    readonly responder: docker.Container;
    /** observability: each replica's session counter (in its network namespace) and their relay (in the router's). */
    readonly metrics: docker.Container[];
}

/** A replica's health check: python3 is in every OpenEnv image (FastAPI server); curl is not guaranteed. */
export function replicaHealthcheck(startup: EnvProbe, liveness: EnvProbe): docker.types.input.ContainerHealthcheck {
    return {
        tests: [
            "CMD",
            "python3",
            "-c",
            `import urllib.request; urllib.request.urlopen('http://127.0.0.1:${liveness.port}${liveness.path}', timeout=${liveness.timeoutSeconds})`,
        ],
        interval: `${startup.periodSeconds * 2}s`,
        timeout: `${liveness.timeoutSeconds}s`,
        retries: liveness.failureThreshold,
        startPeriod: `${startup.periodSeconds * startup.failureThreshold}s`,
    };
}

/** The router's health check on its own route: busybox wget in the alpine images, curl in the Debian ones. */
export function routerHealthcheck(p: EnvProbe): docker.types.input.ContainerHealthcheck {
    const url = `http://127.0.0.1:${p.port}${p.path}`;
    return {
        tests: ["CMD-SHELL", `if command -v wget >/dev/null 2>&1; then wget -q -O /dev/null ${url}; else curl -fsS -o /dev/null ${url}; fi`],
        interval: `${p.periodSeconds}s`,
        timeout: `${p.timeoutSeconds}s`,
        retries: p.failureThreshold,
        startPeriod: "5s",
    };
}

const HARDENING = { capabilities: { drops: ["ALL"] }, securityOpts: ["no-new-privileges:true"], privileged: false };

type Child = { readonly parent: pulumi.Resource };

/** Docker labels of a container: the env component plus the given pod labels. */
function containerLabels(podLabels: Readonly<Record<string, string>>): docker.types.input.ContainerLabel[] {
    return [{ label: "app.kubernetes.io/component", value: "env" }, ...Object.entries(podLabels).map(([label, value]) => ({ label, value }))];
}

/**
 * The env's own network: replicas and their router only (see the top of this file). Egress `dns`
 * (envs that run model-written code): an internal network, no route out; `internet`: a plain bridge.
 */
function envNetwork(name: string, d: DeployedEnvDescription, child: Child): docker.Network {
    return new docker.Network(
        `${name}-network`,
        {
            name: d.replicaNetwork,
            driver: "bridge",
            internal: d.replicas.security.egress === "dns",
            labels: [
                { label: "app.kubernetes.io/component", value: "env" },
                { label: "app.kubernetes.io/part-of", value: "agent-rl-infra" },
            ],
        },
        child,
    );
}

/** One replica container per name, on the env's network only. */
function replicaContainers(name: string, d: DeployedEnvDescription, image: docker.RemoteImage, network: docker.Network, child: Child): docker.Container[] {
    const r = d.replicas;
    const envs = Object.entries(r.env)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => `${k}=${v}`);
    const labels = containerLabels(r.podLabels);
    return r.containerNames.map(
        (containerName, i) =>
            new docker.Container(
                `${name}-replica-${i}`,
                {
                    name: containerName,
                    image: image.imageId,
                    envs,
                    labels,
                    // Never the training network: vLLM (dev mode in black box) listens there on all interfaces.
                    networksAdvanced: [{ name: network.name }],
                    cpus: dockerCpus(r.cpu),
                    memory: dockerMemoryMiB(r.memory),
                    memorySwap: dockerMemoryMiB(r.memory),
                    healthcheck: replicaHealthcheck(r.probes.startup, r.probes.liveness),
                    // Wait until /health answers, so the trainer (which waits for the env URL) starts against a ready env.
                    wait: true,
                    waitTimeout: r.probes.startup.periodSeconds * r.probes.startup.failureThreshold + 60,
                    restart: "unless-stopped",
                    destroyGraceSeconds: r.terminationGraceSeconds,
                    // Non-root (envs.<name>.runAsNonRoot: the default for envs that run model code); otherwise the image's user (root for OpenEnv images).
                    ...(r.security.runAsUser !== undefined ? { user: `${r.security.runAsUser}:${r.security.runAsUser}` } : {}),
                    // Read-only root with a sized /tmp (envs that run model-written code), as on Kubernetes.
                    ...(r.security.readOnlyRootFilesystem
                        ? { readOnly: true, tmpfs: { [REPLICA_SCRATCH_PATH]: `rw,nosuid,nodev,size=${dockerMemoryMiB(r.security.scratchSize)}m` } }
                        : {}),
                    ...HARDENING,
                },
                // Fixed name: the old container must go before its replacement.
                { ...child, deleteBeforeReplace: true },
            ),
    );
}

/** The router container: the only one on both networks, nginx with its uploaded config. */
function routerContainer(
    name: string,
    d: DeployedEnvDescription,
    image: docker.RemoteImage,
    trainingNetwork: pulumi.Input<string>,
    network: docker.Network,
    child: Child,
): docker.Container {
    const rt = d.router;
    const sec = rt.security;
    return new docker.Container(
        `${name}-router`,
        {
            name: rt.service,
            image: image.imageId,
            // Replaces the image's entrypoint scripts, which would write to /etc/nginx (ROUTER.md).
            entrypoints: [...rt.command],
            user: `${sec.runAsUser}:${sec.runAsGroup}`,
            // Not read-only: the daemon refuses to copy `uploads` into a read-only root filesystem
            // (moby daemon/archive.go); nginx still writes only to the tmpfs runDir.
            readOnly: false,
            tmpfs: { [rt.runDir]: `rw,noexec,nosuid,nodev,size=${dockerMemoryMiB(sec.runDirSizeLimit)}m,uid=${sec.runAsUser},gid=${sec.runAsGroup},mode=0700` },
            uploads: [{ file: rt.configFile, content: rt.configText, permissions: "0444" }],
            // The config's hash: a new config replaces the container (nginx is never reloaded in place).
            labels: [...containerLabels(rt.podLabels), { label: ROUTER_CHECKSUM_ANNOTATION, value: rt.configChecksum }],
            // The only container on both: the trainer reaches it on the training network, it reaches the replicas on the env's.
            networksAdvanced: [{ name: trainingNetwork }, { name: network.name }],
            cpus: dockerCpus(rt.cpu),
            memory: dockerMemoryMiB(rt.memory),
            memorySwap: dockerMemoryMiB(rt.memory),
            healthcheck: routerHealthcheck(rt.probes.liveness),
            // observability: the responder's and the relay's metrics ports, on the host's loopback only.
            ports: metricsPortsOnly(d.dockerMetrics, rt.service),
            wait: true,
            waitTimeout: 60,
            restart: "unless-stopped",
            destroyGraceSeconds: sec.terminationGraceSeconds,
            ...HARDENING,
        },
        { ...child, deleteBeforeReplace: true },
    );
}

/**
 * The capacity responder: nginx reaches it on the router's loopback (127.0.0.1:8081), so it shares
 * the router's network namespace: a recreated router replaces it too (networkMode changes with the
 * router's id). A router that merely restarts keeps its namespace. The env's image for python3.
 */
function responderContainer(name: string, d: DeployedEnvDescription, image: docker.RemoteImage, router: docker.Container, child: Child): docker.Container {
    const rt = d.router;
    const sec = rt.security;
    const rs = rt.responder;
    return new docker.Container(
        `${name}-capacity-responder`,
        {
            name: `${rt.service}-responder`,
            image: image.imageId,
            entrypoints: [...rs.command],
            user: `${sec.runAsUser}:${sec.runAsGroup}`,
            networkMode: router.id.apply((id) => `container:${id}`),
            // Not read-only for the same reason as the router: uploads need a writable root (the script writes nothing).
            readOnly: false,
            uploads: [
                { file: rs.scriptFile, content: rs.scriptText, permissions: "0444" },
                { file: rs.configFile, content: rs.configText, permissions: "0444" },
                ...rs.modules.map((m) => ({ file: `${rt.configDir}/${m.file}`, content: m.text, permissions: "0444" })),
            ],
            labels: [
                { label: "app.kubernetes.io/component", value: "env" },
                { label: ROUTER_CHECKSUM_ANNOTATION, value: rt.configChecksum },
            ],
            cpus: dockerCpus(rs.cpu),
            memory: dockerMemoryMiB(rs.memory),
            memorySwap: dockerMemoryMiB(rs.memory),
            // Its probe (the script's --probe mode on its loopback listener), as the Kubernetes pod's liveness.
            healthcheck: {
                tests: ["CMD", ...rs.probes.command],
                interval: `${rs.probes.liveness.periodSeconds}s`,
                timeout: `${rs.probes.liveness.timeoutSeconds}s`,
                retries: rs.probes.liveness.failureThreshold,
            },
            restart: "unless-stopped",
            destroyGraceSeconds: 5,
            ...HARDENING,
        },
        { ...child, deleteBeforeReplace: true },
    );
}

/** observability: the same session counter as in the pod, beside each replica, and the relay the host reaches them through. */
function metricsContainers(
    name: string,
    d: DeployedEnvDescription,
    images: { readonly replica: docker.RemoteImage; readonly router: docker.RemoteImage },
    replicas: readonly docker.Container[],
    router: docker.Container,
    parent: pulumi.Resource,
): docker.Container[] {
    if (d.metrics === undefined) return [];
    const counter = d.metrics.sessions;
    const metrics = replicas.map((replica, i) =>
        registerDockerMetricsSidecar(
            `${name}-replica-${i}`,
            counter,
            { name: d.replicas.containerNames[i]!, container: replica, namespace: d.namespace },
            images.replica.imageId,
            parent,
        ),
    );
    const relay = replicaMetricsRelay(d);
    metrics.push(
        registerDockerMetricsSidecar(
            `${name}-router`,
            relay,
            { name: d.router.service, container: router, namespace: d.namespace },
            images.router.imageId,
            parent,
        ),
    );
    return metrics;
}

/** Registers the pinned images, the env network, the replica containers, the router and its responder as children of `parent`. */
export function registerDockerEnvSpace(name: string, args: DockerEnvArgs, parent: pulumi.Resource): DockerEnvResources {
    const d = args.description;
    const child = { parent };
    const replicaImage = new docker.RemoteImage(`${name}-image`, { name: d.replicas.image, keepLocally: true }, child);
    const routerImage = new docker.RemoteImage(`${name}-router-image`, { name: d.router.image, keepLocally: true }, child);
    const network = envNetwork(name, d, child);
    const replicas = replicaContainers(name, d, replicaImage, network, child);
    const router = routerContainer(name, d, routerImage, args.network, network, child);
    const responder = responderContainer(name, d, replicaImage, router, child);
    const metrics = metricsContainers(name, d, { replica: replicaImage, router: routerImage }, replicas, router, parent);
    return { network, replicas, router, responder, metrics };
}

export { dockerCpus, dockerMemoryMiB };
