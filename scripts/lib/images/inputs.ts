/**
 * An image's inputs and their hash: the Dockerfile, every file its COPY and ADD lines take from the
 * context (contents and mode: COPY keeps the mode in the layer), the build ARGs (the base by
 * digest, the pinned revisions and script digests) and the source overrides. The hash names the
 * image's tag, so a change to any byte that goes into the image gives a new tag. Pure but for
 * reading the context's files.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { ImageStepError } from "./lock-step";

/** One file of the build context: its context path, where it was read from, its mode bits and its bytes (read once: hashed and sent are the same). */
export interface ContextFile {
    readonly rel: string;
    readonly from: string;
    readonly mode: number;
    readonly body: Buffer;
}

/** A Dockerfile's instructions, continuation lines joined (Dockerfile reference: a trailing `\` escapes the newline), comments dropped. */
export function instructions(dockerfile: string): string[] {
    const out: string[] = [];
    let current = "";
    for (const raw of dockerfile.split("\n")) {
        const line = raw.trimEnd();
        // A comment line inside an instruction is removed before the continuation is read (the reference's "comment lines").
        if (/^\s*#/.test(line)) continue;
        if (line.endsWith("\\")) {
            current += `${line.slice(0, -1)} `;
            continue;
        }
        current += line;
        if (current.trim() !== "") out.push(current.trim());
        current = "";
    }
    if (current.trim() !== "") out.push(current.trim());
    return out;
}

/** The sources of one COPY/ADD (shell or JSON form), flags and the destination left out. */
function sourcesOf(rest: string): string[] {
    const body = rest.trim();
    let words: string[];
    const flags: string[] = [];
    const json = /^((?:--\S+\s+)*)(\[.*\])$/.exec(body);
    if (json) {
        flags.push(...(json[1] ?? "").split(/\s+/).filter((w) => w !== ""));
        words = JSON.parse(json[2] as string) as string[];
    } else {
        const all = body.split(/\s+/);
        while (all[0]?.startsWith("--")) flags.push(all.shift() as string);
        words = all;
    }
    return flags.some((f) => f.startsWith("--from")) ? [] : words.slice(0, -1);
}

/**
 * The context paths (files or folders) a Dockerfile's COPY and ADD lines take. Throws, naming the
 * line, for a source whose bytes the hash cannot see: an ADD from a URL or a git repository (fetch
 * it in a RUN step checked by its digest, as trainer/fetch-scripts.sh does), a heredoc, a wildcard.
 */
export function copiedSources(dockerfile: string): string[] {
    const out: string[] = [];
    for (const line of instructions(dockerfile)) {
        const m = /^(COPY|ADD)\s+(.*)$/i.exec(line);
        if (!m) continue;
        for (const s of sourcesOf(m[2] as string)) {
            if (/^[a-z][a-z0-9+.-]*:\/\//i.test(s) || s.startsWith("git@"))
                throw new ImageStepError(
                    `${line}: a remote source is not hashed into the image's tag: fetch it in a RUN step that checks its digest (trainer/fetch-scripts.sh)`,
                );
            if (s.startsWith("<<") || /[*?[]/.test(s))
                throw new ImageStepError(`${line}: ${s} is not a plain context path the step can hash: name each file or folder`);
            out.push(path.posix.normalize(s).replace(/\/$/, ""));
        }
    }
    return [...new Set(out)].sort();
}

/** Every file a source names, a folder walked in order (symlinks as files read through), each with its context path. */
function filesUnder(contextDir: string, rel: string, replace: Readonly<Record<string, string>>): ContextFile[] {
    const from = replace[rel] ?? path.join(contextDir, rel);
    if (!fs.existsSync(from)) throw new ImageStepError(`${rel} is not under the build context`);
    const st = fs.statSync(from);
    if (!st.isDirectory()) return [{ rel, from, mode: st.mode & 0o7777, body: fs.readFileSync(from) }];
    return fs
        .readdirSync(from)
        .sort()
        .flatMap((name) => filesUnder(contextDir, rel === "." ? name : `${rel}/${name}`, replace));
}

/** The context's files for a Dockerfile, sorted by context path: what its COPY and ADD lines take. */
export function contextFiles(dockerfile: string, contextDir: string, replace: Readonly<Record<string, string>> = {}): ContextFile[] {
    const byRel = new Map<string, ContextFile>();
    for (const rel of copiedSources(dockerfile)) for (const f of filesUnder(contextDir, rel, replace)) byRel.set(f.rel, f);
    return [...byRel.values()].sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
}

/** The hash that names an image's tag: the Dockerfile, each context file (path, mode, contents), the build ARGs and the source overrides. */
export function inputsHash(
    dockerfile: string,
    files: readonly ContextFile[],
    args: Readonly<Record<string, string>>,
    sources: Readonly<Record<string, string>>,
): string {
    const hash = createHash("sha256").update(`dockerfile\0${dockerfile}\0`);
    for (const f of files) hash.update(`file\0${f.rel}\0${f.mode.toString(8)}\0${f.body.length}\0`).update(f.body);
    for (const k of Object.keys(args).sort()) hash.update(`arg\0${k}=${args[k]}\0`);
    for (const k of Object.keys(sources).sort()) hash.update(`source\0${k}=${sources[k]}\0`);
    return hash.digest("hex").slice(0, 24);
}
