/**
 * training.extraArgs for a named program, checked against the program's own facts (programs.ts)
 * the way its argparse parser would read them: every flag one of its own and not one the platform
 * renders (that one has a setting: the message names it), a `store` flag followed by one value of its
 * type (int, float) and in its choices, a `store_true` flag with no value, no flag twice, no stray
 * word. Pure.
 */
import { nearMiss } from "./near-miss";
import { ARG_SOURCES } from "./program-settings";
import type { ProgramArgMap, ProgramFacts, ProgramFlag } from "./programs";

const FIELD = "training.extraArgs";

/** What Python's int() takes of a command-line word (argparse `type=int`). */
const PY_INT = /^\s*[-+]?\d(_?\d)*\s*$/;
/** What Python's float() takes (argparse `type=float`): decimals, exponents, inf and nan. */
const PY_FLOAT = /^\s*[-+]?((\d(_?\d)*)?\.?\d(_?\d)*([eE][-+]?\d(_?\d)*)?|\d(_?\d)*\.|inf|infinity|nan)\s*$/i;

/** The problem with `value` for `flag` (its type and choices), or undefined. */
function valueProblem(flag: string, spec: ProgramFlag, value: string): string | undefined {
    if (spec.type === "int" && !PY_INT.test(value)) return `${FIELD}: ${flag} takes a whole number (argparse type=int), got '${value}'`;
    if (spec.type === "float" && !PY_FLOAT.test(value)) return `${FIELD}: ${flag} takes a number (argparse type=float), got '${value}'`;
    if (spec.choices !== undefined && !spec.choices.includes(value)) return `${FIELD}: ${flag} takes one of ${spec.choices.join(", ")}, got '${value}'`;
    return undefined;
}

/** How the message names what a rendered flag comes from. */
function renderedFrom(p: ProgramFacts, flag: string): string {
    const keys = (Object.keys(p.args) as (keyof ProgramArgMap)[]).filter((k) => p.args[k] === flag);
    const sources = keys.map((k) => ARG_SOURCES[k]);
    const setting = sources.find((s) => "setting" in s);
    if (setting !== undefined && "setting" in setting)
        return `rendered by the platform from ${setting.setting}: set ${setting.setting} instead of passing ${flag}`;
    const platform = sources.find((s) => "platform" in s);
    return `rendered by the platform (${platform !== undefined && "platform" in platform ? platform.platform : "from the stack"}): remove it`;
}

/** Every problem of `extraArgs` for program `p` (named `label` in messages), in order. */
export function extraArgProblems(p: ProgramFacts, label: string, extraArgs: readonly string[]): string[] {
    const rendered = new Set(Object.values(p.args) as string[]);
    const flags = Object.keys(p.flags);
    const errors: string[] = [];
    const seen = new Set<string>();
    for (let i = 0; i < extraArgs.length; i++) {
        const word = extraArgs[i];
        if (!word.startsWith("--")) {
            errors.push(`${FIELD}: '${word}' is not a flag and follows no flag that takes a value: each entry is a --flag or the value after one`);
            continue;
        }
        const eq = word.indexOf("=");
        const flag = eq < 0 ? word : word.slice(0, eq);
        const spec = p.flags[flag];
        if (spec === undefined) {
            const near = nearMiss(flag, flags);
            errors.push(
                `${FIELD}: ${flag} is not a flag of ${label} (its flags: ${flags.join(" ")}): ${near !== undefined ? `did you mean ${near}?` : "remove it"}`,
            );
            // A value after it is its value, not a stray word: skip it.
            if (eq < 0 && i + 1 < extraArgs.length && !extraArgs[i + 1].startsWith("--")) i++;
            continue;
        }
        if (rendered.has(flag)) errors.push(`${FIELD}: ${flag} is ${renderedFrom(p, flag)}`);
        else if (seen.has(flag)) errors.push(`${FIELD}: ${flag} is given twice (argparse keeps the last): keep one`);
        seen.add(flag);
        if (spec.action === "store_true") {
            if (eq >= 0) errors.push(`${FIELD}: ${flag} is a switch (argparse store_true) and takes no value: pass '${flag}' alone, or leave it out for false`);
            continue;
        }
        const value = eq >= 0 ? word.slice(eq + 1) : extraArgs[i + 1];
        if (eq < 0) i++;
        if (value === undefined || (eq < 0 && value.startsWith("--"))) {
            errors.push(`${FIELD}: ${flag} takes a value: add it after ${flag}`);
            if (value !== undefined) i--;
            continue;
        }
        if (!rendered.has(flag)) {
            const problem = valueProblem(flag, spec, value);
            if (problem !== undefined) errors.push(problem);
        }
    }
    return errors;
}
