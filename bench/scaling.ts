// Program scaling (issue "Benchmarks", figure 3): time, peak memory and registered resources of the whole program
// under Pulumi mocks (the offline plan path, scripts/lib/plan.ts planToDir) as env replicas and the sandbox pool grow.
// Every configuration runs in a fresh child process (bench/plan-once.ts), 3 repetitions interleaved, median reported.
import * as path from "node:path";
import { BENCH_DIR, REPO_ROOT, atMost, checkLine, fmt, median, runCollected, table, type TargetCheck } from "./lib";
import type { PlanOnceResult } from "./plan-once";

export interface ScalingBenchOptions {
    readonly deadline: number;
    /** Repetitions per configuration. @default 3 */
    readonly repeats?: number;
    readonly log: (line: string) => void;
}

export interface ScalingBenchResult {
    readonly markdown: string;
    readonly checks: TargetCheck[];
}

interface Config {
    readonly sweep: "replicas-k8s" | "replicas-docker" | "pool-k8s";
    readonly label: string;
    readonly n: number;
    readonly recipe: string;
    readonly target: "kubernetes" | "docker";
    readonly override: Record<string, unknown>;
}

/**
 * wordle-whitebox opens 32 env sessions at once (8 per device x 4 steps per generation); at the catalog's 8 sessions per
 * replica plus 1 spare that needs >= 5 replicas. N = 1 is made valid with 32 sessions per replica and no spare replica.
 */
function replicasOverride(n: number): Record<string, unknown> {
    if (n === 1) return { envs: { wordle: { replicas: 1, sessionsPerReplica: 32, headroomReplicas: 0 } } };
    return { envs: { wordle: { replicas: n } } };
}

const REPLICAS = [1, 5, 16, 64];
const POOL = [8, 64, 512, 4096];

function configs(): Config[] {
    const out: Config[] = [];
    for (const target of ["kubernetes", "docker"] as const) {
        for (const n of REPLICAS) {
            out.push({
                sweep: target === "kubernetes" ? "replicas-k8s" : "replicas-docker",
                label: `wordle replicas ${n}`,
                n,
                recipe: "wordle-whitebox",
                target,
                override: replicasOverride(n),
            });
        }
    }
    for (const n of POOL)
        out.push({
            sweep: "pool-k8s",
            label: `opencode poolSize ${n}`,
            n,
            recipe: "opencode-blackbox",
            target: "kubernetes",
            override: { sandboxes: { poolSize: n } },
        });
    return out;
}

interface Run extends PlanOnceResult {
    /** Wall time of the whole child process (node start, module loading, plan, exit), ms. */
    readonly processMs: number;
}

async function planOnce(c: Config): Promise<Run> {
    const args = [
        "--import",
        "tsx",
        path.join(BENCH_DIR, "plan-once.ts"),
        "--recipe",
        c.recipe,
        "--target",
        c.target,
        "--override",
        JSON.stringify(c.override),
    ];
    const t0 = process.hrtime.bigint();
    const { code, out, err } = await runCollected(process.execPath, args, { cwd: REPO_ROOT }, 60000);
    const processMs = Number(process.hrtime.bigint() - t0) / 1e6;
    const line = out.trim().split("\n").at(-1) ?? "";
    try {
        const r = JSON.parse(line) as PlanOnceResult;
        return { ...r, processMs };
    } catch {
        return { ok: false, error: `plan-once exit ${String(code)}: ${(out + err).trim().slice(-500)}`, processMs };
    }
}

/** First line of an error, shortened for a table cell. */
function short(e: string | undefined): string {
    return (e ?? "unknown error").split("\n")[0]!.replace(/\|/g, "/").slice(0, 160);
}

export async function runScalingBench(o: ScalingBenchOptions): Promise<ScalingBenchResult> {
    const repeats = o.repeats ?? 3;
    const all = configs();
    const runs = new Map<Config, Run[]>(all.map((c) => [c, []]));
    const problems: string[] = [];
    // Interleaved: every configuration once per repetition, so drift (thermal, page cache) hits all alike.
    outer: for (let rep = 0; rep < repeats; rep++) {
        for (const c of all) {
            if (Date.now() > o.deadline - 15000) {
                problems.push(`time budget: stopped at repetition ${rep + 1} (${c.label}, ${c.target})`);
                break outer;
            }
            const r = await planOnce(c);
            runs.get(c)!.push(r);
            o.log(
                `scaling: ${c.target} ${c.label} rep ${rep + 1}: ${r.ok ? `${fmt(r.wallMs!, 0)} ms, ${fmt(r.maxRssKB! / 1024, 0)} MB, ${r.resources} resources` : `error: ${short(r.error)}`}`,
            );
        }
    }

    const md: string[] = [];
    const checks: TargetCheck[] = [];
    md.push("## 3. Program scaling (offline plan under Pulumi mocks)", "");
    md.push(
        "What: the whole program (index.ts) under Pulumi's mock runtime via `planToDir` (scripts/lib/plan.ts, the `npm run plan` path, manifests written to a temp dir), " +
            `each configuration in a fresh child process (\`node --import tsx bench/plan-once.ts --recipe R --target T --override JSON\`), ${repeats} repetitions interleaved, median. ` +
            "plan ms = wall time of planToDir inside the child; process ms = the child's whole life (node start, loading TypeScript through tsx, plan, exit); " +
            "peak RSS = `process.resourceUsage().maxRSS` of the child; resources = everything the program registered (stack, providers, components, custom resources).",
        "",
        "Varied: env replicas with recipe `wordle-whitebox` (`platformOverride: {envs: {wordle: {replicas: N}}}`; the recipe opens 32 sessions at once and the catalog holds 8 per replica plus 1 spare, so N >= 5 is valid as is; " +
            "N = 1 also sets `sessionsPerReplica: 32, headroomReplicas: 0`), on Kubernetes and, for reference, Docker; the sandbox pool with recipe `opencode-blackbox` on Kubernetes (`platformOverride: {sandboxes: {poolSize: N}}`).",
        "",
        'Command: `npm run bench` (bench/scaling.ts); one configuration by hand: `node --import tsx bench/plan-once.ts --recipe wordle-whitebox --target kubernetes --override \'{"envs":{"wordle":{"replicas":64}}}\'`',
        "",
    );
    const rows: string[][] = [];
    const sweeps: Array<Config["sweep"]> = ["replicas-k8s", "replicas-docker", "pool-k8s"];
    for (const c of all) {
        const rs = runs.get(c)!;
        const ok = rs.filter((r) => r.ok);
        if (ok.length === 0) {
            rows.push([c.target, c.label, String(rs.length), "error", "", "", "", "", short(rs[0]?.error ?? "not run")]);
            continue;
        }
        const counts = [...new Set(ok.map((r) => r.resources!))];
        rows.push([
            c.target,
            c.label,
            String(ok.length),
            fmt(median(ok.map((r) => r.wallMs!)), 0),
            fmt(median(ok.map((r) => r.processMs)), 0),
            fmt(median(ok.map((r) => r.maxRssKB!)) / 1024, 0),
            counts.join(" / "),
            String(ok[0]!.custom),
            ok.length < rs.length ? `${rs.length - ok.length} failed: ${short(rs.find((r) => !r.ok)?.error)}` : "",
        ]);
    }
    const componentsOf = (recipe: string) => {
        const r = all
            .filter((c) => c.recipe === recipe)
            .flatMap((c) => runs.get(c)!)
            .find((x) => x.ok);
        return r
            ? Object.keys(r.byType ?? {})
                  .filter((t) => !t.startsWith("pulumi:") && !/^(kubernetes|docker|random):/.test(t))
                  .join(", ")
            : "(no successful run)";
    };
    md.push(`Components registered: wordle-whitebox: ${componentsOf("wordle-whitebox")}; opencode-blackbox: ${componentsOf("opencode-blackbox")}.`, "");
    md.push(
        table(["target", "configuration", "runs", "plan ms (median)", "process ms (median)", "peak RSS MB", "resources", "custom resources", "notes"], rows),
        "",
    );

    for (const sweep of sweeps) {
        if (sweep === "replicas-docker") continue; // reference only
        const cs = all.filter((c) => c.sweep === sweep);
        const okRuns = cs.map((c) => runs.get(c)!.filter((r) => r.ok));
        const what = sweep === "replicas-k8s" ? "env replicas" : "sandbox pool size";
        if (okRuns.some((r) => r.length === 0)) {
            const err = cs.map((c) => runs.get(c)!.find((r) => !r.ok)?.error).find((e) => e !== undefined);
            checks.push({ name: `Kubernetes resource count flat in ${what}`, met: false, detail: `not measurable: ${short(err)}` });
            checks.push({ name: `Kubernetes plan time, largest ${what} within 1.5x the smallest`, met: false, detail: `not measurable: ${short(err)}` });
            continue;
        }
        const counts = okRuns.map((r) => r[0]!.resources!);
        const flat = counts.every((n) => n === counts[0]);
        let detail = `${cs.map((c, i) => `${c.n}: ${counts[i]}`).join(", ")}`;
        if (!flat) {
            const first = okRuns[0]![0]!.byType ?? {};
            const last = okRuns.at(-1)![0]!.byType ?? {};
            const grew = Object.keys({ ...first, ...last })
                .filter((t) => (first[t] ?? 0) !== (last[t] ?? 0))
                .map((t) => `${t} ${first[t] ?? 0} -> ${last[t] ?? 0}`);
            detail += `; types that change: ${grew.join(", ")}`;
        }
        checks.push({ name: `Kubernetes resource count flat in ${what} (${cs[0]!.n} -> ${cs.at(-1)!.n})`, met: flat, detail });
        const tSmall = median(okRuns[0]!.map((r) => r.wallMs!));
        const tLarge = median(okRuns.at(-1)!.map((r) => r.wallMs!));
        checks.push(
            atMost(
                `Kubernetes plan time ratio, ${what} ${cs.at(-1)!.n} vs ${cs[0]!.n} (${fmt(tLarge, 0)} ms / ${fmt(tSmall, 0)} ms)`,
                tLarge / tSmall,
                1.5,
                "x",
            ),
        );
    }
    md.push(
        "What it means: on Kubernetes replicas and pool size are numbers inside a few objects (a Deployment's `replicas`, the warm pool's size), so the resource count and plan time must not grow with them; " +
            "on Docker every replica is its own container resource, so growth there is expected (reference only). Peak RSS is dominated by loading @pulumi/pulumi and the providers' SDKs through tsx.",
        "",
    );
    if (problems.length > 0) md.push("### Problems during the scaling runs", "", ...problems.map((p) => `- ${p}`), "");
    md.push("### Targets (scaling)", "", ...checks.map(checkLine), "");
    return { markdown: md.join("\n"), checks };
}
