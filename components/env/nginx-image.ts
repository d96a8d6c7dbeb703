/**
 * Whether the configured nginx image can run the env router: it re-resolves the replica names with
 * `server ... resolve`, which needs nginx >= 1.27.3 (nginx CHANGES, 1.27.3). Pure.
 */
import { NGINX_MIN_VERSION_FOR_RESOLVE } from "./router";

/**
 * The nginx version an image tag names ("nginxinc/nginx-unprivileged:1.27-alpine" -> "1.27"),
 * or undefined when the tag names none (latest, stable, mainline, alpine, a bare digest).
 */
export function nginxImageVersion(image: string): string | undefined {
    const ref = image.split("@")[0] ?? image;
    const slash = ref.lastIndexOf("/");
    const colon = ref.lastIndexOf(":");
    if (colon <= slash) return undefined;
    const m = /^(\d+)\.(\d+)(?:\.(\d+))?/.exec(ref.slice(colon + 1));
    if (m === null) return undefined;
    return m[3] !== undefined ? `${m[1]}.${m[2]}.${m[3]}` : `${m[1]}.${m[2]}`;
}

/** Whether an image tag can serve `server ... resolve`; a floating "1.27" tag is the newest 1.27.x (>= 1.27.3). */
export function nginxImageSupportsResolve(image: string): boolean {
    const v = nginxImageVersion(image);
    if (v === undefined) return true;
    const [major = 0, minor = 0, patch] = v.split(".").map(Number);
    const [minMajor = 0, minMinor = 0, minPatch = 0] = NGINX_MIN_VERSION_FOR_RESOLVE.split(".").map(Number);
    if (major !== minMajor) return major > minMajor;
    if (minor !== minMinor) return minor > minMinor;
    return patch === undefined || patch >= minPatch;
}

/** The images.nginx problem, when the image is too old for the router. */
export function nginxImageProblems(image: string): string[] {
    if (nginxImageSupportsResolve(image)) return [];
    return [
        `images.nginx: the env router re-resolves replica names with "server ... resolve", which needs nginx >= ${NGINX_MIN_VERSION_FOR_RESOLVE}; '${image}' is ${nginxImageVersion(image)}: use nginxinc/nginx-unprivileged:1.27-alpine or newer`,
    ];
}
