/**
 * The sandbox pool on one Docker host: a fixed pool of `poolSize` containers on the
 * internal sandbox network (its only other member is the ingress proxy, so the sandboxes
 * reach nothing but the authenticated vLLM routes), with the same hardening as on
 * Kubernetes. Docker has no lifetime controller: PID 1 is `sleep <deadline>`, so each
 * container (and everything run in it) ends at maxWarmWait + maxLifetime, and
 * `restart: no` keeps it down.
 *
 * Beside each sandbox, its key-holding forwarder (python/agent_rl_sandbox/forwarder.py): a second
 * container in the sandbox's network namespace (`container:<name>`, so the sandbox reaches it on
 * loopback) but with its own PID and mount namespace and uid, the only one whose env holds the key.
 */
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import type { SandboxDescription } from "./model";
import { dockerCpus, dockerMemoryMiB, quantityValue } from "../shared/quantity";

export interface DockerSandboxArgs {
    readonly description: SandboxDescription;
    readonly sandboxKey: pulumi.Input<string>;
    /** The internal sandbox network (created by the Platform). */
    readonly network: pulumi.Input<string>;
}

/** tmpfs options for a writable path, owned by the sandbox uid. */
function tmpfsOptions(d: SandboxDescription, size: string): string {
    const sec = d.security;
    return `rw,nosuid,nodev,size=${Math.floor(quantityValue(size))},uid=${sec.runAsUser},gid=${sec.runAsGroup},mode=0700`;
}

/** The container's command: the hard lifetime (Docker has no activeDeadlineSeconds). */
export function dockerSandboxCommand(d: SandboxDescription): string[] {
    return ["sleep", String(d.deadlineSeconds)];
}

type Child = { readonly parent: pulumi.Resource };

/** One pooled sandbox: the agent's container, read-only with its tmpfs dirs, on the internal sandbox network only. */
function sandboxContainer(
    name: string,
    d: SandboxDescription,
    containerName: string,
    image: docker.RemoteImage,
    network: pulumi.Input<string>,
    child: Child,
): docker.Container {
    const sec = d.security;
    const tmpfs: Record<string, string> = {};
    for (const w of sec.writablePaths) tmpfs[w.path] = tmpfsOptions(d, w.sizeLimit);
    return new docker.Container(
        name,
        {
            name: containerName,
            image: image.imageId,
            command: dockerSandboxCommand(d),
            user: `${sec.runAsUser}:${sec.runAsGroup}`,
            workingDir: sec.workingDir,
            // No key in the sandbox's env: the agent runs as its uid (see the forwarder below).
            envs: Object.entries(d.env).map(([k, v]) => `${k}=${v}`),
            labels: containerLabels(d),
            readOnly: sec.readOnlyRootFilesystem,
            tmpfs,
            capabilities: { drops: [...sec.dropCapabilities] },
            securityOpts: ["no-new-privileges:true"],
            privileged: false,
            // Docker takes a decimal number of CPUs ("500m" -> "0.5").
            cpus: dockerCpus(d.cpu),
            memory: dockerMemoryMiB(d.memory),
            // No swap beyond the memory limit.
            memorySwap: dockerMemoryMiB(d.memory),
            init: true,
            restart: "no",
            // Only the internal sandbox network: the default bridge would reach the internet.
            networkMode: network,
            destroyGraceSeconds: sec.terminationGraceSeconds,
        },
        child,
    );
}

/** The key-holding forwarder of one sandbox, in the sandbox's network namespace, with the key in its env only. */
function forwarderContainer(
    name: string,
    d: SandboxDescription,
    containerName: string,
    image: docker.RemoteImage,
    forwarderEnvs: pulumi.Output<string[]>,
    sandbox: docker.Container,
    child: Child,
): docker.Container {
    const sec = d.security;
    const f = d.forwarder;
    return new docker.Container(
        name,
        {
            name: `${containerName}-forwarder`,
            image: image.imageId,
            command: [...f.command],
            user: `${f.runAsUser}:${f.runAsUser}`,
            envs: forwarderEnvs,
            labels: containerLabels(d),
            readOnly: true,
            capabilities: { drops: [...sec.dropCapabilities] },
            securityOpts: ["no-new-privileges:true"],
            privileged: false,
            cpus: dockerCpus(f.cpu),
            memory: dockerMemoryMiB(f.memory),
            memorySwap: dockerMemoryMiB(f.memory),
            init: true,
            restart: "no",
            // The sandbox's network namespace only: its loopback is where the agent calls it, its network the way to the ingress.
            networkMode: pulumi.interpolate`container:${sandbox.id}`,
            destroyGraceSeconds: sec.terminationGraceSeconds,
        },
        child,
    );
}

function containerLabels(d: SandboxDescription): docker.types.input.ContainerLabel[] {
    return Object.entries(d.labels).map(([label, value]) => ({ label, value }));
}

/** Registers the pinned image and the pool's containers (each sandbox, then its forwarder) as children of `parent`. */
export function registerDockerSandboxPool(name: string, args: DockerSandboxArgs, parent: pulumi.Resource): docker.Container[] {
    const d = args.description;
    const child = { parent };
    const image = new docker.RemoteImage(`${name}-image`, { name: d.image, keepLocally: true }, child);
    // The key only ever travels as a secret Output (Docker has no secret env: `docker inspect` shows it to the host's admins).
    const forwarderEnvs = pulumi.secret(pulumi.output(args.sandboxKey).apply((key) => [`${d.forwarder.keyEnv}=${key}`]));
    return d.names.containers.flatMap((containerName, i) => {
        const sandbox = sandboxContainer(`${name}-${i}`, d, containerName, image, args.network, child);
        const forwarder = forwarderContainer(`${name}-${i}-forwarder`, d, containerName, image, forwarderEnvs, sandbox, child);
        return [sandbox, forwarder];
    });
}
