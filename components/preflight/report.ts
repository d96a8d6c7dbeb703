/**
 * What a preflight check says, and how the findings are shown: an aligned table for people
 * (colour only on a TTY), JSON for CI, and the exit code (1 when any check fails); and the
 * vocabulary every check shares (a read, a quantity, an error's first line).
 */
import { quantityValue } from "../shared/quantity";

export type Status = "ok" | "warn" | "fail";

/** One prerequisite, what was found on the target, and what to do about it. */
export interface Finding {
    /** The prerequisite, short ("GPU node", "StorageClass"). */
    readonly check: string;
    readonly status: Status;
    /** What the target has (or said), in one sentence. */
    readonly found: string;
    /** What to do; empty when nothing needs doing. */
    readonly fix: string;
}

export const ok = (check: string, found: string, fix = ""): Finding => ({ check, status: "ok", found, fix });
export const warn = (check: string, found: string, fix: string): Finding => ({ check, status: "warn", found, fix });
export const fail = (check: string, found: string, fix: string): Finding => ({ check, status: "fail", found, fix });

export interface Summary {
    readonly ok: number;
    readonly warn: number;
    readonly fail: number;
}

export function summarize(findings: readonly Finding[]): Summary {
    return {
        ok: findings.filter((f) => f.status === "ok").length,
        warn: findings.filter((f) => f.status === "warn").length,
        fail: findings.filter((f) => f.status === "fail").length,
    };
}

/** 0 when no check fails (warnings included), 1 otherwise. */
export function exitCodeOf(findings: readonly Finding[]): 0 | 1 {
    return findings.some((f) => f.status === "fail") ? 1 : 0;
}

/** What the report says it ran against. */
export interface ReportHeader {
    readonly stack: string;
    /** "kubernetes context prod-gpu-cluster", "docker unix:///var/run/docker.sock". */
    readonly target: string;
}

const COLOUR: Readonly<Record<Status, string>> = { ok: "\x1b[32m", warn: "\x1b[33m", fail: "\x1b[31m" };
const RESET = "\x1b[0m";
const LABEL: Readonly<Record<Status, string>> = { ok: "ok", warn: "WARN", fail: "FAIL" };

/** Splits `text` into lines of at most `width` characters, at spaces where it can. */
export function wrap(text: string, width: number): string[] {
    const out: string[] = [];
    for (const para of text.split("\n")) {
        let line = "";
        for (const word of para.split(" ")) {
            if (line === "") line = word;
            else if (line.length + 1 + word.length <= width) line += ` ${word}`;
            else {
                out.push(line);
                line = word;
            }
            while (line.length > width) {
                out.push(line.slice(0, width));
                line = line.slice(width);
            }
        }
        out.push(line);
    }
    return out;
}

/**
 * The terminal table: STATUS, CHECK, FOUND, with the fix under FOUND (`fix:`), wrapped to
 * `width` columns; a summary line last. `colour` only when stdout is a TTY.
 */
export function renderTable(header: ReportHeader, findings: readonly Finding[], opts: { colour?: boolean; width?: number } = {}): string {
    const width = Math.max(80, opts.width ?? 120);
    const statusW = 4;
    const checkW = Math.min(28, Math.max(5, ...findings.map((f) => f.check.length)));
    const indent = 2 + statusW + 2 + checkW + 2;
    const textW = Math.max(30, width - indent);
    const paint = (s: Status, text: string) => (opts.colour ? `${COLOUR[s]}${text}${RESET}` : text);
    const lines = [`preflight ${header.stack}: ${header.target}`, "", `  ${"".padEnd(statusW)}  ${"CHECK".padEnd(checkW)}  FOUND / fix`];
    for (const f of findings) {
        const checkLines = wrap(f.check, checkW);
        const body = [...wrap(f.found, textW), ...(f.fix ? wrap(`fix: ${f.fix}`, textW - 2).map((l, i) => (i === 0 ? l : `  ${l}`)) : [])];
        const rows = Math.max(checkLines.length, body.length);
        for (let i = 0; i < rows; i++) {
            const status = i === 0 ? paint(f.status, LABEL[f.status].padEnd(statusW)) : "".padEnd(statusW);
            lines.push(`  ${status}  ${(checkLines[i] ?? "").padEnd(checkW)}  ${body[i] ?? ""}`.trimEnd());
        }
    }
    const s = summarize(findings);
    const verdict = s.fail > 0 ? paint("fail", `${s.fail} failed`) : paint("ok", "nothing failed");
    lines.push("", `${findings.length} check${findings.length === 1 ? "" : "s"}: ${s.ok} ok, ${s.warn} warning${s.warn === 1 ? "" : "s"}, ${verdict}`);
    return `${lines.join("\n")}\n`;
}

/** The `--json` document. */
export function renderJson(header: ReportHeader, findings: readonly Finding[]): string {
    return `${JSON.stringify({ ...header, findings, summary: summarize(findings), exitCode: exitCodeOf(findings) }, null, 2)}\n`;
}

/** A read from the target: the value, or why it could not be read. */
export type Read<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string; readonly forbidden?: boolean };

/** The first non-empty line of a tool's error, without its "error: " prefix. */
export const firstLine = (s: string) =>
    s
        .split("\n")
        .map((l) => l.trim())
        .find((l) => l !== "")
        ?.replace(/^error: /i, "") ?? "";

/** The value of a quantity the API server wrote ("7910m", "2113992Ki", "8"); NaN when unreadable. */
export function value(q: unknown): number {
    if (typeof q === "number") return q;
    if (typeof q !== "string") return Number.NaN;
    try {
        return quantityValue(q);
    } catch {
        const n = Number(q);
        return Number.isFinite(n) ? n : Number.NaN;
    }
}

/** A quantity for people: "1.5 CPU", "64 GiB". */
export function human(resource: string, v: number): string {
    if (/memory|storage/.test(resource)) {
        const gib = v / 1024 ** 3;
        return gib >= 1 ? `${Number(gib.toFixed(1))} GiB` : `${Math.round(v / 1024 ** 2)} MiB`;
    }
    return String(Number(v.toFixed(3)));
}
