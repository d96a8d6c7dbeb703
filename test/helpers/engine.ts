// Runs the stack program through the real Pulumi engine: the Automation API's inline
// program (the program is exactly index.ts's export, run in this Node process), the Pulumi
// CLI v3.274.1 and the kubernetes and random provider plugins built by test/engine/build.sh,
// a local file backend, passphrase secrets, a throw-away PULUMI_HOME. Config comes from the
// repo's stack files (stacks/Pulumi.<stack>.yaml) or a recipe, with the test cluster's
// kubeconfig and context substituted. Every process started is verified gone at dispose().
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import type { EngineEvent, OpMap, OutputMap, Stack } from "@pulumi/pulumi/automation";
import YAML from "yaml";
import { RECIPES } from "../../components/config";
import { runCommand } from "./cluster";
import type { EngineFixtures } from "./engine-fixtures";
import { scaled, scaledCount } from "./waits";

export const REPO_ROOT = path.resolve(__dirname, "..", "..");
export const PROJECT = "agent-rl-infra";
export const PLATFORM_KEY = `${PROJECT}:platform`;

/** Plugin versions the SDKs in node_modules register resources with (the engine loads exactly these). */
export function pluginVersion(pkg: "kubernetes" | "random"): string {
    const p = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "node_modules", "@pulumi", pkg, "package.json"), "utf8"));
    return String(p.pulumi?.version ?? p.version).replace(/^v/, "");
}

/** The platform object of a repo stack file (stacks/Pulumi.<stack>.yaml). */
export function stackFilePlatform(stack: string): Record<string, any> {
    const doc = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "stacks", `Pulumi.${stack}.yaml`), "utf8"));
    const p = doc?.config?.[PLATFORM_KEY];
    if (!p || typeof p !== "object") throw new Error(`stacks/Pulumi.${stack}.yaml has no ${PLATFORM_KEY} object`);
    return p;
}

function isObj(v: unknown): v is Record<string, any> {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Objects merge key by key, everything else (lists included) replaces: the config's own merge rule. */
export function merge<T>(base: T, override: unknown): T {
    if (!isObj(base) || !isObj(override)) return (override === undefined ? base : override) as T;
    const out: Record<string, any> = { ...base };
    for (const [k, v] of Object.entries(override)) out[k] = v === undefined ? out[k] : merge(out[k], v);
    return out as T;
}

/** Where the program's Kubernetes provider goes: the test cluster, never an ambient kubeconfig. */
export interface ClusterTarget {
    readonly kubeconfig: string;
    readonly context: string;
}

/** A repo stack's platform with the test cluster as its target. */
export function stackPlatform(stack: string, cluster: ClusterTarget, override: Record<string, unknown> = {}): Record<string, any> {
    return merge(merge(stackFilePlatform(stack), { target: { kubeconfig: cluster.kubeconfig, context: cluster.context } }), override);
}

/** Placeholder images of a recipe run (never pulled: kwok runs no container), as the recipe plan has them. */
export const RECIPE_TEST_REGISTRY = "registry.test/agent-rl";

/**
 * A recipe on Kubernetes, as `npm run plan -- --recipe <name> --target kubernetes` builds it
 * (scripts/lib/plan.ts), plus what a recipe leaves to the stack: where it runs (the test
 * cluster; GPU node placement as the staging stack does it), the run id and the images no
 * recipe can name (the trainer's holds the user's script; the agent-sandbox pool's is built
 * from python/Dockerfile).
 */
export function recipePlatform(recipe: string, cluster: ClusterTarget, override: Record<string, unknown> = {}): Record<string, any> {
    const blackbox = (RECIPES as Record<string, { training: { layout: string } }>)[recipe]?.training.layout === "blackbox";
    return merge(
        {
            recipe,
            runId: "run-001",
            images: { trainer: `${RECIPE_TEST_REGISTRY}/${recipe}-trainer:test` },
            ...(blackbox ? { sandboxes: { image: `${RECIPE_TEST_REGISTRY}/opencode-sandbox:test` } } : {}),
            target: {
                kind: "kubernetes",
                kubeconfig: cluster.kubeconfig,
                context: cluster.context,
                nodeSelector: { "nvidia.com/gpu.present": "true" },
                tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
            },
        },
        override,
    );
}

export interface OpResult {
    readonly op: "up" | "preview" | "refresh" | "destroy";
    readonly ok: boolean;
    readonly ms: number;
    /** Operation counts (same, create, update, replace, delete, ...). */
    readonly changes: OpMap;
    /** The CLI's output (stdout + stderr), for messages. */
    readonly output: string;
    /** The error message when !ok. */
    readonly error?: string;
    /** Engine events (resource steps, diagnostics, policy events). */
    readonly events: EngineEvent[];
    /** Stack outputs after an up. */
    readonly outputs?: OutputMap;
}

export interface OpOptions {
    /** Wall-clock bound; the operation is cancelled (SIGINT, then killed) when it passes. @default 300 s */
    readonly timeoutMs?: number;
    /** Policy pack directories (as `--policy-pack <dir>`; relative to the repo root). */
    readonly policyPacks?: string[];
    /** Policy pack config files (as `--policy-pack-config <file>`; relative to the repo root). */
    readonly policyPackConfigs?: string[];
    /** up/preview: fail if the operation would change anything. */
    readonly expectNoChanges?: boolean;
    /** refresh: only preview the refresh. */
    readonly previewOnly?: boolean;
    /** Called with each engine event as it arrives (the result's `events` holds them all at the end). */
    readonly onEvent?: (e: EngineEvent) => void;
}

/** Changes other than `same` (and reads), summed. */
export function changeCount(changes: OpMap): number {
    return Object.entries(changes)
        .filter(([k]) => k !== "same" && k !== "read")
        .reduce((n, [, v]) => n + (v ?? 0), 0);
}

/** A resource step of an operation: op and URN, from the engine events. */
export function steps(r: OpResult): Array<{ op: string; urn: string; type: string }> {
    return r.events
        .map((e) => e.resOutputsEvent?.metadata ?? e.resourcePreEvent?.metadata)
        .filter((m): m is NonNullable<typeof m> => m !== undefined)
        .map((m) => ({ op: m.op, urn: m.urn, type: m.type }))
        .filter((s, i, all) => all.findIndex((t) => t.urn === s.urn && t.op === s.op) === i);
}

/** Diagnostics the engine reported (errors and warnings), one string each. */
export function diagnostics(r: OpResult, severity?: string): string[] {
    return r.events
        .map((e) => e.diagnosticEvent)
        .filter((d): d is NonNullable<typeof d> => d !== undefined && (severity === undefined || d.severity === severity))
        .map((d) => `${d.urn ?? ""} ${d.message}`.trim());
}

/** Policy violations reported by the policy packs. */
export function policyViolations(r: OpResult): Array<{ policy: string; level: string; message: string; urn?: string }> {
    return r.events
        .map((e) => e.policyEvent)
        .filter((p): p is NonNullable<typeof p> => p !== undefined)
        .map((p) => ({ policy: p.policyName, level: p.enforcementLevel, message: p.message, urn: p.resourceUrn }));
}

export interface Timing {
    readonly stack: string;
    readonly op: string;
    readonly label: string;
    readonly ms: number;
    readonly ok: boolean;
}

export interface EngineStack {
    readonly name: string;
    readonly stack: Stack;
    /** Replaces the platform object (the stack file's agent-rl-infra:platform). */
    setPlatform(platform: Record<string, unknown>): Promise<void>;
    platform(): Record<string, any>;
    /** `pulumi config set --secret <key>` (key without the project prefix, e.g. hfToken). */
    setSecret(key: string, value: string): Promise<void>;
    removeConfig(key: string): Promise<void>;
    up(label?: string, opts?: OpOptions): Promise<OpResult>;
    preview(label?: string, opts?: OpOptions): Promise<OpResult>;
    refresh(label?: string, opts?: OpOptions): Promise<OpResult>;
    destroy(label?: string, opts?: OpOptions): Promise<OpResult>;
    /** The stack's current checkpoint (the backend's .pulumi/stacks/<project>/<stack>.json), raw text. */
    stateText(): string;
    /** Resources of the checkpoint (type, urn, outputs...). */
    stateResources(): any[];
    /** Every file the backend and the workspace hold for this stack (checkpoint, backups, history, stack file). */
    persistedFiles(): string[];
}

export interface Engine {
    readonly root: string;
    readonly home: string;
    readonly backendDir: string;
    readonly timings: Timing[];
    stack(
        name: string,
        platform: Record<string, unknown>,
        /** configKey: the config object's key (agent-rl-infra:cluster for a cluster stack). @default agent-rl-infra:platform */
        opts?: { secrets?: Record<string, string>; program?: () => Promise<Record<string, unknown> | undefined>; configKey?: string },
    ): Promise<EngineStack>;
    /** Processes still running with this engine's PULUMI_HOME (the CLI, plugins, analyzers). */
    leftovers(): number[];
    /** Removes the temp dirs and verifies no process of the engine is left (throws otherwise). */
    dispose(): Promise<void>;
}

/** index.ts's default export: the very program `pulumi up` runs. */
export async function stackProgram(): Promise<Record<string, unknown>> {
    // Simulated pods pull nothing: the stacks' example registry may stand (index.ts refuses it on a real cluster).
    process.env.AGENT_RL_ALLOW_EXAMPLE_IMAGES = "1";
    const mod = await import(path.join(REPO_ROOT, "index"));
    const fn = (mod.default ?? mod) as () => Promise<Record<string, unknown>>;
    return fn();
}

/**
 * The analyzer that runs a Node policy pack. CLI v3.274.1 runs a policy pack *directory*
 * through the language host's RunPlugin (pulumi-language-nodejs, which is not served as a Go
 * module here), and runs a policy pack given as an *executable* directly, as a binary analyzer
 * plugin with the engine address as its argument (pkg/resource/plugin/analyzer_plugin.go
 * NewPolicyAnalyzer). This executable does what pulumi-language-nodejs's RunPlugin and the
 * old pulumi-analyzer-policy script (@pulumi/pulumi sdk/nodejs/dist) do: run the SDK's
 * run-policy-pack with node in the pack's directory, so the pack's own code, the SDK and the
 * engine's analyzer protocol are the real ones.
 */
function analyzerScript(packDir: string): string {
    return `#!/bin/sh
# pulumi-analyzer-policy for ${packDir}, made by test/helpers/engine.ts (see analyzerScript there).
cd '${packDir.replace(/'/g, "'\\''")}' || exit 1
run=$(node -e "console.log(require.resolve('@pulumi/pulumi/cmd/run-policy-pack'))") || exit 1
exec node "$run" "$1" .
`;
}

function sleep(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, ms));
}

/** A timer that does not keep the process alive (races against an operation that may end first). */
function unrefSleep(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, ms).unref());
}

/** Pids whose environment holds PULUMI_HOME=<home>. */
function processesWithHome(home: string): number[] {
    const needle = Buffer.from(`PULUMI_HOME=${home}\0`);
    const out: number[] = [];
    for (const entry of fs.readdirSync("/proc")) {
        if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
        try {
            if (fs.readFileSync(`/proc/${entry}/environ`).includes(needle)) out.push(Number(entry));
        } catch {
            /* gone or not ours */
        }
    }
    return out;
}

/**
 * The inline program runs in this process. When it fails (a RunError from the config checks),
 * the Pulumi runtime's promises reject without a handler; the Automation API's language server
 * catches those with its own process-wide `unhandledRejection` listener and turns them into the
 * operation's error, but node:test's listener sees them too and fails the whole file ("asynchronous
 * activity after the test ended"). While an operation runs, only the runtime's listener (and a
 * no-op one, so Node does not crash) is installed; the test runner's is put back afterwards.
 */
function divertRejections(): () => void {
    const saved = process.listeners("unhandledRejection");
    process.removeAllListeners("unhandledRejection");
    const swallow = () => undefined;
    process.on("unhandledRejection", swallow);
    return () => {
        process.removeListener("unhandledRejection", swallow);
        for (const l of saved) process.on("unhandledRejection", l);
    };
}

const liveRoots = new Set<string>();
let exitHandler = false;

/**
 * Makes a throw-away engine home: PULUMI_HOME with the two plugins installed at the versions
 * the SDKs request, a file backend, a passphrase, a CLI root whose bin/ holds `pulumi`, and
 * an analyzer executable per policy pack used.
 */
export async function createEngine(fx: Extract<EngineFixtures, { ok: true }>, cluster: ClusterTarget): Promise<Engine> {
    const { LocalWorkspace, PulumiCommand } = await import("@pulumi/pulumi/automation");
    const root = await fsp.mkdtemp(path.join(os.tmpdir(), "agent-rl-engine-"));
    liveRoots.add(root);
    if (!exitHandler) {
        exitHandler = true;
        process.on("exit", () => {
            for (const r of liveRoots) {
                for (const pid of processesWithHome(path.join(r, "home"))) {
                    try {
                        process.kill(pid, "SIGKILL");
                    } catch {
                        /* gone */
                    }
                }
                fs.rmSync(r, { recursive: true, force: true });
            }
        });
    }
    const home = path.join(root, "home");
    const backendDir = path.join(root, "state");
    const cliRoot = path.join(root, "cli");
    const tmp = path.join(root, "tmp");
    for (const d of [home, backendDir, tmp, path.join(cliRoot, "bin"), path.join(root, "work")]) await fsp.mkdir(d, { recursive: true });
    await fsp.symlink(fx.bin.pulumi, path.join(cliRoot, "bin", "pulumi"));
    /** --policy-pack <dir> becomes --policy-pack <analyzer executable for dir> (see analyzerScript). */
    const analyzers = new Map<string, string>();
    const analyzerFor = async (packDir: string): Promise<string> => {
        const abs = path.resolve(REPO_ROOT, packDir);
        let exe = analyzers.get(abs);
        if (exe === undefined) {
            const dir = path.join(root, "policy-packs", String(analyzers.size));
            await fsp.mkdir(dir, { recursive: true });
            // The CLI reads the pack's project file from beside the executable.
            await fsp.copyFile(path.join(abs, "PulumiPolicy.yaml"), path.join(dir, "PulumiPolicy.yaml"));
            exe = path.join(dir, "pulumi-analyzer-policy");
            await fsp.writeFile(exe, analyzerScript(abs), { mode: 0o755 });
            analyzers.set(abs, exe);
        }
        return exe;
    };

    const passphrase = randomBytes(16).toString("hex");
    const env: Record<string, string> = {
        PULUMI_HOME: home,
        PULUMI_BACKEND_URL: `file://${backendDir}`,
        PULUMI_CONFIG_PASSPHRASE: passphrase,
        PULUMI_SKIP_UPDATE_CHECK: "true",
        PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
        PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK: "true",
        PULUMI_DIY_BACKEND_NO_LEGACY_WARNING: "true",
        // Whatever the program's provider does, it talks to the test cluster.
        KUBECONFIG: cluster.kubeconfig,
        // The kubernetes provider copies a configured kubeconfig to $TMPDIR/kubeconfig<N> at every
        // configure and never removes it (pulumi-kubernetes provider/pkg/provider/util.go
        // writeKubeconfigToFile, called from provider.go's Configure for Helm): here it lands under root, which dispose() removes.
        TMPDIR: tmp,
        PATH: `${path.join(cliRoot, "bin")}:${process.env.PATH ?? "/usr/bin:/bin"}`,
    };
    const cliEnv = { ...process.env, ...env };
    for (const [name, file] of [
        ["kubernetes", fx.bin.kubernetesProvider],
        ["random", fx.bin.randomProvider],
    ] as const) {
        const r = await runCommand(fx.bin.pulumi, ["plugin", "install", "resource", name, pluginVersion(name), "--file", file], cliEnv, 120_000);
        if (r.code !== 0) throw new Error(`pulumi plugin install resource ${name} ${pluginVersion(name)} --file ${file} failed:\n${r.stderr}${r.stdout}`);
    }
    const pulumiCommand = await PulumiCommand.get({ root: cliRoot, skipVersionCheck: true });
    const timings: Timing[] = [];

    const leftovers = () => processesWithHome(home);

    const stack = async (
        name: string,
        initialPlatform: Record<string, unknown>,
        opts: { secrets?: Record<string, string>; program?: () => Promise<Record<string, unknown> | undefined>; configKey?: string } = {},
    ): Promise<EngineStack> => {
        const configKey = opts.configKey ?? PLATFORM_KEY;
        const workDir = path.join(root, "work", name);
        await fsp.mkdir(workDir, { recursive: true });
        const program = async () => (await (opts.program ?? stackProgram)()) ?? {};
        const s = await LocalWorkspace.createOrSelectStack(
            { stackName: name, projectName: PROJECT, program },
            { workDir, pulumiCommand, envVars: env, projectSettings: { name: PROJECT, runtime: "nodejs" }, secretsProvider: "passphrase" },
        );
        const ws = s.workspace;
        let platform = initialPlatform as Record<string, any>;
        const setPlatform = async (p: Record<string, unknown>) => {
            platform = p as Record<string, any>;
            // Written as the object a stack file holds (not a JSON string), beside the secure values.
            const settings = await ws.stackSettings(name);
            settings.config = { ...(settings.config ?? {}), [configKey]: platform };
            await ws.saveStackSettings(name, settings);
        };
        await setPlatform(platform);
        for (const [k, v] of Object.entries(opts.secrets ?? {})) await s.setConfig(`${PROJECT}:${k}`, { value: v, secret: true });

        const statePath = (): string => {
            const found: string[] = [];
            const walk = (d: string) => {
                for (const e of fs.existsSync(d) ? fs.readdirSync(d, { withFileTypes: true }) : []) {
                    const p = path.join(d, e.name);
                    if (e.isDirectory()) walk(p);
                    else if (e.name === `${name}.json`) found.push(p);
                }
            };
            walk(path.join(backendDir, ".pulumi", "stacks"));
            if (found.length !== 1) throw new Error(`expected one checkpoint ${name}.json under ${backendDir}/.pulumi/stacks, found ${found.length}`);
            return found[0];
        };

        const run = async (op: OpResult["op"], label: string | undefined, o: OpOptions = {}): Promise<OpResult> => {
            // A budget for the engine's progress: scaled by the machine's load (waits.ts).
            const timeoutMs = scaled(o.timeoutMs ?? 300_000);
            const abort = new AbortController();
            const events: EngineEvent[] = [];
            let output = "";
            const common = {
                signal: abort.signal,
                onOutput: (t: string) => (output += t),
                onEvent: (e: EngineEvent) => {
                    events.push(e);
                    o.onEvent?.(e);
                },
                color: "never" as const,
            };
            const policyPacks = o.policyPacks ? await Promise.all(o.policyPacks.map(analyzerFor)) : undefined;
            const policyPackConfigs = o.policyPackConfigs?.map((c) => path.resolve(REPO_ROOT, c));
            const t0 = Date.now();
            let timedOut = false;
            const timer = setTimeout(() => {
                timedOut = true;
                abort.abort();
            }, timeoutMs);
            const restoreRejections = divertRejections();
            const call = (async () => {
                switch (op) {
                    case "up": {
                        const r = await s.up({ ...common, policyPacks, policyPackConfigs, expectNoChanges: o.expectNoChanges });
                        return { changes: r.summary.resourceChanges ?? {}, outputs: r.outputs };
                    }
                    case "preview": {
                        const r = await s.preview({ ...common, policyPacks, policyPackConfigs, expectNoChanges: o.expectNoChanges });
                        return { changes: r.changeSummary };
                    }
                    case "refresh": {
                        if (o.previewOnly) {
                            const r = await s.previewRefresh({ ...common });
                            return { changes: r.changeSummary };
                        }
                        const r = await s.refresh({ ...common });
                        return { changes: r.summary.resourceChanges ?? {} };
                    }
                    case "destroy": {
                        const r = await s.destroy({ ...common });
                        return { changes: r.summary.resourceChanges ?? {} };
                    }
                }
            })();
            // After a cancel the CLI gets 60 s to stop; then its processes are killed.
            const settled = call.then(
                (v) => ({ ok: true as const, v }),
                (e: Error) => ({ ok: false as const, e }),
            );
            let res = await Promise.race([settled, unrefSleep(timeoutMs + scaled(60_000)).then(() => undefined)]);
            clearTimeout(timer);
            if (res === undefined) {
                for (const pid of leftovers()) {
                    try {
                        process.kill(pid, "SIGKILL");
                    } catch {
                        /* gone */
                    }
                }
                res = (await Promise.race([settled, unrefSleep(10_000).then(() => undefined)])) ?? {
                    ok: false as const,
                    e: new Error("the CLI did not stop after SIGKILL"),
                };
            }
            const ms = Date.now() - t0;
            const result: OpResult = res.ok
                ? { op, ok: true, ms, changes: res.v.changes, output, events, outputs: "outputs" in res.v ? res.v.outputs : undefined }
                : {
                      op,
                      ok: false,
                      ms,
                      changes: {},
                      output,
                      events,
                      error: (timedOut ? `${op} did not finish within ${timeoutMs} ms and was cancelled. ` : "") + (res.e.message ?? String(res.e)),
                  };
            await sleep(200);
            restoreRejections();
            timings.push({ stack: name, op, label: label ?? op, ms, ok: result.ok });
            // The CLI and its plugins exit with the operation.
            for (let i = 0; i < scaledCount(50) && leftovers().length; i++) await sleep(100);
            return result;
        };

        return {
            name,
            stack: s,
            setPlatform,
            platform: () => platform,
            setSecret: (key, value) => s.setConfig(`${PROJECT}:${key}`, { value, secret: true }),
            removeConfig: (key) => s.removeConfig(`${PROJECT}:${key}`),
            up: (label, o) => run("up", label, o),
            preview: (label, o) => run("preview", label, o),
            refresh: (label, o) => run("refresh", label, o),
            destroy: (label, o) => run("destroy", label, o),
            stateText: () => fs.readFileSync(statePath(), "utf8"),
            stateResources: () => JSON.parse(fs.readFileSync(statePath(), "utf8")).checkpoint?.latest?.resources ?? [],
            persistedFiles: () => {
                const out: string[] = [];
                const walk = (d: string) => {
                    for (const e of fs.existsSync(d) ? fs.readdirSync(d, { withFileTypes: true }) : []) {
                        const p = path.join(d, e.name);
                        if (e.isDirectory()) walk(p);
                        else out.push(p);
                    }
                };
                walk(backendDir);
                walk(workDir);
                return out;
            },
        };
    };

    let disposed = false;
    const dispose = async (): Promise<void> => {
        if (disposed) return;
        disposed = true;
        let left = leftovers();
        for (let i = 0; i < scaledCount(50) && left.length; i++) {
            await sleep(100);
            left = leftovers();
        }
        for (const pid of left) {
            try {
                process.kill(pid, "SIGKILL");
            } catch {
                /* gone */
            }
        }
        await fsp.rm(root, { recursive: true, force: true });
        liveRoots.delete(root);
        if (left.length) throw new Error(`engine processes were still running at dispose (killed): ${left.join(", ")}`);
        if (fs.existsSync(root)) throw new Error(`${root} still exists`);
    };

    return { root, home, backendDir, timings, stack, leftovers, dispose };
}

/** Every string secret-looking value in a stack's outputs (secret outputs, recursively). */
export function secretOutputValues(outputs: OutputMap | undefined): string[] {
    const values: string[] = [];
    const collect = (v: unknown) => {
        if (typeof v === "string") values.push(v);
        else if (Array.isArray(v)) v.forEach(collect);
        else if (isObj(v)) Object.values(v).forEach(collect);
    };
    for (const o of Object.values(outputs ?? {})) if (o.secret) collect(o.value);
    return values;
}

/** Files among `files` that contain any of `secrets` in plain text: "file: secret-name". */
export function plainSecretsIn(files: readonly string[], secrets: Readonly<Record<string, string>>): string[] {
    const found: string[] = [];
    for (const f of files) {
        const text = fs.readFileSync(f, "utf8");
        for (const [what, value] of Object.entries(secrets)) {
            if (value.length >= 8 && text.includes(value)) found.push(`${f}: ${what}`);
            // Base64 too: a Kubernetes Secret's data is base64 of the value.
            const b64 = Buffer.from(value).toString("base64").replace(/=+$/, "");
            if (value.length >= 8 && text.includes(b64)) found.push(`${f}: ${what} (base64)`);
        }
    }
    return found;
}
