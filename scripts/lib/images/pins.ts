/**
 * The pinned upstream inputs of each image this repository builds (images/<image>.pins.json) and
 * the trust-on-first-use lock beside them (images/lock.json). Pure reads and checks: the lock step,
 * the build step and the tests share them.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { BUILT_IMAGE_NAMES, type BuiltImageName } from "../../../components/config/built-images";

export const REPO_ROOT = path.resolve(__dirname, "..", "..", "..");
/** The images this repository builds: one list, components/config/built-images.ts. */
export const IMAGE_NAMES = BUILT_IMAGE_NAMES;
export type ImageName = BuiltImageName;
/** The command that fills the lock (docs/guides/images.md). */
export const LOCK_COMMAND = "npm run images -- lock";

export interface PinnedScript {
    readonly file: string;
    /** The build ARG that carries its sha256 (trainer/fetch-scripts.sh's table). */
    readonly digestArg: string;
}

export interface PinnedSource {
    readonly name: string;
    /** `github:<owner>/<repo>` or `huggingface:<repo>`. */
    readonly repo: string;
    /** A Hub repository's type (its API path /api/<type>s/): kernels-community/* are `kernel`. @default "model" */
    readonly repoType?: "model" | "kernel";
    readonly revisionArg: string;
    /** The 40-hex commit, or null where none was recorded (then `resolve` says which one the lock takes). */
    readonly revision: string | null;
    /** The newest commit of `branch` at or before `asOf`: the commit the facts were read at. */
    readonly resolve?: { readonly branch: string; readonly asOf: string };
    /** The revision the program facts name for what this image holds (components/config/programs.ts). */
    readonly factsRevision: string;
    readonly readAt: string;
    readonly took: string;
    /** trainer/fetch-scripts.sh's set for the scripts. */
    readonly fetchSet?: string;
    readonly scripts: readonly PinnedScript[];
}

export interface ImagePins {
    readonly image: ImageName;
    readonly dockerfile: string;
    /** The build context, relative to the repository root. */
    readonly context: string;
    readonly base: {
        readonly arg: string;
        /** A tag: the lock records its digest. */
        readonly ref: string;
        /** The sandbox base: the OpenEnv commit its tag was built from. */
        readonly openenvRevision?: string;
        readonly readAt: string;
        readonly took: string;
    };
    readonly sources: readonly PinnedSource[];
}

export interface ImageLock {
    /** `<base ref>@sha256:<digest>`, or null until the lock step ran. */
    readonly base: string | null;
    /** Every build ARG the sources pin (revisions and script digests), null until the lock step ran. */
    readonly args: Readonly<Record<string, string | null>>;
}
export interface LockFile {
    readonly $comment?: string;
    readonly images: Readonly<Record<ImageName, ImageLock>>;
}

const pinsPath = (root: string, image: ImageName) => path.join(root, "images", `${image}.pins.json`);
export const lockPath = (root: string) => path.join(root, "images", "lock.json");

export function readPins(image: ImageName, root = REPO_ROOT): ImagePins {
    const pins = JSON.parse(fs.readFileSync(pinsPath(root, image), "utf8")) as ImagePins;
    if (pins.image !== image) throw new Error(`${pinsPath(root, image)}: "image" is '${pins.image}', not '${image}'`);
    return pins;
}

export function readLock(root = REPO_ROOT): LockFile {
    return JSON.parse(fs.readFileSync(lockPath(root), "utf8")) as LockFile;
}

export function writeLock(lock: LockFile, root = REPO_ROOT): void {
    const tmp = `${lockPath(root)}.${process.pid}`;
    fs.writeFileSync(tmp, `${JSON.stringify(lock, null, 2)}\n`);
    fs.renameSync(tmp, lockPath(root));
}

/** Every build ARG an image's sources pin, in order: each revision, then its scripts' digests. */
export function pinnedArgs(pins: ImagePins): string[] {
    return pins.sources.flatMap((s) => [s.revisionArg, ...s.scripts.map((f) => f.digestArg)]);
}

const COMMIT = /^[0-9a-f]{40}$/;
const SHA256 = /^[0-9a-f]{64}$/;
const isDigestArg = (pins: ImagePins, arg: string) => pins.sources.some((s) => s.scripts.some((f) => f.digestArg === arg));

/**
 * The build ARGs of an image from its pins and the lock, or every reason the build is refused:
 * an entry the lock lacks (naming the command that fills it), a malformed one, or a lock that
 * names another revision than the pins (the pins changed after the lock was made).
 */
export function buildArgs(pins: ImagePins, lock: LockFile): { args: Record<string, string>; problems: string[] } {
    const entry = lock.images[pins.image];
    const problems: string[] = [];
    const args: Record<string, string> = {};
    const where = `images/lock.json images.${pins.image}`;
    if (entry === undefined)
        return { args, problems: [`${where}: missing: run '${LOCK_COMMAND} ${pins.image}' (trust on first use: read what it fetched, then commit the lock)`] };
    const base = entry.base;
    if (base === null || base === undefined)
        problems.push(`${where}.base: not filled: run '${LOCK_COMMAND} ${pins.image}' to record ${pins.base.ref} by digest`);
    else if (!base.startsWith(`${pins.base.ref}@sha256:`) || !SHA256.test(base.slice(base.lastIndexOf(":") + 1)))
        problems.push(
            `${where}.base: '${base}' is not ${pins.base.ref}@sha256:<64 hex>: the pins name another base; run '${LOCK_COMMAND} ${pins.image}' again`,
        );
    else args[pins.base.arg] = base;
    for (const source of pins.sources)
        if (
            source.revision !== null &&
            entry.args[source.revisionArg] !== source.revision &&
            entry.args[source.revisionArg] !== null &&
            entry.args[source.revisionArg] !== undefined
        )
            problems.push(
                `${where}.args.${source.revisionArg}: '${entry.args[source.revisionArg]}' but images/${pins.image}.pins.json pins ${source.revision}: the pins changed after the lock; run '${LOCK_COMMAND} ${pins.image}' again`,
            );
    for (const arg of pinnedArgs(pins)) {
        const value = entry.args[arg];
        if (value === null || value === undefined) {
            problems.push(
                `${where}.args.${arg}: not filled: run '${LOCK_COMMAND} ${pins.image}' (trust on first use: read what it fetched, then commit the lock)`,
            );
            continue;
        }
        const digest = isDigestArg(pins, arg);
        if (!(digest ? SHA256 : COMMIT).test(value)) {
            problems.push(`${where}.args.${arg}: '${value}' is not ${digest ? "a sha256 (64 lowercase hex)" : "a full 40-hex commit"}`);
            continue;
        }
        args[arg] = value;
    }
    const known = new Set(pinnedArgs(pins));
    for (const arg of Object.keys(entry.args))
        if (!known.has(arg))
            problems.push(`${where}.args.${arg}: no source of images/${pins.image}.pins.json pins it: remove it or run '${LOCK_COMMAND} ${pins.image}'`);
    return problems.length > 0 ? { args: {}, problems } : { args, problems };
}
