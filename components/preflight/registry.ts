/**
 * Registry credentials against the images the stack pulls (both targets, pure): which registryAuth
 * entry serves which image, the way each target really matches them, so an image pulled without
 * the credentials and an entry no image uses are reported before an `up` meets ImagePullBackOff.
 * Only the registry names of registryAuth are used (plan.registryAuth), never its values.
 *
 * - Kubernetes: the kubelet looks the image's normalized repository ("docker.io/library/nginx") up
 *   in the pull Secret's `auths` (kubernetes pkg/credentialprovider/keyring.go, 1.35: a key matches
 *   with the same port, as many host labels each matching as a glob, and a path that is a prefix of
 *   the image's; `index.docker.io` keys serve every Docker Hub image).
 * - Docker: @pulumi/docker 5 bridges terraform-provider-docker v4, whose RemoteImage pull looks up
 *   exactly one host name (internal/provider/resource_docker_image_funcs.go `parseImageOptions`,
 *   `pullImage`): the image's first path part when it looks like a host (or the name has two or
 *   more slashes), else `registry-1.docker.io`; entries are keyed by their host name (scheme and
 *   path cut off, `convertToHostname`). The stack's provider gets Docker Hub credentials that the
 *   config.json files under a key the provider reads for Hub (`https://index.docker.io/v1/`, what
 *   `docker login` writes) under every Hub pull host too (config dockerProviderAddresses).
 */
import { DOCKER_HUB_CONFIG_KEYS, DOCKER_HUB_PULL_HOSTS, deployedImages, type PlatformConfig } from "../config";
import type { PlatformPlan } from "../platform";
import { type Finding, ok, warn } from "./report";

/** An image reference as container runtimes normalize it (distribution/reference normalize.go `splitDockerDomain`). */
export interface ImageName {
    /** The registry host[:port]; docker.io for Docker Hub (index.docker.io is its legacy name). */
    readonly registry: string;
    /** The repository path without tag or digest; Docker Hub's official images get `library/`. */
    readonly repository: string;
}

/** The registry and repository of an image reference (tag and digest dropped). */
export function parseImage(image: string): ImageName {
    const name = image.split("@")[0]!;
    const i = name.indexOf("/");
    const first = i < 0 ? "" : name.slice(0, i);
    const isHost = i >= 0 && (/[.:]/.test(first) || first === "localhost" || first.toLowerCase() !== first);
    let registry = isHost ? first : "docker.io";
    let rest = isHost ? name.slice(i + 1) : name;
    if (registry === "index.docker.io") registry = "docker.io";
    if (registry === "docker.io" && !rest.includes("/")) rest = `library/${rest}`;
    // The tag follows the last ':' of the path (the host's port went with the registry).
    const tag = rest.lastIndexOf(":");
    return { registry, repository: tag >= 0 ? rest.slice(0, tag) : rest };
}

/** Go's filepath.Match for one host label (`*`, `?`, `[...]` with `^` negation, `\` escapes). */
function globMatch(pattern: string, s: string): boolean {
    let re = "";
    for (let i = 0; i < pattern.length; i++) {
        const c = pattern[i]!;
        if (c === "*") re += ".*";
        else if (c === "?") re += ".";
        else if (c === "\\" && i + 1 < pattern.length) re += `\\${pattern[++i]}`;
        else if (c === "[") {
            const end = pattern.indexOf("]", i + 2);
            if (end < 0) return false; // Go: ErrBadPattern, which the keyring counts as no match
            const body = pattern.slice(i + 1, end);
            re += `[${body.startsWith("^") ? `^${body.slice(1).replace(/[\]\\]/g, "\\$&")}` : body.replace(/[\]\\]/g, "\\$&")}]`;
            i = end;
        } else re += c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
    }
    return new RegExp(`^${re}$`).test(s);
}

/** host, port and path of a schemeless URL, as Go's url.Parse("https://" + s) and net.SplitHostPort read it. */
function splitUrl(s: string): { labels: string[]; port: string; path: string } {
    const slash = s.indexOf("/");
    const hostPort = slash < 0 ? s : s.slice(0, slash);
    const path = slash < 0 ? "" : s.slice(slash);
    const m = /^(.*):(\d*)$/.exec(hostPort);
    const host = m ? m[1]! : hostPort;
    return { labels: host.split("."), port: m ? m[2]! : "", path };
}

/** The keyring key of a pull Secret's `auths` entry: scheme dropped, a /v1/ or /v2/ path prefix dropped (keyring.go `Add`). */
export function kubeletKey(entry: string): string {
    const url = entry.replace(/^https?:\/\//, "");
    const slash = url.indexOf("/");
    const host = slash < 0 ? url : url.slice(0, slash);
    let path = slash < 0 ? "" : url.slice(slash);
    if (path.startsWith("/v1/") || path.startsWith("/v2/")) path = path.slice(3);
    return path !== "" && path !== "/" ? host + path : host;
}

/** Whether the kubelet offers the `entry` credentials for `image` (keyring.go `Lookup`, `urlsMatch`, `isDefaultRegistryMatch`). */
export function kubeletServes(entry: string, image: string): boolean {
    const { registry, repository } = parseImage(image);
    const target = `${registry}/${repository}`;
    const key = kubeletKey(entry);
    const g = splitUrl(key);
    const t = splitUrl(target);
    if (g.port === t.port && g.labels.length === t.labels.length && t.path.startsWith(g.path) && g.labels.every((l, i) => globMatch(l, t.labels[i]!)))
        return true;
    // Docker Hub's credentials, filed under index.docker.io, serve an image whose first part is no host.
    const first = target.split("/")[0]!;
    const defaultRegistry = first === "docker.io" || first === "index.docker.io" || !/[.:]/.test(first);
    return key === "index.docker.io" && defaultRegistry;
}

/** The host name terraform-provider-docker files an entry under (scheme and path cut off). */
export function dockerProviderKey(entry: string): string {
    return entry.replace(/^https?:\/\//, "").split("/")[0]!;
}

/** The host name the Docker provider looks an image's credentials up under (`parseImageOptions`). */
export function dockerProviderRegistry(image: string): string {
    const slash = image.indexOf("/");
    const first = slash < 0 ? "" : image.slice(0, slash);
    const slashes = image.split("/").length - 1;
    return slashes > 1 || (slash >= 0 && (/[.:]/.test(first) || first === "localhost")) ? first : "registry-1.docker.io";
}

/**
 * Whether the stack's Docker provider pulls `image` with the `entry` credentials: an address filed
 * under the image's pull host, or Docker Hub credentials under a key the provider reads for Hub,
 * which the stack also passes under each Hub pull host (dockerProviderAddresses).
 */
export function dockerProviderServes(entry: string, image: string): boolean {
    const host = dockerProviderRegistry(image);
    return dockerProviderKey(entry) === host || (DOCKER_HUB_CONFIG_KEYS.includes(entry) && DOCKER_HUB_PULL_HOSTS.includes(host));
}

/** The images the target pulls, with the field that sets each: every deployed image that names one. */
export function pulledImages(c: PlatformConfig): Array<{ field: string; image: string }> {
    return deployedImages(c).filter((i) => i.image !== "");
}

const DOCKER_HUB_KEYS = ["docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"];

/** Each image's registry and the entries that serve it, and the entries that serve none, on `target`. */
function coverage(plan: PlatformPlan, target: "kubernetes" | "docker") {
    const entries = plan.registryAuth ?? [];
    const serves = target === "kubernetes" ? kubeletServes : dockerProviderServes;
    const images = pulledImages(plan.config).map((i) => ({ ...i, registry: parseImage(i.image).registry, by: entries.filter((e) => serves(e, i.image)) }));
    const unused = entries.filter((e) => !images.some((i) => i.by.includes(e)));
    return { entries, images, unused };
}

/** "ghcr.io (images.trainer, images.vllm), docker.io (images.nginx)". */
function byRegistry(images: ReadonlyArray<{ field: string; registry: string }>): string {
    const groups = new Map<string, string[]>();
    for (const i of images) groups.set(i.registry, [...(groups.get(i.registry) ?? []), i.field]);
    return [...groups].map(([r, fields]) => `${r} (${fields.join(", ")})`).join(", ");
}

/**
 * registryAuth against the images the stack pulls: an image no entry serves is pulled without
 * these credentials (the nodes' own on Kubernetes, none on Docker), and an entry no image uses is
 * likely a misspelled registry. A warning each: a public image needs no credentials.
 */
export function checkRegistryCredentials(plan: PlatformPlan, target: "kubernetes" | "docker"): Finding {
    const check = "Registry credentials";
    const { entries, images, unused } = coverage(plan, target);
    const without =
        target === "kubernetes" ? "the nodes' own credentials pull it (none are needed for a public image)" : "the Docker daemon pulls it anonymously";
    if (plan.registryAuth === undefined) {
        const pulls = target === "kubernetes" ? "the nodes' own credentials pull every image" : "the Docker daemon pulls every image anonymously";
        const otherwise = target === "kubernetes" ? "registryAuth or node credentials" : "registryAuth";
        return ok(check, `no registryAuth: ${pulls}: ${byRegistry(images)} (an image in a private registry needs ${otherwise})`);
    }
    // The config edge refuses an auths naming no registry, so none here means its names were not
    // read: the CLI reads the stack file, where the secret is encrypted, and never decrypts it.
    if (entries.length === 0)
        return warn(
            check,
            `registryAuth is set, but its registries are not known here (a secret the stack file holds encrypted, not decrypted by the preflight): which images it serves is unchecked; the stack pulls from ${byRegistry(images)}`,
            `run the program's preflight (preflight: warn; pulumi preview), which reads the decrypted registries, or compare by hand: pulumi config get registryAuth | jq -r '.auths | keys[]'`,
        );
    const problems: string[] = [];
    const fixes: string[] = [];
    const uncovered = images.filter((i) => i.by.length === 0);
    // Docker Hub entries under a key the Docker provider reads no Hub credentials from are said once, with the image they miss.
    const explained = new Set<string>();
    for (const i of uncovered) {
        const key = dockerProviderRegistry(i.image);
        const hubEntries = entries.filter((e) => DOCKER_HUB_KEYS.includes(dockerProviderKey(e)) && kubeletServes(e, i.image));
        if (target === "docker" && DOCKER_HUB_PULL_HOSTS.includes(key) && hubEntries.length > 0) {
            for (const e of hubEntries) explained.add(e);
            problems.push(
                `${i.field} (${i.image}) is on Docker Hub, and the Docker provider reads Docker Hub credentials under ${DOCKER_HUB_CONFIG_KEYS.map((k) => `"${k}"`).join(", ")} (or "${key}"), not under ${hubEntries.map((e) => `"${e}"`).join(", ")}: ${without}`,
            );
            fixes.push(`file the Docker Hub credentials in registryAuth under auths["https://index.docker.io/v1/"] (the key docker login writes)`);
        } else {
            const lookup =
                target === "docker" && key !== i.registry && key !== "registry-1.docker.io" ? ` (the Docker provider looks it up under "${key}")` : "";
            problems.push(`no registryAuth entry serves ${i.field} (${i.image}, registry ${i.registry}${lookup}): ${without}`);
            fixes.push(`add an entry for ${target === "docker" ? key : i.registry} to registryAuth if ${i.field} is private`);
        }
    }
    for (const e of unused.filter((x) => !explained.has(x))) {
        problems.push(
            `registryAuth entry "${e}" serves no image the stack pulls (their registries: ${[...new Set(images.map((i) => i.registry))].join(", ")})`,
        );
        fixes.push(`correct "${e}" to the registry of the image it is for, or remove it`);
    }
    if (problems.length > 0) return warn(check, problems.join("; "), [...new Set(fixes)].join("; "));
    return ok(check, `every image the stack pulls has a registryAuth entry: ${byRegistry(images)}`);
}
