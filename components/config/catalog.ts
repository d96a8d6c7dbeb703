/**
 * The typed catalog of known OpenEnv environment servers.
 *
 * Every OpenEnv server is a FastAPI app on port 8000 with `WS /ws` (one environment per
 * connection) and `GET /health` (OpenEnv src/openenv/core/env_server/http_server.py).
 * OpenEnv moved to huggingface/OpenEnv (PR 751): images are `ghcr.io/huggingface/openenv-<name>`,
 * tagged `latest` and `sha-<7-char commit>` by docker/metadata-action `type=sha`
 * (huggingface/OpenEnv .github/workflows/docker-build.yml @ 4026f15f). The defaults below use the
 * immutable `sha-` tag of one revision; prod still requires a digest (validateProdPinning).
 */

/** The upstream revision every entry below was read from, and whose images the defaults name. */
export const OPENENV_UPSTREAM = {
    repo: "huggingface/OpenEnv",
    /**
     * The newest commit (2026-06-08, PR 751) that touches the workflow's paths filter
     * (`envs/**\/Dockerfile`, `envs/**\/*.py`, the workflow), so a push of it ran the image build.
     */
    commit: "4026f15f2368efdfe7b0dc6a53e48703f88d31a9",
    /** The tag metadata-action's `type=sha` gives that commit. */
    imageTag: "sha-4026f15",
    /**
     * Not checked against GHCR here (no registry access when this was written): a push that built
     * the images is inferred from the paths filter, and a matrix job may have failed
     * (`fail-fast: false`). Check before relying on it; a tag that does not exist fails the pull.
     */
    tagVerified: false,
} as const;

/** Lists the `sha-` tags GHCR holds for a catalog image (the check `tagVerified: false` asks for). */
export function tagCheckCommand(image: string): string {
    const repo = image.split("@")[0]?.replace(/:[^:/]+$/, "") ?? image;
    return `crane ls ${repo} | grep ${OPENENV_UPSTREAM.imageTag}`;
}

/** How the image starts its server (its Dockerfile's CMD at OPENENV_UPSTREAM.commit). */
export interface ServerCommand {
    /**
     * `uvicorn-cli`: the `uvicorn` command line, which reads `UVICORN_*` env vars for every flag
     * not given on it (uvicorn main.py: click `auto_envvar_prefix="UVICORN"`); the images pass only
     * --host and --port, so `UVICORN_WS_PING_INTERVAL` / `UVICORN_WS_PING_TIMEOUT` apply.
     * `other`: e.g. `python -m ...` calling `uvicorn.run()`, which reads none of them.
     */
    readonly form: "uvicorn-cli" | "other";
    /** The CMD as written in the Dockerfile. */
    readonly cmd: readonly string[];
}

/**
 * OpenEnv's idle reaper: `ConcurrencyConfig(session_timeout=...)` passed by the env's server/app.py
 * destroys sessions idle that long (http_server.py `_reap_idle_sessions`). A bare
 * `max_concurrent_envs` (or nothing) means `session_timeout=None`: no reaper, and a half-open
 * socket holds its slot until the server's websocket ping gives up on it.
 */
export type IdleReaper =
    | { readonly kind: "none" }
    /** The app reads its timeout from this env var (e.g. tbench2's SESSION_IDLE_TIMEOUT_S, OpenEnv PR 1000). */
    | { readonly kind: "env"; readonly envVar: string; readonly defaultSeconds: number };

/** An env server's websocket keepalive: a ping every intervalSeconds, the peer dropped after timeoutSeconds without a pong. */
export interface WsPing {
    readonly intervalSeconds: number;
    readonly timeoutSeconds: number;
}

/** Env vars the uvicorn CLI reads for --ws-ping-interval / --ws-ping-timeout (uvicorn main.py, click auto_envvar_prefix "UVICORN"). */
export const WS_PING_ENV_VARS = { interval: "UVICORN_WS_PING_INTERVAL", timeout: "UVICORN_WS_PING_TIMEOUT" } as const;

/** uvicorn's own defaults (main.py: --ws-ping-interval 20.0, --ws-ping-timeout 20.0). */
export const UVICORN_WS_PING: WsPing = { intervalSeconds: 20, timeoutSeconds: 20 };

/**
 * With vLLM colocated in the trainer process, generation holds the GIL and the client's event loop
 * for long stretches, so its pongs come late and uvicorn's 20 s timeout drops live sessions
 * mid-episode (the seed's Space relaxes the server's ping timeout; its script turns client pings
 * off). 300 s outlasts a generation step of the published runs; 60 s between pings keeps the
 * keepalive traffic negligible. The cost: a vanished client holds its slot up to 360 s.
 * The numbers are this project's choice, not copied from the Space (whose values are not published).
 */
export const COLOCATE_WS_PING: WsPing = { intervalSeconds: 60, timeoutSeconds: 300 };

/** The keepalive an env gets when config sets none: relaxed for whitebox-colocate, uvicorn's otherwise. */
export function defaultWsPing(layout: string): WsPing {
    return layout === "whitebox-colocate" ? COLOCATE_WS_PING : UVICORN_WS_PING;
}

/** uid/gid of opted-in non-root replicas: high and unused (distroless's `nonroot`), as the sandboxes use. */
export const NON_ROOT_UID = 65532;

/** What the platform must know about one environment server image. */
export interface CatalogEntry {
    /** Default image reference (an immutable `sha-` tag); pin it by digest in config for prod. */
    readonly image: string;
    /** The Dockerfile and app this entry was read from, at OPENENV_UPSTREAM.commit. */
    readonly upstream: { readonly dockerfile: string; readonly app: string };
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
    /** How the image starts its server. */
    readonly command: ServerCommand;
    /** Whether its app can reap idle sessions. */
    readonly idleReaper: IdleReaper;
    /** The user the image runs as: `root` when its Dockerfile (and base image) has no USER. */
    readonly user: string;
    /** Whether the image runs as a non-root user (decides runAsNonRoot without the opt-in). */
    readonly nonRoot: boolean;
    /**
     * Whether the server executes code the model wrote (the coding envs run it in-process): such
     * replicas run as uid 65532 (envs.<name>.runAsNonRoot defaults to true) with a read-only root
     * filesystem and a sized scratch dir, and DNS-only egress.
     */
    readonly runsModelCode: boolean;
    /** What the replicas may reach besides the router that calls them: `dns` only, or DNS + the public `internet` (never private ranges or the metadata service). */
    readonly egress: "dns" | "internet";
}

const OPENENV_PORT = 8000;
const image = (name: string): string => `ghcr.io/huggingface/openenv-${name}:${OPENENV_UPSTREAM.imageTag}`;
const upstream = (dir: string) => ({ dockerfile: `envs/${dir}/server/Dockerfile`, app: `envs/${dir}/server/app.py` });
// The uv-built images (echo, textarena, opencode) share this CMD.
const uvSh = { form: "uvicorn-cli", cmd: ["sh", "-c", "cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port 8000"] } as const;
const common = {
    port: OPENENV_PORT,
    healthPath: "/health",
    wsPath: "/ws",
    // No USER in any of these Dockerfiles nor in the openenv-base / python:3.11-slim they start from.
    user: "root",
    nonRoot: false,
    runsModelCode: false,
    egress: "dns",
    // Each app passes a bare max_concurrent_envs (or nothing): session_timeout stays None.
    idleReaper: { kind: "none" },
} as const;

export const ENV_CATALOG = {
    // coding_env does not read MAX_CONCURRENT_ENVS: one session per process, scale by replicas.
    // It executes the model's Python in the server process (OpenEnv envs/coding_env PyExecutor).
    coding: {
        ...common,
        image: image("coding-env"),
        upstream: upstream("coding_env"),
        command: { form: "uvicorn-cli", cmd: ["uvicorn", "coding_env.server.app:app", "--host", "0.0.0.0", "--port", "8000"] },
        concurrentSessions: false,
        defaultSessions: 1,
        settings: {},
        runsModelCode: true,
    },
    // textarena (Wordle): MAX_CONCURRENT_ENVS 8; the public Space allows 1.
    textarena: {
        ...common,
        image: image("textarena-env"),
        upstream: upstream("textarena_env"),
        command: uvSh,
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
        image: image("opencode-env"),
        upstream: upstream("opencode_env"),
        command: uvSh,
        concurrentSessions: true,
        sessionsEnvVar: "MAX_CONCURRENT_ENVS",
        defaultSessions: 4,
        settings: {},
        egress: "internet",
    },
    echo: {
        ...common,
        image: image("echo-env"),
        upstream: upstream("echo_env"),
        command: uvSh,
        concurrentSessions: true,
        sessionsEnvVar: "MAX_CONCURRENT_ENVS",
        defaultSessions: 8,
        settings: {},
    },
} as const satisfies Record<string, CatalogEntry>;

export type CatalogName = keyof typeof ENV_CATALOG;
export const CATALOG_NAMES = Object.keys(ENV_CATALOG) as CatalogName[];
