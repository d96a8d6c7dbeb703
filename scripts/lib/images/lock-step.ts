/**
 * The lock step (`npm run images -- lock [image...]`), run on the user's machine, where the Hub, GitHub
 * and the base images' registries are reachable: it records what it reads there (trust on first use)
 * in images/lock.json, which the user reads and commits. Each base tag becomes a digest; each pinned
 * source's commit (a recorded one, or the one its resolve rule names) and the sha256 of each script
 * at that commit, as trainer/fetch-scripts.sh --print computes them (the image build checks the same).
 */
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { type ImageLock, type ImageName, type ImagePins, type LockFile, type PinnedSource, readLock, readPins, writeLock } from "./pins";
import { BASE_MIRROR_ENV, baseMirrorHint, type BaseMirrors, mirroredRef, parseBaseMirrors } from "./base-mirrors";
import { manifestDigest, RegistryError, UnreachableError } from "./registry";
import { parseImage } from "../../../components/preflight/registry";

/** A step that cannot complete: the message names what and the fix. */
export class ImageStepError extends Error {}

/**
 * The commit a source without a recorded one resolves to: the newest commit of its branch at or
 * before its `asOf` (the day the facts were read), from the Hub's commit list
 * (GET /api/<type>s/<repo>/commits/<branch>, huggingface_hub `list_repo_commits`).
 */
export async function resolveHubCommit(source: PinnedSource, hubUrl = process.env.AGENTRL_HF_ENDPOINT ?? "https://huggingface.co"): Promise<string> {
    const rule = source.resolve;
    if (!source.repo.startsWith("huggingface:") || rule === undefined)
        throw new ImageStepError(`source ${source.name} (${source.repo}) has no revision and no Hub resolve rule: record its commit in the pins`);
    const repo = source.repo.slice("huggingface:".length);
    const url = `${hubUrl.replace(/\/$/, "")}/api/${source.repoType ?? "model"}s/${repo}/commits/${encodeURIComponent(rule.branch)}`;
    const res = await fetch(url, { signal: AbortSignal.timeout(30_000) }).catch((e: Error & { cause?: { code?: string } }) => {
        const why = e.name === "TimeoutError" ? "no answer in 30 s" : (e.cause?.code ?? e.message);
        throw new ImageStepError(
            `source ${source.name}: could not reach ${new URL(url).host} (${why}) for ${url}: set AGENTRL_HF_ENDPOINT to a Hub mirror that serves /api/<type>s/<repo>/commits/<branch>, or run the lock step where ${new URL(url).host} is reachable`,
        );
    });
    if (!res.ok) throw new ImageStepError(`source ${source.name}: ${url} answered HTTP ${res.status}`);
    const commits = (await res.json()) as Array<{ id?: string; date?: string }>;
    const asOf = Date.parse(rule.asOf);
    const pick = commits
        .filter((c) => typeof c.id === "string" && /^[0-9a-f]{40}$/.test(c.id) && typeof c.date === "string" && Date.parse(c.date) <= asOf)
        .sort((a, b) => Date.parse(b.date as string) - Date.parse(a.date as string))[0];
    if (pick?.id === undefined) throw new ImageStepError(`source ${source.name}: ${repo} has no commit on ${rule.branch} at or before ${rule.asOf}`);
    return pick.id;
}

/** The `--build-arg K=V` lines trainer/fetch-scripts.sh --print prints for a set at a commit. */
export function scriptDigests(root: string, set: string, commit: string): Record<string, string> {
    const r = spawnSync("bash", [path.join(root, "trainer", "fetch-scripts.sh"), "--print", set, commit], { encoding: "utf8", timeout: 120_000 });
    if (r.status !== 0)
        throw new ImageStepError(
            `trainer/fetch-scripts.sh --print ${set} ${commit} failed (set AGENTRL_FETCH_BASE_URL to a mirror of huggingface.co and raw.githubusercontent.com if they are out of reach):\n${r.stderr}`,
        );
    const out: Record<string, string> = {};
    for (const line of r.stdout.split("\n")) {
        const m = /^--build-arg ([A-Z0-9_]+)=(\S+)$/.exec(line.trim());
        if (m) out[m[1] as string] = m[2] as string;
    }
    return out;
}

export interface LockOptions {
    /** Where images/*.pins.json and images/lock.json are (the repository root unless a test says otherwise). */
    readonly pinsRoot: string;
    /** The repository root (trainer/fetch-scripts.sh). */
    readonly root: string;
    /** A Docker config.json for private base registries; anonymous otherwise. */
    readonly dockerConfigJson?: string;
    readonly resolveCommit?: (s: PinnedSource) => Promise<string>;
    /** Where each base registry is pulled through. @default AGENTRL_BASE_REGISTRY_MIRRORS */
    readonly baseMirrors?: BaseMirrors;
    readonly log?: (line: string) => void;
}

/** A base tag's digest, asked of its registry's mirror where one is set; every failure names the host and the fix. */
async function baseDigest(pins: ImagePins, o: LockOptions, mirrors: BaseMirrors): Promise<string> {
    const ref = mirroredRef(pins.base.ref, mirrors);
    const upstream = parseImage(pins.base.ref).registry;
    const via = ref === pins.base.ref ? "" : ` through its mirror (${ref})`;
    const digest = await manifestDigest(ref, o.dockerConfigJson).catch((e: unknown) => {
        if (e instanceof UnreachableError)
            throw new ImageStepError(`${pins.image}: base ${pins.base.ref}${via}: could not reach ${e.host} (${e.why}): ${baseMirrorHint(upstream, mirrors)}`);
        if (e instanceof RegistryError) throw new ImageStepError(`${pins.image}: base ${pins.base.ref}${via}: ${e.message}`);
        throw e;
    });
    if (digest === undefined)
        throw new ImageStepError(
            ref === pins.base.ref
                ? `${pins.image}: base ${pins.base.ref} is not in its registry: fix base.ref in images/${pins.image}.pins.json`
                : `${pins.image}: base ${pins.base.ref} is not in its mirror as ${ref}: check the mirror's ${BASE_MIRROR_ENV} entry for ${upstream}`,
        );
    return digest;
}

async function lockOne(pins: ImagePins, o: LockOptions, mirrors: BaseMirrors): Promise<ImageLock> {
    const log = o.log ?? (() => undefined);
    const digest = await baseDigest(pins, o, mirrors);
    log(`${pins.image}: base ${pins.base.ref} is ${digest}`);
    const args: Record<string, string> = {};
    for (const source of pins.sources) {
        const commit = source.revision ?? (await (o.resolveCommit ?? resolveHubCommit)(source));
        args[source.revisionArg] = commit;
        if (source.revision === null) log(`${pins.image}: ${source.repo} ${source.resolve?.branch} as of ${source.resolve?.asOf} is ${commit}`);
        if (source.scripts.length === 0) continue;
        if (source.fetchSet === undefined) throw new ImageStepError(`${pins.image}: source ${source.name} has scripts and no fetchSet`);
        const printed = scriptDigests(o.root, source.fetchSet, commit);
        for (const s of source.scripts) {
            const d = printed[s.digestArg];
            if (d === undefined) throw new ImageStepError(`${pins.image}: fetch-scripts.sh --print ${source.fetchSet} printed no ${s.digestArg}`);
            args[s.digestArg] = d;
            log(`${pins.image}: ${s.file} at ${commit}: sha256 ${d} (read it before you commit the lock)`);
        }
    }
    return { base: `${pins.base.ref}@${digest}`, args };
}

/** Fills images/lock.json for `images` (the others keep their entries); returns the new lock. */
export async function fillLock(images: readonly ImageName[], o: LockOptions): Promise<LockFile> {
    const mirrors = o.baseMirrors ?? parseBaseMirrors(process.env[BASE_MIRROR_ENV]);
    const lock = readLock(o.pinsRoot);
    const next: Record<string, ImageLock> = { ...lock.images };
    for (const image of images) next[image] = await lockOne(readPins(image, o.pinsRoot), o, mirrors);
    const written: LockFile = { ...lock, images: next as LockFile["images"] };
    writeLock(written, o.pinsRoot);
    return written;
}
