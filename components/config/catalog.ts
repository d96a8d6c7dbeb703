/**
 * The typed catalog of known OpenEnv environment servers.
 *
 * Every OpenEnv server is a FastAPI app on port 8000 with `WS /ws` (one environment per
 * connection) and `GET /health` (OpenEnv src/openenv/core/env_server/http_server.py).
 * Images follow `ghcr.io/<owner>/openenv-<name>` (OpenEnv .github/workflows/docker-build.yml);
 * `:latest` is only a default for dev: pin a digest (prod validation requires it).
 */

/** What the platform must know about one environment server image. */
export interface CatalogEntry {
    /** Default image reference; pin it by digest in config for anything but dev. */
    readonly image: string;
    /** Port the FastAPI server listens on. */
    readonly port: number;
    /** Health route, used for readiness and Docker health checks. */
    readonly healthPath: string;
    /** Websocket route, one live environment per connection. */
    readonly wsPath: string;
    /** Whether the server holds more than one session per process (declares SUPPORTS_CONCURRENT_SESSIONS). */
    readonly concurrentSessions: boolean;
    /** Env var that sets the per-process session cap, when the server reads one. */
    readonly sessionsEnvVar?: string;
    /** Sessions per replica when config does not say (the env's own server/app.py default). */
    readonly defaultSessions: number;
    /** The env's own settings and their defaults, passed as env vars. */
    readonly settings: Readonly<Record<string, string>>;
    /** Whether the image runs as a non-root user (decides runAsNonRoot). */
    readonly nonRoot: boolean;
    /**
     * Whether the server executes code the model wrote (the coding envs run it in-process): such
     * replicas get a read-only root filesystem with a sized scratch dir, and DNS-only egress.
     */
    readonly runsModelCode: boolean;
    /** What the replicas may reach besides the router that calls them: `dns` only, or DNS + the public `internet` (never private ranges or the metadata service). */
    readonly egress: "dns" | "internet";
}

const OPENENV_PORT = 8000;
const common = { port: OPENENV_PORT, healthPath: "/health", wsPath: "/ws", nonRoot: false, runsModelCode: false, egress: "dns" } as const;

export const ENV_CATALOG = {
    // coding_env does not read MAX_CONCURRENT_ENVS: one session per process, scale by replicas.
    // It executes the model's Python in the server process (OpenEnv envs/coding_env PyExecutor).
    coding: {
        ...common,
        image: "ghcr.io/meta-pytorch/openenv-coding-env:latest",
        concurrentSessions: false,
        defaultSessions: 1,
        settings: {},
        runsModelCode: true,
    },
    // coding_tools reads MAX_CONCURRENT_ENVS (default 4).
    coding_tools: {
        ...common,
        image: "ghcr.io/meta-pytorch/openenv-coding-tools-env:latest",
        concurrentSessions: true,
        sessionsEnvVar: "MAX_CONCURRENT_ENVS",
        defaultSessions: 4,
        settings: {},
        runsModelCode: true,
    },
    // textarena (Wordle): MAX_CONCURRENT_ENVS 8; the public Space allows 1.
    textarena: {
        ...common,
        image: "ghcr.io/meta-pytorch/openenv-textarena-env:latest",
        concurrentSessions: true,
        sessionsEnvVar: "MAX_CONCURRENT_ENVS",
        defaultSessions: 8,
        settings: { TEXTARENA_ENV_ID: "Wordle-v0", TEXTARENA_NUM_PLAYERS: "1" },
        // TEXTARENA_DOWNLOAD_NLTK fetches word lists on first start.
        egress: "internet",
    },
    // Drives hosted sandboxes (E2B / HF) over the internet.
    opencode: {
        ...common,
        image: "ghcr.io/meta-pytorch/openenv-opencode-env:latest",
        concurrentSessions: true,
        sessionsEnvVar: "MAX_CONCURRENT_ENVS",
        defaultSessions: 4,
        settings: {},
        egress: "internet",
    },
    echo: {
        ...common,
        image: "ghcr.io/meta-pytorch/openenv-echo-env:latest",
        concurrentSessions: true,
        sessionsEnvVar: "MAX_CONCURRENT_ENVS",
        defaultSessions: 8,
        settings: {},
    },
} as const satisfies Record<string, CatalogEntry>;

export type CatalogName = keyof typeof ENV_CATALOG;
export const CATALOG_NAMES = Object.keys(ENV_CATALOG) as CatalogName[];
