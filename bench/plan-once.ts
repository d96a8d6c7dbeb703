// One offline plan in a fresh process, for bench/scaling.ts (time and memory must not be polluted by other runs):
//   node --import tsx bench/plan-once.ts --recipe <name> --target kubernetes|docker [--override '<json>']
// Prints one JSON line: {"ok":true,"wallMs":...,"maxRssKB":...,"resources":...,"custom":...,"manifests":...,"byType":{...}}
// or {"ok":false,"error":"..."} with exit code 1. The plan is written to a temp dir that is removed afterwards.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { planToDir } from "../scripts/lib/plan";

/** What one plan-once run prints. */
export interface PlanOnceResult {
    readonly ok: boolean;
    readonly error?: string;
    /** Wall time of planToDir (program under mocks + writing the plan), ms. */
    readonly wallMs?: number;
    /** process.resourceUsage().maxRSS after the plan, KiB (peak of the whole process, incl. module loading). */
    readonly maxRssKB?: number;
    /** Resources the program registered (components + custom). */
    readonly resources?: number;
    /** Custom (provider) resources only. */
    readonly custom?: number;
    /** Kubernetes manifests written. */
    readonly manifests?: number;
    /** Registered resources per type token. */
    readonly byType?: Record<string, number>;
}

function parse(argv: readonly string[]): { recipe: string; target: "kubernetes" | "docker"; override: Record<string, unknown> | undefined } {
    let recipe: string | undefined;
    let target: string | undefined;
    let override: Record<string, unknown> | undefined;
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const v = argv[++i];
        if (v === undefined) throw new Error(`${a} needs a value`);
        if (a === "--recipe") recipe = v;
        else if (a === "--target") target = v;
        else if (a === "--override") override = JSON.parse(v) as Record<string, unknown>;
        else throw new Error(`unknown argument ${a}`);
    }
    if (recipe === undefined) throw new Error("--recipe is required");
    if (target !== "kubernetes" && target !== "docker") throw new Error("--target must be kubernetes or docker");
    return { recipe, target, override };
}

async function main(): Promise<number> {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), "bench-plan-"));
    for (const sig of ["SIGTERM", "SIGINT"] as const) {
        process.once(sig, () => {
            fs.rmSync(out, { recursive: true, force: true });
            process.exit(128 + (sig === "SIGTERM" ? 15 : 2));
        });
    }
    try {
        const { recipe, target, override } = parse(process.argv.slice(2));
        const t0 = process.hrtime.bigint();
        const r = await planToDir({ recipe, target }, { outDir: out, ...(override ? { platformOverride: override } : {}) });
        const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
        const byType: Record<string, number> = {};
        for (const res of r.resources) byType[res.type] = (byType[res.type] ?? 0) + 1;
        const result: PlanOnceResult = {
            ok: true,
            wallMs,
            maxRssKB: process.resourceUsage().maxRSS,
            resources: r.resources.length,
            custom: r.resources.filter((x) => x.custom).length,
            manifests: r.manifests.length,
            byType,
        };
        process.stdout.write(`${JSON.stringify(result)}\n`);
        return 0;
    } catch (e) {
        process.stdout.write(`${JSON.stringify({ ok: false, error: (e as Error).message ?? String(e) })}\n`);
        return 1;
    } finally {
        fs.rmSync(out, { recursive: true, force: true });
    }
}

main().then(
    (code) => process.exit(code),
    (e: unknown) => {
        process.stderr.write(`plan-once: ${String(e)}\n`);
        process.exit(1);
    },
);
