/**
 * Registry mirrors for the images' bases (a pull-through cache such as distribution's `proxy`
 * mode, Harbor's proxy cache, Artifact Registry's remote repositories, ECR pull through cache):
 * `AGENTRL_BASE_REGISTRY_MIRRORS=docker.io=mirror.example.com/dockerhub,ghcr.io=mirror.example.com/ghcr`.
 * The lock step asks the mirror for a base tag's digest, the build pulls the base from the mirror
 * by that digest, and the lock keeps the upstream name: a manifest's digest is its content, so one
 * lock serves a build from the mirror or from the upstream registry alike.
 */
import { parseImage } from "../../../components/preflight/registry";

/** The environment variable that names the base images' mirrors. */
export const BASE_MIRROR_ENV = "AGENTRL_BASE_REGISTRY_MIRRORS";

/** A malformed mirror setting: the message names the entry and the form. */
export class MirrorSettingError extends Error {}

/** `upstream registry` -> `mirror host[/path prefix]`. */
export type BaseMirrors = Readonly<Record<string, string>>;

const HOST = /^[a-z0-9.-]+(:\d+)?$/;
const MIRROR = /^[a-z0-9.-]+(:\d+)?(\/[a-z0-9._-]+)*$/;

/** The setting's entries, or every malformed one at once. */
export function parseBaseMirrors(value: string | undefined): BaseMirrors {
    if (value === undefined || value.trim() === "") return {};
    const out: Record<string, string> = {};
    const problems: string[] = [];
    for (const entry of value
        .split(",")
        .map((e) => e.trim())
        .filter((e) => e !== "")) {
        const [from, to, ...rest] = entry.split("=");
        const upstream = from === "index.docker.io" ? "docker.io" : from;
        if (upstream === undefined || to === undefined || rest.length > 0 || !HOST.test(upstream) || !MIRROR.test(to))
            problems.push(`'${entry}' is not <registry>=<mirror host>[/<path>] (e.g. docker.io=mirror.example.com/dockerhub)`);
        else out[upstream] = to;
    }
    if (problems.length > 0) throw new MirrorSettingError(`${BASE_MIRROR_ENV}: ${problems.join("; ")}`);
    return out;
}

/** `ref` as pulled through its registry's mirror (`debian:bookworm-slim` -> `mirror.example.com/dockerhub/library/debian:bookworm-slim`), or `ref` itself. */
export function mirroredRef(ref: string, mirrors: BaseMirrors): string {
    const { registry, repository } = parseImage(ref);
    const mirror = mirrors[registry];
    if (mirror === undefined) return ref;
    const at = ref.indexOf("@");
    const name = at >= 0 ? ref.slice(0, at) : ref;
    const colon = name.lastIndexOf(":");
    const tag = colon > name.lastIndexOf("/") ? name.slice(colon) : "";
    return `${mirror}/${repository}${tag}${at >= 0 ? ref.slice(at) : ""}`;
}

/** The fix for a base registry the machine cannot reach: the mirror setting with this registry's entry. */
export function baseMirrorHint(registry: string, mirrors: BaseMirrors): string {
    const now = mirrors[registry];
    return now !== undefined
        ? `${BASE_MIRROR_ENV} sends ${registry} to ${now}: check that mirror, or fix its entry`
        : `set ${BASE_MIRROR_ENV}=${registry}=<your mirror host>[/<path>] (a pull-through cache of ${registry}; docs/guides/images.md "Mirrors")`;
}
