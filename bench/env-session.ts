// Env sessions (npm run bench -- --only env-session): the latency of one env step through the env router against the
// same step sent straight to the replica (ratio, p50, p99), and sessions opened per second through each, measured with
// openenv 0.10's own client (bench/env_session.py) against a real OpenEnv server: openenv's create_app under the uvicorn
// CLI, serving the stand-in environment of python/tests/grpo_support.py (CodingStandIn: a step parses print(N), so the
// figure is the path's cost, not an env's work). The router is real nginx with the config the stack renders for
// one replica (components/env/router.ts via startLocalRouter). Direct and routed rounds alternate; every loop is
// bounded by a count and by the bench's deadline.
import * as path from "node:path";
import { startLocalRouter } from "../components/env/local";
import { LOCK_VENV_HINT, lockVenvPython } from "../test/helpers/stub-env";
import { REPO_ROOT, fmt, onCleanup, quantile, runCollected, sleep, spawnTracked, table, type TargetCheck } from "./lib";

export interface EnvSessionBenchOptions {
    readonly deadline: number;
    readonly log: (line: string) => void;
    /** Alternating rounds of each path. @default 4 */
    readonly rounds?: number;
    /** Steps per session per round. @default 200 */
    readonly steps?: number;
    /** Sessions opened per path per round. @default 50 */
    readonly sessions?: number;
}

interface PathFigures {
    readonly steps_ms: number[];
    readonly sessions: number;
    readonly sessions_s: number;
}

/** Sessions the replica (and the router's cap) holds: the bench opens one at a time, so any k >= 1 does. */
const SESSIONS_PER_REPLICA = 4;

async function waitHealthy(url: string, deadline: number, exited: () => boolean): Promise<void> {
    while (Date.now() < deadline) {
        if (exited()) throw new Error(`the env server exited before ${url} answered`);
        try {
            const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
            await res.text();
            if (res.status === 200) return;
        } catch {
            // Not up yet.
        }
        await sleep(200);
    }
    throw new Error(`${url} did not answer before the deadline`);
}

export async function runEnvSessionBench(o: EnvSessionBenchOptions): Promise<{ markdown: string; checks: TargetCheck[] }> {
    const python = lockVenvPython();
    if (python === undefined) throw new Error(`the trainer-side lock's venv is missing: ${LOCK_VENV_HINT}`);
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const tests = path.join(REPO_ROOT, "python", "tests");
    // As the images start their servers: the uvicorn CLI, the stack's replica env (session cap, web UI off).
    const server = spawnTracked(path.join(path.dirname(python), "uvicorn"), ["grpo_support:app", "--host", "127.0.0.1", "--port", String(port)], {
        cwd: tests,
        env: {
            PATH: process.env.PATH ?? "",
            HOME: process.env.HOME ?? "/tmp",
            MAX_CONCURRENT_ENVS: String(SESSIONS_PER_REPLICA),
            ENABLE_WEB_INTERFACE: "false",
        },
        stdio: ["ignore", "ignore", "pipe"],
    });
    let serverErr = "";
    server.stderr?.on("data", (b: Buffer) => (serverErr += b.toString("utf8")));
    const direct = `http://127.0.0.1:${port}`;
    o.log(`env-session: starting the OpenEnv server on ${direct}`);
    await waitHealthy(`${direct}/health`, Math.min(o.deadline, Date.now() + 120_000), () => server.exitCode !== null).catch((e: Error) => {
        throw new Error(`${e.message}\n${serverErr.slice(-2000)}`);
    });
    const router = await startLocalRouter({ envName: "coding", replicas: [`127.0.0.1:${port}`], sessionsPerReplica: SESSIONS_PER_REPLICA });
    const unregister = onCleanup(() => router.stop());
    try {
        const rounds = o.rounds ?? 4;
        const steps = o.steps ?? 200;
        const sessions = o.sessions ?? 50;
        const budget = Math.max(10, (o.deadline - Date.now()) / 1000 - 15);
        o.log(`env-session: ${rounds} alternating rounds of ${steps} steps and ${sessions} sessions per path (at most ${fmt(budget, 0)} s)`);
        const args = [path.join(REPO_ROOT, "bench", "env_session.py"), direct, router.url, String(rounds), String(steps), String(sessions), String(budget)];
        const r = await runCollected(python, args, { cwd: REPO_ROOT }, (budget + 60) * 1000);
        const line = r.out.split("\n").find((l) => l.startsWith("BENCH_JSON "));
        if (r.code !== 0 || line === undefined) throw new Error(`bench/env_session.py exited ${r.code}:\n${r.err.slice(-3000)}`);
        const res = JSON.parse(line.slice("BENCH_JSON ".length)) as Record<"direct" | "router", PathFigures>;
        const p = (f: PathFigures, q: number) => quantile(f.steps_ms, q);
        const rate = (f: PathFigures) => f.sessions / f.sessions_s;
        const rows = (["direct", "router"] as const).map((name) => {
            const f = res[name];
            return [name, String(f.steps_ms.length), fmt(p(f, 0.5), 3), fmt(p(f, 0.99), 3), String(f.sessions), fmt(rate(f), 1)];
        });
        const d = res.direct;
        const rt = res.router;
        const markdown = [
            "## 5. Env sessions: router vs direct",
            "",
            "openenv 0.10's client (bench/env_session.py) against one real OpenEnv server (create_app under the uvicorn CLI, the stand-in env of",
            "python/tests/grpo_support.py), straight and through the env router (real nginx, the stack's rendered config). Step: one",
            "`step` round trip on an open session. Sessions/s: open + reset + close, one after another. Direct and routed rounds alternate.",
            "",
            table(["path", "steps", "step p50 (ms)", "step p99 (ms)", "sessions", "sessions/s"], rows),
            "",
            `Router / direct: step p50 ${fmt(p(rt, 0.5) / p(d, 0.5))}x, p99 ${fmt(p(rt, 0.99) / p(d, 0.99))}x; sessions/s ${fmt(rate(rt) / rate(d))}x.`,
            "",
        ].join("\n");
        return { markdown, checks: [] };
    } finally {
        unregister();
        await router.stop();
        server.kill("SIGTERM");
    }
}
