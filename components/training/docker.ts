/**
 * Docker translation of a TrainingDescription, for one GPU host reached through the
 * provider's `host`. vLLM joins only the private training network; the trainer shares
 * vLLM's network and IPC namespaces, so localhost:8000, the NCCL weight sync (trainer as
 * NCCL master on a random port, trl weight_transfer.py) and /dev/shm stay inside the pair.
 * No port of theirs is published on the host; with observability on, vLLM's metrics-only listener
 * (a sidecar in vLLM's network namespace) is, on 127.0.0.1 only. The env servers sit on networks of their own
 * (env/docker.ts): vLLM listens on all interfaces, but only the training network reaches them.
 *
 * Secrets: Docker has no secret store outside Swarm, so HF_TOKEN is
 * container env vars built from the secret Outputs (still secret in Pulumi state). Docker
 * keeps container env in the container's config (`docker inspect` shows it) to anyone with
 * daemon access, who is root on the host anyway, so a secret file would not keep them
 * out; env vars keep the trainer scripts identical on both targets.
 */
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { podLabels, RUN_LABEL } from "../config/names";
import type { ContainerDescription, SecretName, TrainingDescription, VolumeMount } from "./model";
import { ncclCheckSource } from "./nccl-check";
import { ncclCheckArgv, shellQuote } from "./supervisor";
import { dockerCpus, dockerMemoryMiB } from "../shared/quantity";
import { metricsPortsOnly, registerDockerMetricsSidecar } from "../shared/docker-metrics";

type Secrets = Partial<Record<SecretName, pulumi.Input<string>>>;

/** Seconds the provider gets beyond vLLM's own wait (create, uploads, start; the image is pulled by its own resource). */
export const VLLM_CREATE_MARGIN_SECONDS = 300;

/**
 * The provider's create/update budget for the vLLM container. Its `wait` lasts up to
 * waitTimeout (modelLoadSeconds + 60), but the provider declares no create timeout
 * (terraform-provider-docker resource_docker_container.go), so the plugin SDK's 20-minute
 * default cuts it whatever wait_timeout says; the customTimeouts resource option replaces it.
 */
export function vllmCustomTimeouts(modelLoadSeconds: number): { create: string; update: string } {
    const minutes = `${Math.ceil((vllmWaitSeconds(modelLoadSeconds) + VLLM_CREATE_MARGIN_SECONDS) / 60)}m`;
    return { create: minutes, update: minutes };
}

/** How long the provider waits for vLLM's health check (the model loads within modelLoadSeconds). */
export function vllmWaitSeconds(modelLoadSeconds: number): number {
    return modelLoadSeconds + 60;
}

/**
 * How the trainer joins vLLM's network and IPC namespaces: by container id. dockerd stores
 * `container:<id>` whatever it was given (test/stack/docker-lifecycle.test.ts shows it on a real
 * dockerd), and the provider reads HostConfig.NetworkMode / IpcMode back
 * (terraform-provider-docker resource_docker_container_funcs.go): a name would differ on every
 * `up` and replace the trainer, killing the run. A new vLLM (new id) rightly replaces it too.
 */
export function sharedNamespaceMode(vllmId: pulumi.Input<string>): pulumi.Output<string> {
    return pulumi.interpolate`container:${vllmId}`;
}
/**
 * Docker device request for a set of host GPUs, by explicit device ids. The provider's `gpus`
 * string supports only "all" (terraform-provider-docker resource_docker_container.go) and goes
 * through docker/cli's CSV parser, where an unquoted list (device=0,1) becomes device 0 plus
 * count 1, which dockerd refuses at start ("cannot set both Count and DeviceIDs on device
 * request"); test/stack/docker-lifecycle.test.ts shows both on a real dockerd.
 */
export function gpuDeviceRequests(devices: readonly number[]): docker.types.input.ContainerDeviceRequest[] {
    return devices.length === 0 ? [] : [{ driver: "nvidia", deviceIds: devices.map(String), capabilities: ["gpu"] }];
}

function envList(c: ContainerDescription, provided: Secrets): pulumi.Output<string[]> {
    const plain = Object.entries(c.env)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => `${k}=${v}`);
    const secret = Object.entries(c.secretEnv)
        .filter(([, s]) => provided[s] !== undefined)
        .map(([k, s]) => pulumi.interpolate`${k}=${provided[s]!}`);
    // pulumi.all keeps the secret marking of any secret element.
    return pulumi.all([...plain, ...secret]);
}

function volumes(mounts: readonly VolumeMount[], d: TrainingDescription): docker.types.input.ContainerVolume[] {
    const out: docker.types.input.ContainerVolume[] = [];
    for (const m of mounts) {
        // /dev/shm comes from shmSize (vLLM) / the shared IPC namespace (trainer), not a volume.
        if (m.volume === "shm") continue;
        const v = m.volume === "modelCache" ? d.modelCache : d.checkpoints;
        if (v?.hostPath) out.push({ hostPath: v.hostPath, containerPath: m.path });
    }
    return out;
}

const HARDENING = {
    capabilities: { drops: ["ALL"] },
    securityOpts: ["no-new-privileges:true"],
};

export interface DockerTrainingResources {
    readonly trainer: docker.Container;
    readonly vllm?: docker.Container;
    /** observability: vLLM's metrics-only listener, in vLLM's network namespace. */
    readonly vllmMetrics?: docker.Container;
}

/** Where the run's containers go, and the image each role pulls (one RemoteImage per distinct reference). */
interface Scope {
    readonly name: string;
    readonly d: TrainingDescription;
    readonly network: pulumi.Input<string>;
    readonly provided: Secrets;
    readonly child: { readonly parent: pulumi.Resource };
    readonly imageFor: (role: string, ref: string) => docker.RemoteImage;
}

/** The pinned images, registered on first use, shared by roles that use the same reference. */
function imageCache(name: string, child: { readonly parent: pulumi.Resource }): (role: string, ref: string) => docker.RemoteImage {
    const images = new Map<string, docker.RemoteImage>();
    return (role, ref) => {
        let img = images.get(ref);
        if (!img) {
            img = new docker.RemoteImage(`${name}-image-${role}`, { name: ref, keepLocally: true }, child);
            images.set(ref, img);
        }
        return img;
    };
}

/**
 * What both containers take straight from their description: name, image, command, env, GPUs, limits.
 * Labels a log shipper keys on (docs/guides/observability.md "Logs"): the pods' app.kubernetes.io/* labels, with the role and the container, and the run.
 */
function fromDescription(s: Scope, c: ContainerDescription, image: docker.RemoteImage, role: "vllm" | "trainer") {
    return {
        name: c.dockerName,
        labels: Object.entries({ ...podLabels(role, c.dockerName), [RUN_LABEL]: s.d.runId }).map(([label, value]) => ({ label, value })),
        image: image.imageId,
        entrypoints: c.command ? [...c.command] : undefined,
        command: [...c.args],
        envs: envList(c, s.provided),
        deviceRequests: gpuDeviceRequests(c.gpuDevices),
        cpus: dockerCpus(c.cpu),
        memory: dockerMemoryMiB(c.memory),
    };
}

/** vLLM's health check: python3 is in both the vLLM and the TRL image; curl is not guaranteed. */
function vllmHealthcheck(d: TrainingDescription, v: ContainerDescription): docker.types.input.ContainerHealthcheck {
    const health = v.probes!.startup;
    return {
        tests: [
            "CMD",
            "python3",
            "-c",
            `import urllib.request; urllib.request.urlopen('http://localhost:${health.port}${health.path}', timeout=${health.timeoutSeconds})`,
        ],
        interval: `${health.periodSeconds}s`,
        timeout: `${health.timeoutSeconds}s`,
        // A Docker health check never restarts the container; it only marks it unhealthy.
        retries: v.probes!.liveness!.failureThreshold,
        startPeriod: `${d.modelLoadSeconds}s`,
    };
}

/** vLLM's container: on the private training network only, its IPC namespace shareable, waited for until healthy. */
function vllmContainer(s: Scope, v: ContainerDescription): docker.Container {
    const d = s.d;
    // ncclCheck (gpuSharing shared: this container sees every training GPU): the check runs
    // both ranks before vLLM starts; a failure exits the container within seconds.
    const check = ncclCheckArgv(d);
    const described = fromDescription(s, v, s.imageFor("vllm", v.image), "vllm");
    const checked = check
        ? {
              entrypoints: ["/bin/sh", "-c", `${check.map(shellQuote).join(" ")} && exec "$@"`, "agentrl-nccl-check", ...(v.command ?? [])],
              uploads: [{ file: d.gpuSharing.check!.path, content: ncclCheckSource(), executable: true }],
          }
        : {};
    return new docker.Container(
        `${s.name}-vllm`,
        {
            ...described,
            ...checked,
            // The trainer joins this IPC namespace (and its /dev/shm): it must be shareable.
            ipcMode: "shareable",
            shmSize: quantityToMiB(d.shmSize),
            // Only the private training network; in black box the alias is the ingress's upstream host.
            networksAdvanced: [{ name: s.network, aliases: d.ingressAccess ? [d.ingressAccess.serviceName] : [] }],
            healthcheck: vllmHealthcheck(d, v),
            // Wait until the model is loaded, so the trainer starts against a healthy server.
            wait: true,
            waitTimeout: vllmWaitSeconds(d.modelLoadSeconds),
            restart: "unless-stopped",
            volumes: volumes(v.mounts, d),
            // observability: only the listener's port, on the host's loopback (never 8000).
            ports: metricsPortsOnly(d.dockerMetrics, v.dockerName),
            ...HARDENING,
        },
        // A new run's vLLM needs the same GPUs: stop the old one first. The engine's own
        // 20-minute create limit would cut the wait for a slow model load short.
        { ...s.child, deleteBeforeReplace: true, customTimeouts: vllmCustomTimeouts(d.modelLoadSeconds) },
    );
}

/** The trainer's container: in vLLM's network and IPC namespaces where vLLM runs beside it; a run ends, it is never restarted. */
function trainerContainer(s: Scope, vllm: docker.Container | undefined, waitFor: readonly pulumi.Resource[]): docker.Container {
    const d = s.d;
    const t = d.trainer;
    const shared = vllm ? sharedNamespaceMode(vllm.id) : undefined;
    return new docker.Container(
        `${s.name}-trainer`,
        {
            ...fromDescription(s, t, s.imageFor("trainer", t.image), "trainer"),
            // Server layouts: vLLM's network namespace (localhost:8000, NCCL on loopback) and IPC.
            // Colocate: alone on the private training network, with its own /dev/shm.
            ...(shared ? { networkMode: shared, ipcMode: shared } : { networksAdvanced: [{ name: s.network }], shmSize: quantityToMiB(d.shmSize) }),
            // A training run ends: the provider must not expect it to keep running or restart it.
            mustRun: false,
            restart: "no",
            volumes: volumes(t.mounts, d),
            ...HARDENING,
        },
        { ...s.child, dependsOn: [...(vllm ? [vllm] : []), ...waitFor], deleteBeforeReplace: true },
    );
}

/** Registers the run's containers (and their pinned images) as children of `parent`, in this order. */
export function buildDockerTraining(
    name: string,
    d: TrainingDescription,
    network: pulumi.Input<string>,
    provided: Secrets,
    parent: pulumi.Resource,
    waitFor: readonly pulumi.Resource[] = [],
): DockerTrainingResources {
    const child = { parent };
    const s: Scope = { name, d, network, provided, child, imageFor: imageCache(name, child) };
    const vllm = d.vllm ? vllmContainer(s, d.vllm) : undefined;
    // observability: GET /metrics to vLLM on its loopback and nothing else, as in the pod (training/metrics.ts).
    const listener = d.metrics?.vllm;
    const vllmMetrics =
        vllm && listener && d.vllm
            ? registerDockerMetricsSidecar(
                  name,
                  listener,
                  { name: d.vllm.dockerName, container: vllm, namespace: d.namespace },
                  s.imageFor("vllm-metrics", listener.image).imageId,
                  parent,
              )
            : undefined;
    const trainer = trainerContainer(s, vllm, waitFor);
    return { trainer, vllm, vllmMetrics };
}

/** Docker memory in MiB (kept under its earlier name for the library's users). */
export const quantityToMiB = dockerMemoryMiB;
