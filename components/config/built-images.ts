/**
 * The images this repository builds, one name each: the name `npm run images` pushes them under
 * (`<registry>/<path>/<name>@sha256:...`), the Dockerfile, the stack field each fills, and the Python
 * each runs. Pages, messages and plan warnings name them from here; test/tooling/docs-facts.test.ts
 * fails on a page that names another. Pure data: no Pulumi, no I/O.
 */

/** The images `npm run images` builds, in the order it builds them (scripts/lib/images/pins.ts reads them). */
export const BUILT_IMAGE_NAMES = ["trainer-whitebox", "trainer-blackbox", "sandbox", "mtail"] as const;
export type BuiltImageName = (typeof BUILT_IMAGE_NAMES)[number];

export interface BuiltImage {
    readonly dockerfile: string;
    /** The stack field the images step writes it into, by digest. */
    readonly field: "images.trainer" | "sandboxes.image" | "images.mtail";
    /** The Python its programs run on, and where that was read; null where it runs no Python of ours. */
    readonly python: { readonly version: string; readonly source: string } | null;
}

/** The trainer images' Python: vLLM's image (vllm/vllm-openai:v0.29.0), as trainer/lock.py resolves the lock for (trainer/README.md). */
const TRAINER_PYTHON = { version: "3.12", source: "vllm/vllm-openai:v0.29.0's python3 (trainer/README.md: the lock's 3.12 markers)" };

export const BUILT_IMAGES: Readonly<Record<BuiltImageName, BuiltImage>> = {
    "trainer-whitebox": { dockerfile: "trainer/whitebox/Dockerfile", field: "images.trainer", python: TRAINER_PYTHON },
    "trainer-blackbox": { dockerfile: "trainer/blackbox/Dockerfile", field: "images.trainer", python: TRAINER_PYTHON },
    // The runtime and the forwarder run on the base's python3 (OpenEnv's sandbox image; python/README.md: 3.11 or later).
    sandbox: { dockerfile: "python/Dockerfile", field: "sandboxes.image", python: null },
    mtail: { dockerfile: "images/mtail/Dockerfile", field: "images.mtail", python: null },
};

/** The command that builds, pushes and names by digest every image a stack needs (docs/guides/images.md). */
export const IMAGES_COMMAND = "npm run images -- <stack> --to <registry>/<path>";

/** The built image a trainer layout needs. */
export const trainerImageName = (layout: string): BuiltImageName => (layout === "blackbox" ? "trainer-blackbox" : "trainer-whitebox");

/** How a message sends the user to make a built image: the command, the image's name, its Dockerfile and the field it sets. */
export function buildHint(image: BuiltImageName): string {
    const b = BUILT_IMAGES[image];
    return `${IMAGES_COMMAND} builds ${image} (${b.dockerfile}; docs/guides/images.md), pushes it and sets ${b.field} by digest`;
}
