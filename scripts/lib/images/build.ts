/**
 * The build step: which images a stack needs, and each one built from this repository's Dockerfile
 * with its pinned inputs, pushed to the user's registry with the stack's registryAuth, and named by
 * digest. The tag is a hash of every input (inputs.ts: the Dockerfile, each file it copies with its mode,
 * every build ARG and every source override), so a second run with the same inputs finds the tag in the registry and
 * builds and pushes nothing.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { BUILT_IMAGES, type PlatformConfig, trainerImageName } from "../../../components/config";
import { ImageStepError } from "./lock-step";
import { buildArgs, type ImageName, LOCK_COMMAND, readLock, readPins } from "./pins";
import { BASE_MIRROR_ENV, mirroredRef, parseBaseMirrors } from "./base-mirrors";
import { contextFiles, inputsHash } from "./inputs";
import { credentialsFor, manifestDigest, RegistryError } from "./registry";
import { parseImage } from "../../../components/preflight/registry";

/** An image a stack needs and the stack field that names it. */
export interface NeededImage {
    readonly image: ImageName;
    /** The field's path under the stack's platform object. */
    readonly field: readonly string[];
}

/**
 * Where an upstream is fetched from during a build, when not from its public host: the Dockerfile's
 * build ARG and the image step's environment variable that sets it (a mirror; the tests' loopback
 * servers). Passed only to a Dockerfile that declares the ARG. What arrives is checked as without a
 * mirror (a script by its sha256, OpenEnv by its commit, Debian's archive by its signatures); a
 * package index is not checked beyond the lock's versions, so every override is part of the
 * inputs' hash: an image built from another source gets another tag.
 */
export const SOURCE_OVERRIDES = [
    {
        arg: "AGENTRL_FETCH_BASE_URL",
        env: "AGENTRL_FETCH_BASE_URL",
        replaces: "https://huggingface.co and https://raw.githubusercontent.com (trainer/fetch-scripts.sh)",
    },
    { arg: "OPENENV_GIT_URL", env: "AGENTRL_OPENENV_GIT_URL", replaces: "https://github.com/huggingface/OpenEnv.git (trainer/blackbox/Dockerfile)" },
    { arg: "PIP_INDEX_URL", env: "AGENTRL_PIP_INDEX_URL", replaces: "PyPI (the trainer Dockerfiles' pip steps)" },
    { arg: "DEBIAN_MIRROR", env: "AGENTRL_DEBIAN_MIRROR", replaces: "http://deb.debian.org (images/mtail/Dockerfile)" },
] as const;

/**
 * The environment variable that sets `docker build --network` for the builds' RUN steps: on Docker's
 * default bridge a mirror on this machine's loopback (a devpi, an apt cache on 127.0.0.1) is out of
 * their reach, and pip ignores a plain-http index anywhere but on loopback (pip's secure origins);
 * `host` runs them on this machine's network. Not part of the inputs' hash: it changes where the
 * steps connect, not what they fetch (the source overrides, hashed, name that).
 */
export const BUILD_NETWORK_ENV = "AGENTRL_BUILD_NETWORK";

/** The builds' network from the environment, or undefined (the daemon's default); a value docker cannot name is refused. */
export function buildNetworkFrom(env: NodeJS.ProcessEnv): string | undefined {
    const v = env[BUILD_NETWORK_ENV]?.trim() ?? "";
    if (v === "") return undefined;
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(v))
        throw new ImageStepError(`${BUILD_NETWORK_ENV}: '${v}' is not a network docker build takes: host, none, default or a network's name`);
    return v;
}

/** The source overrides set in `env` that a Dockerfile declares, as build ARGs. */
export function sourceArgs(dockerfile: string, env: NodeJS.ProcessEnv): Record<string, string> {
    const out: Record<string, string> = {};
    for (const o of SOURCE_OVERRIDES) {
        const v = env[o.env];
        if (v !== undefined && v !== "" && new RegExp(`^ARG ${o.arg}\\b`, "m").test(dockerfile)) out[o.arg] = v;
    }
    return out;
}

/** The images this repository builds that a stack runs: from its layout, sandbox provider and observability. */
export function neededImages(c: PlatformConfig): NeededImage[] {
    const images: ImageName[] = [trainerImageName(c.training.layout)];
    if (c.sandboxes.provider === "agent-sandbox") images.push("sandbox");
    if (c.observability.enabled && c.ingress.enabled) images.push("mtail");
    return images.map((image) => ({ image, field: BUILT_IMAGES[image].field.split(".") }));
}

export interface BuildOptions {
    /** The repository root: the Dockerfiles and what they copy. */
    readonly root: string;
    /** Where images/*.pins.json and images/lock.json are. @default root */
    readonly pinsRoot?: string;
    /** `<registry>/<path>`: each image is pushed as `<to>/<image>`. */
    readonly to: string;
    /** The stack's registryAuth (a Docker config.json). */
    readonly dockerConfigJson: string;
    /** Context files replaced by another file (a test's named stand-ins), by context path. @default {} */
    readonly replace?: Readonly<Record<string, string>>;
    /** `docker build --network` (AGENTRL_BUILD_NETWORK: a mirror on this machine's loopback). @default the daemon's default */
    readonly buildNetwork?: string;
    readonly log?: (line: string) => void;
    /** Every line docker build and docker push print, as they print it (a caller's sign that the build goes on). */
    readonly progress?: (line: string) => void;
}

export interface Built {
    readonly image: ImageName;
    /** `<to>/<image>@sha256:...` */
    readonly ref: string;
    /** `<to>/<image>:inputs-<hash>`: the tag the inputs hash names. */
    readonly tag: string;
    /** Whether this run built and pushed it (false: the registry had the tag). */
    readonly pushed: boolean;
}

const ANSI_COLOUR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g");
/**
 * What the pinned steps said, logged after a build: each script's commit and digest check, the lock's install
 * on the base, what pip installed, the kernel's fetch and the variant kernels resolves, the change to TRL's
 * script, the mtail Debian gave.
 */
const PINNED_STEP_LINE = /^(fetch-scripts|fetch_kernel|kernels|install-lock|use_agent_sandbox|fix_trl_weight_sync): |^Successfully installed |^mtail version /;

/** Runs the docker CLI, each line it prints passed to `progress` as it comes; SIGKILL after `timeoutMs`. */
function docker(
    args: readonly string[],
    env: NodeJS.ProcessEnv,
    progress: (line: string) => void,
    timeoutMs = 3_600_000,
): Promise<{ status: number; out: string }> {
    return new Promise((resolve) => {
        const child = spawn("docker", [...args], { env, stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        let partial = "";
        const take = (d: Buffer) => {
            const text = d.toString("utf8");
            out += text;
            // What the caller reads afterwards: the last 64 MiB at most.
            if (out.length > 128 * 1024 * 1024) out = out.slice(-64 * 1024 * 1024);
            const lines = (partial + text).split("\n");
            partial = lines.pop() ?? "";
            for (const l of lines) progress(l.replace(ANSI_COLOUR, ""));
        };
        child.stdout.on("data", take);
        child.stderr.on("data", take);
        const timer = setTimeout(() => {
            out += `\n(docker ${args[0]}: killed after ${timeoutMs} ms)`;
            child.kill("SIGKILL");
        }, timeoutMs);
        child.once("error", (e) => {
            clearTimeout(timer);
            resolve({ status: 125, out: `${out}${String(e)}` });
        });
        child.once("close", (code) => {
            clearTimeout(timer);
            if (partial !== "") progress(partial.replace(ANSI_COLOUR, ""));
            resolve({ status: code ?? 125, out });
        });
    });
}

/** Builds and pushes one image, or finds it already pushed; throws ImageStepError naming what failed. */
export async function buildAndPush(image: ImageName, o: BuildOptions): Promise<Built> {
    const log = o.log ?? (() => undefined);
    const progress = o.progress ?? (() => undefined);
    const pinsRoot = o.pinsRoot ?? o.root;
    const pins = readPins(image, pinsRoot);
    const { args, problems } = buildArgs(pins, readLock(pinsRoot));
    if (problems.length > 0) throw new ImageStepError(`${image}: refused, the lock is not filled for it:\n  ${problems.join("\n  ")}`);
    // The base by the lock's digest, pulled through its mirror where one is set (the digest checks what arrives).
    const base = args[pins.base.arg];
    if (base !== undefined) args[pins.base.arg] = mirroredRef(base, parseBaseMirrors(process.env[BASE_MIRROR_ENV]));
    const target = `${o.to.replace(/\/$/, "")}/${image}`;
    const registry = parseImage(target).registry;
    // No credentials for the destination: pushed anonymously (a registry that wants them says so at the first request, naming auths).
    const anonymous = credentialsFor(o.dockerConfigJson, registry) === undefined;
    if (anonymous) log(`${image}: no credentials for ${registry} in the registry config (auths, credHelpers, credsStore): pushing anonymously`);

    // The context: the Dockerfile and exactly the files it copies (what each Dockerfile.dockerignore sends),
    // read once, so the bytes hashed into the tag are the bytes sent.
    const dockerfile = fs.readFileSync(path.join(o.root, pins.dockerfile), "utf8");
    const files = (() => {
        try {
            return contextFiles(dockerfile, path.join(o.root, pins.context), o.replace);
        } catch (e) {
            throw e instanceof ImageStepError ? new ImageStepError(`${image}: ${pins.dockerfile} (context ${pins.context}/): ${e.message}`) : e;
        }
    })();
    const sources = sourceArgs(dockerfile, process.env);
    const tag = `${target}:inputs-${inputsHash(dockerfile, files, args, sources)}`;
    const ctx = fs.mkdtempSync(path.join(os.tmpdir(), `agentrl-image-${image}-`));
    try {
        fs.writeFileSync(path.join(ctx, "Dockerfile"), dockerfile);
        for (const f of files) {
            fs.mkdirSync(path.dirname(path.join(ctx, f.rel)), { recursive: true });
            fs.writeFileSync(path.join(ctx, f.rel), f.body);
            fs.chmodSync(path.join(ctx, f.rel), f.mode);
        }

        // The registry first: a wrong password fails here, before any build; a tag it holds is this build.
        const existing = await manifestDigest(tag, o.dockerConfigJson).catch((e: unknown) => {
            throw e instanceof RegistryError ? new ImageStepError(`${image}: ${e.message}`) : e;
        });
        if (existing !== undefined) {
            log(`${image}: ${tag} already pushed (${existing}): same inputs, nothing to build`);
            return { image, ref: `${target}@${existing}`, tag, pushed: false };
        }

        const config = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-docker-config-"));
        try {
            fs.writeFileSync(path.join(config, "config.json"), o.dockerConfigJson, { mode: 0o600 });
            const env = { ...process.env, DOCKER_CONFIG: config };
            const buildArgv = ["build", "-f", path.join(ctx, "Dockerfile"), "-t", tag, ...(o.buildNetwork ? ["--network", o.buildNetwork] : [])];
            for (const [k, v] of Object.entries({ ...args, ...sources })) buildArgv.push("--build-arg", `${k}=${v}`);
            log(
                `${image}: docker build ${pins.dockerfile} -> ${tag}${
                    Object.keys(sources).length > 0
                        ? ` (from ${Object.entries(sources)
                              .map(([k, v]) => `${k}=${v}`)
                              .join(", ")})`
                        : ""
                }`,
            );
            const b = await docker([...buildArgv, ctx], env, progress);
            if (b.status !== 0) throw new ImageStepError(`${image}: docker build -f ${pins.dockerfile} failed (exit ${b.status}):\n${b.out.slice(-6000)}`);
            // The classic builder wraps a step's stderr in colour codes: a stdout line after it starts with a reset.
            for (const line of b.out.split("\n").map((l) => l.replace(ANSI_COLOUR, ""))) if (PINNED_STEP_LINE.test(line)) log(`${image}: ${line}`);
            log(`${image}: docker push ${tag}`);
            const p = await docker(["push", tag], env, progress);
            if (p.status !== 0)
                throw new ImageStepError(
                    `${image}: docker push ${tag} failed (exit ${p.status})${anonymous ? `, pushed anonymously: if ${registry} wants credentials, add auths["${registry}"] or a credHelpers entry to the registry config` : ""}:\n${p.out.slice(-3000)}`,
                );
        } finally {
            fs.rmSync(config, { recursive: true, force: true });
        }
        const digest = await manifestDigest(tag, o.dockerConfigJson);
        if (digest === undefined) throw new ImageStepError(`${image}: pushed ${tag}, but ${registry} does not list it`);
        return { image, ref: `${target}@${digest}`, tag, pushed: true };
    } finally {
        fs.rmSync(ctx, { recursive: true, force: true });
    }
}

/** The lock's fix for a refused build, for the CLI's usage text. */
export const LOCK_HINT = `${LOCK_COMMAND} [image...]`;
