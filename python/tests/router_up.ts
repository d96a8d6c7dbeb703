// For python/tests/test_grpo_env_path.py: the env router of a scaled-down mbpp-whitebox stack,
// rendered by the stack's own resolve step (components/env/resolve.ts resolveEnvSpace) and run
// with a real local nginx (components/env/local.ts startLocalRouter) in front of the replicas the
// test runs on 127.0.0.1.
//
// Argument: one JSON object
//   { replicas: R, sessionsPerReplica: k, replicaPorts: [p1, ...], bypassCheck?, wsPing?, startRouter? }
// The stack: mbpp-whitebox with its generation batch scaled down at the same ratio (2 x 2 = 4
// sessions, 2 generations; the recipe's 8 x 2 = 16, 4 generations), eval off, one env "coding"
// of R replicas x k sessions and no spare replica. Its config check (parsePlatformConfig) runs
// first; a refused stack stops here unless bypassCheck, where the env is described from the
// parsed, defaulted config without the check (what the check would have prevented is what the
// test then runs).
//
// Prints one line `READY <json>` ({url, wsUrl, pid, workerPids, runDir, nginxVersion, configProblems,
// capacity, replicaEnv, replicaCount, sessionsPerReplica, envName, configText}), then holds the
// router until stdin closes (or SIGTERM), then stops it and exits 0. With startRouter false it
// prints the description alone and exits.
// usage (repo root): node --import tsx python/tests/router_up.ts '<json>'
import { applyRecipe } from "../../components/config/parse";
import { ConfigError, parsePlatformConfig, platformNames, platformSchema, resolveDefaults, type PlatformConfig } from "../../components/config";
import { resolveEnvSpace } from "../../components/env";
import { startLocalRouter, type LocalRouter } from "../../components/env/local";
import { configProblems, withTestImages } from "../../test/helpers/config";

interface Args {
    readonly replicas: number;
    readonly sessionsPerReplica: number;
    readonly replicaPorts: readonly number[];
    readonly bypassCheck?: boolean;
    /** The env's wsPing (server-side websocket keepalive, rendered as UVICORN_WS_PING_*). @default the stack's */
    readonly wsPing?: { readonly intervalSeconds: number; readonly timeoutSeconds: number };
    /** false: print the description (READY, no url) and exit, starting no router. @default true */
    readonly startRouter?: boolean;
}

/** The stack's raw config: the recipe, scaled down, with the env sized by the test. */
function stackConfig(a: Args): unknown {
    return withTestImages({
        recipe: "mbpp-whitebox",
        runId: "grpo-env-path",
        target: { kind: "docker" },
        training: { perDeviceTrainBatchSize: 2, gradientAccumulationSteps: 2, numGenerations: 2, perDeviceEvalBatchSize: 2, evalSize: 0 },
        envs: {
            coding: {
                // The test's replicas serve concurrent sessions (a stand-in for the catalog envs), so
                // a custom env: the catalog's coding env holds one session per process.
                catalog: "custom",
                image: "registry.test/agent-rl/coding-standin:test",
                concurrentSessions: true,
                sessionsPerReplica: a.sessionsPerReplica,
                replicas: a.replicas,
                headroomReplicas: 0,
                ...(a.wsPing !== undefined ? { wsPing: a.wsPing } : {}),
            },
        },
    });
}

const problemsOf = (raw: unknown): string[] => configProblems(() => parsePlatformConfig(raw, "dev"));

/** parsePlatformConfig without its last step (validatePlatform): only for rendering a refused stack. */
function parseUnchecked(raw: unknown): PlatformConfig {
    const { merged, problems } = applyRecipe(raw);
    if (problems.length > 0) throw new ConfigError(problems);
    const parsed = platformSchema.safeParse(merged);
    if (!parsed.success) throw new Error(`stack config does not parse: ${parsed.error.message}`);
    return resolveDefaults(parsed.data, "dev");
}

async function main(): Promise<number> {
    const a = JSON.parse(process.argv[2] ?? "{}") as Args;
    const raw = stackConfig(a);
    const problems = problemsOf(raw);
    if (problems.length > 0 && !a.bypassCheck) {
        process.stderr.write(`router_up: the stack's config check refuses it:\n- ${problems.join("\n- ")}\n`);
        return 2;
    }
    const config = problems.length > 0 ? parseUnchecked(raw) : parsePlatformConfig(raw, "dev");
    const env = config.envs.find((e) => e.name === "coding");
    if (env === undefined) throw new Error("the stack has no env 'coding'");
    const desc = resolveEnvSpace(config, env, platformNames(config));
    if (desc.kind !== "deployed") throw new Error("env 'coding' is not deployed");
    if (a.replicaPorts.length !== desc.replicas.count) {
        throw new Error(`the stack runs ${desc.replicas.count} replicas but ${a.replicaPorts.length} ports were given`);
    }
    const described = {
        configProblems: problems,
        capacity: desc.capacity,
        replicaEnv: desc.replicas.env,
        replicaCount: desc.replicas.count,
        sessionsPerReplica: desc.router.settings.sessionsPerReplica,
        envName: desc.router.settings.envName,
    };
    if (a.startRouter === false) {
        process.stdout.write(`READY ${JSON.stringify(described)}\n`);
        return 0;
    }
    // The stack's router settings, with the replicas' addresses swapped for the test's and no
    // resolver: nginx < 1.27.3 has no "server ... resolve" (local.ts refuses it), and 127.0.0.1
    // needs no re-resolving.
    const { replicas: _stackAddresses, resolver: _resolver, listenPort: _port, runDir: _runDir, ...settings } = desc.router.settings;
    const router: LocalRouter = await startLocalRouter({ ...settings, replicas: a.replicaPorts.map((p) => `127.0.0.1:${p}`) });
    let stopping: Promise<void> | undefined;
    const stop = (): Promise<void> => {
        stopping ??= router.stop();
        return stopping;
    };
    process.on("SIGTERM", () => void stop().then(() => process.exit(0)));
    try {
        const facts = {
            url: router.url,
            wsUrl: router.wsUrl,
            pid: router.pid,
            workerPids: router.workerPids(),
            runDir: router.runDir,
            nginxVersion: router.nginxVersion,
            ...described,
            configText: router.configText,
        };
        process.stdout.write(`READY ${JSON.stringify(facts)}\n`);
        await new Promise<void>((resolve) => {
            process.stdin.on("end", resolve);
            process.stdin.on("close", resolve);
            process.stdin.resume();
        });
        return 0;
    } finally {
        await stop();
    }
}

main().then(
    (code) => process.exit(code),
    (e: unknown) => {
        process.stderr.write(`router_up: ${(e as Error).stack ?? e}\n`);
        process.exit(1);
    },
);
