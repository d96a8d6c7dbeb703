/**
 * The sandbox pool on one Docker host: a fixed pool of `poolSize` containers on the
 * internal sandbox network (its only other member is the ingress proxy, so the sandboxes
 * reach nothing but the authenticated vLLM routes), with the same hardening as on
 * Kubernetes. Docker has no lifetime controller: PID 1 is `sleep <deadline>`, so each
 * container (and everything run in it) ends at maxWarmWait + maxLifetime, and
 * `restart: no` keeps it down.
 */
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { SANDBOX_KEY_ENV, quantityValue, type SandboxDescription } from "./describe";
import { dockerCpus, dockerMemoryMiB } from "../shared/quantity";

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

/** Registers the pinned image and the pool's containers as children of `parent`. */
export function registerDockerSandboxPool(name: string, args: DockerSandboxArgs, parent: pulumi.Resource): docker.Container[] {
    const d = args.description;
    const sec = d.security;
    const child = { parent };
    const image = new docker.RemoteImage(`${name}-image`, { name: d.image, keepLocally: true }, child);
    const plainEnv = Object.entries(d.env).map(([k, v]) => `${k}=${v}`);
    // The key only ever travels as a secret Output (Docker has no secret env: `docker inspect` shows it to the host's admins).
    const envs = pulumi.secret(pulumi.output(args.sandboxKey).apply((key) => [...plainEnv, `${SANDBOX_KEY_ENV}=${key}`]));
    const tmpfs: Record<string, string> = {};
    for (const w of sec.writablePaths) tmpfs[w.path] = tmpfsOptions(d, w.sizeLimit);
    const labels = Object.entries(d.labels).map(([label, value]) => ({ label, value }));
    return d.names.containers.map(
        (containerName, i) =>
            new docker.Container(
                `${name}-${i}`,
                {
                    name: containerName,
                    image: image.imageId,
                    command: dockerSandboxCommand(d),
                    user: `${sec.runAsUser}:${sec.runAsGroup}`,
                    workingDir: sec.workingDir,
                    envs,
                    labels,
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
                    networkMode: args.network,
                    destroyGraceSeconds: sec.terminationGraceSeconds,
                },
                child,
            ),
    );
}
