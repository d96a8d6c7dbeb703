/**
 * The check that the images and the program facts name one revision of each upstream: the facts
 * (components/config/programs.ts) were read at a revision, and the image must bake in the files of
 * that same revision, or the platform renders flags for a script the image does not hold.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { PROGRAMS } from "../../../components/config/programs";
import { DEFAULT_VLLM_IMAGE } from "../../../components/config/schema";
import { IMAGE_NAMES, type ImagePins, readPins, REPO_ROOT } from "./pins";

/** The program facts as the check sees them: each program's source. */
export interface FactSource {
    readonly program: string;
    readonly repo: string;
    readonly path: string;
    readonly revision: string;
}

export function factSources(): FactSource[] {
    return Object.entries(PROGRAMS).map(([program, p]) => ({ program, ...p.source }));
}

/** The OpenEnv commit python/pyproject.toml's `opencode` extra installs (every git URL of it must name one). */
export function pyprojectOpenenvRevisions(text: string): string[] {
    return [...new Set([...text.matchAll(/OpenEnv\.git@([0-9a-f]+)/g)].map((m) => m[1] as string))];
}

/**
 * Every disagreement between the pins, the program facts, the default vLLM image and the OpenEnv
 * revision the Python package and the sandbox image use, each naming both sides.
 */
export function revisionProblems(
    pins: readonly ImagePins[],
    facts: readonly FactSource[],
    pyproject: string,
    defaultVllmImage: string = DEFAULT_VLLM_IMAGE,
): string[] {
    const problems: string[] = [];
    for (const image of pins) {
        for (const source of image.sources) {
            const where = `images/${image.image}.pins.json sources.${source.name}`;
            if (source.revision !== null && source.factsRevision !== source.revision)
                problems.push(
                    `${where}: revision ${source.revision} but factsRevision ${source.factsRevision}: the image would hold another revision than the facts were read at`,
                );
            if (source.revision === null && source.resolve === undefined)
                problems.push(`${where}: no revision and no resolve rule: the lock cannot know which commit to take`);
            for (const f of facts.filter((f) => f.repo === source.repo))
                if (f.revision !== source.factsRevision)
                    problems.push(
                        `${where}: pins ${source.factsRevision} but components/config/programs.ts reads ${f.program} (${f.path}) at ${f.revision}: update the pins and the facts together`,
                    );
        }
        if (image.base.arg === "VLLM_IMAGE" && image.base.ref !== defaultVllmImage)
            problems.push(
                `images/${image.image}.pins.json base: ${image.base.ref} but the stack's default vLLM image (DEFAULT_VLLM_IMAGE) is ${defaultVllmImage}: the trainer's vLLM and the server's must be one version`,
            );
    }
    const openenv = [
        ...pins.flatMap((p) =>
            p.sources
                .filter((s) => s.repo === "github:huggingface/OpenEnv")
                .map((s) => ({ at: `images/${p.image}.pins.json sources.${s.name}`, rev: s.revision })),
        ),
        ...pins
            .filter((p) => p.base.openenvRevision !== undefined)
            .map((p) => ({ at: `images/${p.image}.pins.json base.openenvRevision`, rev: p.base.openenvRevision ?? null })),
        ...pyprojectOpenenvRevisions(pyproject).map((rev) => ({ at: "python/pyproject.toml (opencode extra)", rev })),
    ];
    const first = openenv[0];
    for (const o of openenv.slice(1))
        if (first !== undefined && o.rev !== first.rev)
            problems.push(
                `${o.at} names OpenEnv ${o.rev} but ${first.at} names ${first.rev}: the sandbox's proxy and the trainer's harness must be one OpenEnv revision`,
            );
    for (const p of pins)
        if (p.base.openenvRevision !== undefined && !p.base.ref.endsWith(`:sha-${p.base.openenvRevision.slice(0, 7)}`))
            problems.push(
                `images/${p.image}.pins.json base: ${p.base.ref} is not the sha-${p.base.openenvRevision.slice(0, 7)} tag of OpenEnv ${p.base.openenvRevision}`,
            );
    return problems;
}

/** The check on this repository's files. */
export function repositoryRevisionProblems(root = REPO_ROOT): string[] {
    return revisionProblems(
        IMAGE_NAMES.map((n) => readPins(n, root)),
        factSources(),
        fs.readFileSync(path.join(root, "python", "pyproject.toml"), "utf8"),
    );
}
