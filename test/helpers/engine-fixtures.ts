// Where the engine test binaries are: the Pulumi CLI, the kubernetes and random provider
// plugins, kwok, kube-controller-manager and kube-scheduler, built from Go modules by
// test/engine/build.sh into ${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/ (the script
// prints its output directory as the last line of stdout). The API server, etcd and kubectl
// come from the API server fixture (test/apiserver/build.sh).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { spawn } from "node:child_process";

const REPO_ROOT = path.resolve(__dirname, "..", "..");
export const ENGINE_BUILD_SCRIPT = path.join(REPO_ROOT, "test", "engine", "build.sh");

export interface EngineBinaries {
    readonly pulumi: string;
    readonly kubernetesProvider: string;
    readonly randomProvider: string;
    readonly kwok: string;
    readonly kubeControllerManager: string;
    readonly kubeScheduler: string;
}

export type EngineFixtures = { readonly ok: true; readonly dir: string; readonly bin: EngineBinaries } | { readonly ok: false; readonly reason: string };

const NAMES: Record<keyof EngineBinaries, string> = {
    pulumi: "pulumi",
    kubernetesProvider: "pulumi-resource-kubernetes",
    randomProvider: "pulumi-resource-random",
    kwok: "kwok",
    kubeControllerManager: "kube-controller-manager",
    kubeScheduler: "kube-scheduler",
};

function cacheRoot(): string {
    const cacheHome = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    return path.join(cacheHome, "agent-rl-infra");
}

/** Finds each binary by name under `dir` (bin/ first, then up to three levels down). */
function locate(dir: string): { bin?: EngineBinaries; missing: string[] } {
    const found: Partial<Record<keyof EngineBinaries, string>> = {};
    const walk = (d: string, depth: number): void => {
        let entries: fs.Dirent[];
        try {
            entries = fs.readdirSync(d, { withFileTypes: true });
        } catch {
            return;
        }
        for (const e of entries) {
            const p = path.join(d, e.name);
            if (e.isDirectory() && depth < 3 && !e.name.startsWith(".")) walk(p, depth + 1);
            else if (e.isFile() || e.isSymbolicLink()) {
                for (const [key, name] of Object.entries(NAMES) as Array<[keyof EngineBinaries, string]>) {
                    if (e.name === name && found[key] === undefined) {
                        try {
                            fs.accessSync(p, fs.constants.X_OK);
                            found[key] = p;
                        } catch {
                            /* not executable */
                        }
                    }
                }
            }
        }
    };
    walk(path.join(dir, "bin"), 1);
    walk(dir, 0);
    const missing = (Object.keys(NAMES) as Array<keyof EngineBinaries>).filter((k) => found[k] === undefined).map((k) => NAMES[k]);
    return missing.length ? { missing } : { bin: found as EngineBinaries, missing };
}

function runBuild(): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
        const child = spawn("bash", [ENGINE_BUILD_SCRIPT], { stdio: ["ignore", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
        child.stderr.setEncoding("utf8").on("data", (d: string) => {
            stderr += d;
            if (process.env.CI) process.stderr.write(d);
        });
        child.on("error", reject);
        child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
    });
}

/** A complete output directory of an earlier build (stamp present), without building anything. */
function existingBuild(): string | undefined {
    if (process.env.AGENT_RL_ENGINE_DIR) return process.env.AGENT_RL_ENGINE_DIR;
    let entries: fs.Dirent[];
    try {
        entries = fs.readdirSync(cacheRoot(), { withFileTypes: true });
    } catch {
        return undefined;
    }
    for (const e of entries) {
        if (!e.isDirectory() || e.name.startsWith(".") || e.name.startsWith("k8s-")) continue;
        const dir = path.join(cacheRoot(), e.name);
        if (fs.existsSync(path.join(dir, ".complete")) && locate(dir).bin) return dir;
    }
    return undefined;
}

let cached: Promise<EngineFixtures> | undefined;

/**
 * The engine fixtures. With `build` (or CI set) runs test/engine/build.sh, a no-op when its
 * cache is complete, and reports a failed build as not ok with the script's output. Without,
 * only looks for an earlier complete build.
 */
export function engineFixtures(opts: { build?: boolean } = {}): Promise<EngineFixtures> {
    const build = opts.build ?? !!process.env.CI;
    if (!build) return Promise.resolve(existingFixtures());
    cached ??= (async (): Promise<EngineFixtures> => {
        if (process.env.AGENT_RL_ENGINE_DIR) {
            const { bin, missing } = locate(process.env.AGENT_RL_ENGINE_DIR);
            return bin ? { ok: true, dir: process.env.AGENT_RL_ENGINE_DIR, bin } : { ok: false, reason: `AGENT_RL_ENGINE_DIR lacks ${missing.join(", ")}` };
        }
        if (!fs.existsSync(ENGINE_BUILD_SCRIPT)) return { ok: false, reason: `${path.relative(REPO_ROOT, ENGINE_BUILD_SCRIPT)} does not exist` };
        const res = await runBuild();
        const lines = res.stdout.trim().split("\n");
        const dir = lines[lines.length - 1]?.trim();
        if (res.code !== 0 || !dir)
            return { ok: false, reason: `bash test/engine/build.sh failed (exit ${res.code}):\n${res.stderr.split("\n").slice(-40).join("\n")}` };
        const { bin, missing } = locate(dir);
        return bin ? { ok: true, dir, bin } : { ok: false, reason: `test/engine/build.sh printed ${dir}, which lacks ${missing.join(", ")}` };
    })();
    return cached;
}

/**
 * For an engine test file's `describe(..., { skip })`: false (run) when the fixtures are
 * built or CI is set (then a missing fixture fails the tests), else the reason to skip.
 */
export function engineSkipReason(): string | false {
    if (process.env.CI) return false;
    const fx = existingFixtures();
    return fx.ok ? false : fx.reason;
}

function existingFixtures(): EngineFixtures {
    const dir = existingBuild();
    if (!dir)
        return {
            ok: false,
            reason: "engine fixtures are not built: run `bash test/engine/build.sh` (Pulumi CLI, kubernetes/random plugins, kwok, kube-controller-manager, kube-scheduler; see test/engine/)",
        };
    const { bin, missing } = locate(dir);
    return bin ? { ok: true, dir, bin } : { ok: false, reason: `${dir} lacks ${missing.join(", ")}` };
}
