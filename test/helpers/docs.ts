/**
 * README.md and docs/ as the tests read them: the files, their links, the `npm run` commands in their
 * shell blocks, and the stack files the guides show (a ```yaml block whose first line is
 * `# Pulumi.<name>.yaml`), and the numbered commands of a one-page path (docs/guides/zero-to-up.md).
 */
import * as fs from "node:fs";
import * as path from "node:path";

export const REPO = path.resolve(__dirname, "..", "..");

/** README.md and every markdown file under docs/, relative to the repository. */
export function docFiles(): string[] {
    const out = ["README.md"];
    const walk = (dir: string) => {
        for (const e of fs.readdirSync(path.join(REPO, dir), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
            const rel = path.join(dir, e.name);
            if (e.isDirectory()) walk(rel);
            else if (e.name.endsWith(".md")) out.push(rel);
        }
    };
    walk("docs");
    return out;
}

export const readDoc = (rel: string) => fs.readFileSync(path.join(REPO, rel), "utf8");

/** The fenced blocks of a markdown text, with their info string. */
export function fencedBlocks(text: string): Array<{ info: string; body: string }> {
    const out: Array<{ info: string; body: string }> = [];
    const re = /^( *)```([^\n`]*)\n([\s\S]*?)^\1```\s*$/gm;
    for (const m of text.matchAll(re)) {
        const indent = m[1]!.length;
        out.push({
            info: m[2]!.trim(),
            body: m[3]!
                .split("\n")
                .map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length)))
                .join("\n"),
        });
    }
    return out;
}

/** A markdown text without its fenced blocks (headings and links are read from the prose only). */
export const prose = (text: string) => text.replace(/^( *)```[^\n]*\n[\s\S]*?^\1```\s*$/gm, "");

/** GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`. */
export function anchorOf(heading: string): string {
    return heading
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}_\- ]/gu, "")
        .replace(/ /g, "-");
}

/** The anchors of a markdown file's headings (GitHub numbers repeats: `a`, `a-1`, ...). */
export function anchors(text: string): Set<string> {
    const seen = new Map<string, number>();
    const out = new Set<string>();
    for (const m of prose(text).matchAll(/^#{1,6} (.+)$/gm)) {
        const a = anchorOf(m[1]!);
        const n = seen.get(a) ?? 0;
        out.add(n === 0 ? a : `${a}-${n}`);
        seen.set(a, n + 1);
    }
    return out;
}

/** Every `[text](target)` of a file's prose (tables included), targets that are not URLs. */
export function localLinks(text: string): string[] {
    return [...prose(text).matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z]+:/.test(t));
}

/** A stack file a guide shows: its name (`Pulumi.<name>.yaml`), the doc it is in and its text. */
export interface DocStack {
    readonly name: string;
    readonly doc: string;
    readonly text: string;
}

export function docStacks(): DocStack[] {
    return docFiles().flatMap((doc) =>
        fencedBlocks(readDoc(doc))
            .filter((b) => b.info === "yaml")
            .flatMap((b) => {
                const m = /^# (Pulumi\.([a-z0-9-]+)\.yaml)\n/.exec(b.body);
                return m === null ? [] : [{ name: m[2]!, doc, text: b.body }];
            }),
    );
}

/** Every `npm run <script> -- <args>` line in a `sh` block of a doc (the comment after `#` cut), with its doc; `text` blocks are transcripts. */
export function docCommands(): Array<{ doc: string; script: string; args: string[]; line: string }> {
    return docFiles().flatMap((doc) =>
        fencedBlocks(readDoc(doc))
            .filter((b) => b.info === "sh")
            .flatMap((b) => b.body.split("\n"))
            .map((l) =>
                l
                    .replace(/^\$ /, "")
                    .replace(/\s+#.*$/, "")
                    .trim(),
            )
            .flatMap((line) => {
                const m = /^npm run ([a-z:]+)(?: -- (.*))?$/.exec(line);
                return m === null ? [] : [{ doc, script: m[1]!, args: (m[2] ?? "").split(/\s+/).filter((a) => a !== ""), line }];
            }),
    );
}

/** The one-page path from zero to a planned, preflighted stack: its tests run its numbered commands. */
export const ZERO_TO_UP = "docs/guides/zero-to-up.md";

/** A numbered command of a page: `# N. what` above it in an sh block; `&&` chains are one command. */
export interface PageCommand {
    readonly n: number;
    readonly line: string;
    /** The chain's parts. */
    readonly parts: readonly string[];
}

/** The numbered commands of a page's sh blocks, in order; unnumbered blocks give `n` 0. */
export function pageCommands(text: string): PageCommand[] {
    const out: PageCommand[] = [];
    for (const b of fencedBlocks(text).filter((b) => b.info === "sh")) {
        let n = 0;
        for (const raw of b.body.split("\n")) {
            const line = raw.trim();
            const m = /^# (\d+)\. /.exec(line);
            if (m !== null) n = Number(m[1]);
            else if (line !== "" && !line.startsWith("#")) {
                out.push({ n, line, parts: line.split(" && ").map((p) => p.trim()) });
                n = 0;
            }
        }
    }
    return out;
}
