/**
 * The Harbor path's config rules (pure): each task image's pool key, and every problem with
 * `harbor` at once, each naming the field and the fix.
 *
 * One warm pool per task image: a Harbor task runs in its own image (`[environment].docker_image`),
 * and a pool's sandboxes all run its template's one image. Each pool is sized for the whole burst
 * (sandboxes.poolSize, pool-size.ts), not a share of it: a GRPO group is `numGenerations` rollouts
 * of one task, so a burst of claims can all want the same image.
 */
import { createHash } from "node:crypto";
import { MAX_TASK_IMAGES } from "./harbor-facts";
import { sandboxPoolOf } from "./sandbox-providers";
import type { ParsedConfig } from "./schema";
import type { HarborTaskImage, PlatformConfig, ResolvedHarbor } from "./types";

/** Longest slug of an image's repository name kept in a key (the key also carries 6 hex of the image's hash). */
const KEY_SLUG = 24;

/**
 * The DNS label naming a task image's pool objects and labelling its pods: the entry's `name`, else
 * the image's repository name (last path segment) and 6 hex of the sha256 of the whole reference, so
 * two images with one repository name (another registry, tag or digest) never share a pool name, and
 * a key changes only when its image does.
 */
export function taskPoolKey(image: string, name?: string): string {
    if (name !== undefined) return name;
    const repository = image.split("@")[0].split("/").pop() ?? "";
    const slug = repository
        .split(":")[0]
        .toLowerCase()
        .replace(/[^a-z0-9-]+/g, "-")
        .replace(/-+/g, "-")
        .replace(/^-+|-+$/g, "")
        .slice(0, KEY_SLUG)
        .replace(/-+$/, "");
    const hash = createHash("sha256").update(image).digest("hex").slice(0, 6);
    return `${slug === "" ? "task" : slug}-${hash}`;
}

/** `harbor` with each task image's pool key. */
export function resolveHarbor(h: NonNullable<ParsedConfig["harbor"]>): ResolvedHarbor {
    return {
        agent: h.agent,
        taskImages: h.taskImages.map((t): HarborTaskImage => ({ ...t, key: taskPoolKey(t.image, t.name) })),
    };
}

/**
 * An image reference as a registry resolves it (the grammar of distribution/reference's regexp.go):
 * an optional registry host[:port], lower-case path components, an optional tag, an optional sha256 digest.
 */
const DOMAIN = "[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?";
const COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const IMAGE_REFERENCE = new RegExp(`^(?:${DOMAIN}/)?${COMPONENT}(?:/${COMPONENT})*(?::[\\w][\\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$`);

/** Why `ref` is not an image reference; undefined when it is one. */
export function imageReferenceProblem(ref: string): string | undefined {
    if (IMAGE_REFERENCE.test(ref) && ref.split("@")[0].length <= 255) return undefined;
    return `'${ref}' is not an image reference: [<registry>/]<path>[:<tag>][@sha256:<64 hex>], the path in lower case (e.g. ghcr.io/org/task@sha256:<digest>)`;
}

/**
 * The Harbor path claims each trial from an agent-sandbox warm pool (python/agent_rl_sandbox/harbor_env.py):
 * the same reasons as the black-box refusals (sandbox-providers.ts DOCKER_BLACKBOX_REFUSED, HOSTED_BLACKBOX_REFUSED).
 */
function placementProblems(c: PlatformConfig): string[] {
    if (c.training.layout !== "blackbox") {
        return [
            `harbor: the Harbor path is black box (the agent runs in a sandbox and calls the served model through the ingress), but training.layout is ${c.training.layout}: set layout to blackbox, or remove harbor`,
        ];
    }
    if (c.target.kind === "docker") {
        return [
            "harbor: refused on the docker target: each Harbor trial is a claim of an agent-sandbox warm pool (one per task image), and on Docker no sandbox backend drives the fixed pool and the trainer could not read the forwarder's trace, so it would train on the in-sandbox capture proxy's, which the agent's uid can rewrite. Use a Kubernetes target (sandboxes.provider agent-sandbox, its default there)",
        ];
    }
    if (sandboxPoolOf(c)?.controller !== "agent-sandbox") {
        return [
            `harbor: each Harbor trial is a claim of an agent-sandbox warm pool (one per task image); provider ${c.sandboxes.provider} has no claim backend: set sandboxes.provider to agent-sandbox (the default on Kubernetes)`,
        ];
    }
    return [];
}

/** Problems with the task image list: empty, too long, bad references, an image or a pool name twice. */
function taskImageProblems(h: ResolvedHarbor): string[] {
    const t = h.taskImages;
    if (t.length === 0) {
        return [
            "harbor.taskImages: empty: list the image of every Harbor task the run trains on ([environment].docker_image of each task.toml), e.g. [{ image: <registry>/<task>@sha256:<digest> }]; each gets a warm pool, and a task whose image no pool serves is refused before any claim",
        ];
    }
    const problems: string[] = [];
    if (t.length > MAX_TASK_IMAGES) {
        problems.push(
            `harbor.taskImages: ${t.length} task images, at most ${MAX_TASK_IMAGES}: each is a warm pool of its own holding a whole burst, so the sandbox pods grow with the count; train on fewer images per run (split the tasks over runs), or build tasks that share an image`,
        );
    }
    const byImage = new Map<string, number>();
    const byKey = new Map<string, number>();
    t.forEach((e, i) => {
        const field = `harbor.taskImages[${i}]`;
        const bad = imageReferenceProblem(e.image);
        if (bad !== undefined) problems.push(`${field}.image: ${bad}`);
        const sameImage = byImage.get(e.image);
        if (sameImage !== undefined) {
            problems.push(`${field}.image: '${e.image}' is harbor.taskImages[${sameImage}] too: one pool serves an image, list it once`);
        } else {
            byImage.set(e.image, i);
            const sameKey = byKey.get(e.key);
            if (sameKey !== undefined) {
                problems.push(
                    `${field}${e.name !== undefined ? ".name" : ""}: its pool name '${e.key}' is harbor.taskImages[${sameKey}]'s too: give ${e.name !== undefined ? "one of them" : "this entry"} another name`,
                );
            }
            byKey.set(e.key, i);
        }
    });
    return problems;
}

/** Every problem with `harbor`, all together. */
export function harborProblems(c: PlatformConfig): string[] {
    if (c.harbor === undefined) return [];
    return [...placementProblems(c), ...taskImageProblems(c.harbor)];
}
