/**
 * The vLLM ingress on one Docker host: an nginx container on BOTH the private training
 * network (to reach vLLM) and the internal sandbox network (the sandboxes' only way out), the
 * only container on both, publishing only its listen port on the host.
 *
 * Files: Docker has no secret store outside Swarm, so the config and the keys are `uploads`
 * built from the secret Output (still secret in Pulumi state). The provider copies uploads
 * into the container at "/" (terraform-provider-docker resource_docker_container_funcs.go),
 * and the daemon refuses any copy into a read-only root filesystem unless the target is a
 * writable volume (moby daemon/archive.go: "container rootfs is marked read-only"). So the
 * uploads go through a small never-started "files" container that mounts two named volumes
 * read-write; the nginx container mounts the same volumes read-only and keeps its own root
 * filesystem read-only with a tmpfs at the runtime dir. Keys never appear in env or labels.
 *
 * observability: the exporter and mtail run as containers in the proxy's network namespace (stub_status
 * on its loopback); the JSON access log lives on a third volume, its file made by the files container
 * (group root, which the proxy's gid 0 writes; world-readable for mtail, which mounts it read-only).
 * nginx does not rotate it: the volume grows by about 300 bytes a request until the stack is destroyed.
 */
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { waitFor } from "./wait";
import { CHECKSUM_ANNOTATION } from "./model";
import type { IngressDescription } from "./resolve";
import { dockerCpus, dockerMemoryMiB } from "../shared/quantity";
import { publishedMetricsPorts, registerDockerMetricsSidecar } from "../shared/docker-metrics";

export interface DockerIngressArgs {
    readonly description: IngressDescription;
    /** The private training network (vLLM's) and the internal sandbox network, both created by the Platform. */
    readonly networks: { readonly training: pulumi.Input<string> };
    /** The rendered keys file (secret). */
    readonly keysText: pulumi.Output<string>;
    /** Checksum of config + keys (not secret): a change replaces the container, so nginx reads the new files. */
    readonly checksum: pulumi.Output<string>;
    /** Resolves to what serves vLLM; the proxy container waits for it (nginx resolves vLLM's name at start). */
    readonly upstreamReady?: Promise<pulumi.Resource | undefined>;
}

export interface DockerIngressResources {
    readonly container: docker.Container;
    /** observability: nginx-prometheus-exporter and mtail, in the proxy's network namespace. */
    readonly metrics: docker.Container[];
}

/** `docker run -p`: the listen port, on loopback unless the proxy is exposed (then on the public port); the metrics ports on loopback. */
export function dockerIngressPorts(d: IngressDescription): docker.types.input.ContainerPort[] {
    return [{ internal: d.port, external: d.publicPort, ip: d.dockerPublishIp, protocol: "tcp" }, ...publishedMetricsPorts(d.dockerMetrics, d.names.container)];
}

/**
 * Health: a LISTEN socket on the port in /proc/net/tcp (grep is in every nginx image; no
 * unauthenticated HTTP route exists to probe, and an HTTP check would need a TLS client).
 */
export function dockerIngressHealthcheck(d: IngressDescription): docker.types.input.ContainerHealthcheck {
    const hexPort = d.port.toString(16).toUpperCase().padStart(4, "0");
    return { tests: ["CMD", "grep", "-q", `:${hexPort} 00000000:0000 0A`, "/proc/net/tcp"], interval: "10s", timeout: "3s", retries: 3, startPeriod: "5s" };
}

/** tmpfs for the runtime dir, owned by the nginx uid. */
function runtimeTmpfs(d: IngressDescription): Record<string, string> {
    const sec = d.security;
    return {
        [d.paths.runtimeDir]: `rw,noexec,nosuid,nodev,size=${dockerMemoryMiB(sec.runtimeSizeLimit)}m,uid=${sec.runAsUser},gid=${sec.dockerGroup},mode=0700`,
    };
}

type Child = { readonly parent: pulumi.Resource };
type DockerLabels = { label: string; value: string }[];
/** The volumes the files container fills and the proxy mounts; the access log's only with metrics. */
interface FileVolumes {
    readonly config: docker.Volume;
    readonly keys: docker.Volume;
    readonly log?: docker.Volume;
}

/** The config and keys volumes, and the access log's (observability on). */
function fileVolumes(name: string, d: IngressDescription, labels: DockerLabels, child: Child): FileVolumes {
    const config = new docker.Volume(`${name}-config-volume`, { name: d.names.configVolume, labels }, child);
    const keys = new docker.Volume(`${name}-keys-volume`, { name: d.names.keysVolume, labels }, child);
    const log = d.metrics ? new docker.Volume(`${name}-access-log-volume`, { name: `${d.names.container}-access-log`, labels }, child) : undefined;
    return { config, keys, log };
}

/** Created, never started, no network: it exists only so the daemon can copy the uploads into the volumes. */
function filesContainer(
    name: string,
    args: DockerIngressArgs,
    image: docker.RemoteImage,
    v: FileVolumes,
    labels: DockerLabels,
    child: Child,
): docker.Container {
    const d = args.description;
    const m = d.metrics;
    return new docker.Container(
        `${name}-files`,
        {
            name: d.names.filesContainer,
            image: image.imageId,
            entrypoints: ["/bin/false"],
            start: false,
            mustRun: false,
            networkMode: "none",
            labels,
            volumes: [
                { volumeName: v.config.name, containerPath: d.paths.configDir },
                { volumeName: v.keys.name, containerPath: d.paths.keysDir },
                ...(m && v.log ? [{ volumeName: v.log.name, containerPath: m.accessLog.dir }] : []),
            ],
            uploads: [
                { file: d.settings.keysFile, content: pulumi.secret(args.keysText), permissions: "0440" },
                { file: `${d.paths.configDir}/nginx.conf`, content: d.configText, permissions: "0444" },
                // The access log file (one empty line; mtail reads from the end): nginx (gid 0) appends to it, mtail reads it.
                ...(m ? [{ file: m.accessLog.file, content: "\n", permissions: "0664" }] : []),
            ],
        },
        // Fixed name: the old one must go before its replacement (uploads change = replacement).
        { ...child, deleteBeforeReplace: true },
    );
}

/** What the proxy mounts: config and keys read-only, the access log, and the host's TLS files (tls.mode files). */
function proxyVolumes(d: IngressDescription, v: FileVolumes): docker.types.input.ContainerVolume[] {
    const volumes: docker.types.input.ContainerVolume[] = [
        { volumeName: v.config.name, containerPath: d.paths.configDir, readOnly: true },
        { volumeName: v.keys.name, containerPath: d.paths.keysDir, readOnly: true },
    ];
    if (d.metrics && v.log) volumes.push({ volumeName: v.log.name, containerPath: d.metrics.accessLog.dir });
    if (d.tls.proxyTerminates && d.tls.mode === "files") {
        volumes.push(
            { hostPath: d.tls.certFile!, containerPath: d.settings.tlsCertFile, readOnly: true },
            { hostPath: d.tls.keyFile!, containerPath: d.settings.tlsKeyFile, readOnly: true },
        );
    }
    return volumes;
}

/** The nginx container, hardened, on the training network, replaced when its config or keys change. */
function proxyContainer(
    name: string,
    args: DockerIngressArgs,
    image: docker.RemoteImage,
    v: FileVolumes,
    files: docker.Container,
    labels: DockerLabels,
    child: Child,
): docker.Container {
    const d = args.description;
    const sec = d.security;
    const networksAdvanced: docker.types.input.ContainerNetworksAdvanced[] = [{ name: args.networks.training }];
    return new docker.Container(
        `${name}-proxy`,
        {
            name: d.names.container,
            image: image.imageId,
            entrypoints: [...d.command],
            user: `${sec.runAsUser}:${sec.dockerGroup}`,
            readOnly: sec.readOnlyRootFilesystem,
            tmpfs: runtimeTmpfs(d),
            capabilities: { drops: [...sec.dropCapabilities] },
            securityOpts: ["no-new-privileges:true"],
            privileged: false,
            cpus: dockerCpus(d.resources.limits.cpu),
            memory: dockerMemoryMiB(d.resources.limits.memory),
            memorySwap: dockerMemoryMiB(d.resources.limits.memory),
            // On the training network: it reaches vLLM there and publishes its own port on the host.
            networksAdvanced,
            ports: dockerIngressPorts(d),
            volumes: proxyVolumes(d, v),
            // A keyed hash, not secret: a new config or key replaces the container, so nginx reads the new files.
            labels: pulumi.output(args.checksum).apply((sum) => [...labels, { label: CHECKSUM_ANNOTATION, value: sum }]),
            healthcheck: dockerIngressHealthcheck(d),
            // Wait until nginx listens. It looks vLLM's name up per request through Docker's DNS
            // (settings.upstreamResolver), so a recreated vLLM is found again without replacing this container.
            wait: true,
            waitTimeout: 60,
            restart: "unless-stopped",
            destroyGraceSeconds: sec.terminationGraceSeconds,
        },
        { ...child, dependsOn: waitFor(args.upstreamReady, [files]), deleteBeforeReplace: true },
    );
}

/** observability: the exporter over stub_status on the proxy's loopback, mtail over the access log (read-only). */
function metricsSidecars(name: string, d: IngressDescription, container: docker.Container, v: FileVolumes, parent: pulumi.Resource): docker.Container[] {
    const m = d.metrics;
    const logVolume = v.log;
    if (!m || !logVolume) return [];
    const child = { parent };
    const main = { name: d.names.container, container, namespace: d.names.namespace };
    const exporterImage = new docker.RemoteImage(`${name}-${m.exporter.name}-image`, { name: m.exporter.image, keepLocally: true }, child);
    const mtailImage = new docker.RemoteImage(`${name}-${m.log.name}-image`, { name: m.log.image, keepLocally: true }, child);
    return [
        registerDockerMetricsSidecar(name, m.exporter, main, exporterImage.imageId, parent),
        registerDockerMetricsSidecar(name, m.log, main, mtailImage.imageId, parent, {
            volumes: [{ volumeName: logVolume.name, containerPath: m.accessLog.dir, readOnly: true }],
        }),
    ];
}

/** Registers the pinned image, the two file volumes, the files container and the nginx container as children of `parent`. */
export function registerDockerIngress(name: string, args: DockerIngressArgs, parent: pulumi.Resource): DockerIngressResources {
    const d = args.description;
    const child = { parent };
    const image = new docker.RemoteImage(`${name}-image`, { name: d.image, keepLocally: true }, child);
    // The shared pod labels (they carry app.kubernetes.io/part-of) also mark the containers and volumes.
    const labels = Object.entries(d.podLabels).map(([label, value]) => ({ label, value }));
    const volumes = fileVolumes(name, d, labels, child);
    const files = filesContainer(name, args, image, volumes, labels, child);
    const container = proxyContainer(name, args, image, volumes, files, labels, child);
    return { container, metrics: metricsSidecars(name, d, container, volumes, parent) };
}
