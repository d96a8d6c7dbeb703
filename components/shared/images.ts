/**
 * One rule for image references, shared by config validation, every component and the policy
 * pack's callers: what "pinned" means and how often a node pulls.
 */

/** An image pinned by digest (`<image>@sha256:<64 hex>`): its content can never change. */
export const IMAGE_DIGEST = /@sha256:[0-9a-f]{64}$/;

/** Whether an image reference is pinned by digest. */
export function pinnedByDigest(image: string): boolean {
    return IMAGE_DIGEST.test(image);
}

/**
 * Kubernetes imagePullPolicy for an image: pinned by digest, pull once (IfNotPresent); a tag may
 * move (`:latest`, a re-pushed tag), so pull on every start (Always), or nodes keep whichever
 * content they pulled first.
 */
export function imagePullPolicy(image: string): "IfNotPresent" | "Always" {
    return pinnedByDigest(image) ? "IfNotPresent" : "Always";
}
