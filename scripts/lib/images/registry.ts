/**
 * The one registry call the image step needs: a tag's manifest digest (HEAD /v2/<name>/manifests/<ref>,
 * the OCI distribution spec), with the registry's auth challenge answered the way the Docker CLI
 * answers it: Basic with the config.json's credentials, or a Bearer token from the realm the
 * challenge names (distribution docs/spec/auth/token.md), with those credentials when there are any.
 */
import { spawnSync } from "node:child_process";
import { parseImage } from "../../../components/preflight/registry";

export interface Credentials {
    readonly username: string;
    readonly password: string;
}

/** The keys a credential helper and `auths` know Docker Hub by (the Docker CLI's `https://index.docker.io/v1/`). */
function hubAliases(registry: string): string[] {
    return registry === "docker.io" ? ["index.docker.io", "registry-1.docker.io", "docker.io"] : [registry];
}

/**
 * What a Docker credential helper (`docker-credential-<name> get`, docker/docker-credential-helpers'
 * protocol: the server URL on stdin, `{"Username","Secret"}` on stdout) holds for a registry; undefined
 * when it holds nothing for it. The helper is the one `docker login` or a cloud's helper
 * (ecr-login, gcloud, ...) wrote into the config.
 */
export function helperCredentials(helper: string, registry: string, run: typeof spawnSync = spawnSync): Credentials | undefined {
    const server = registry === "docker.io" ? "https://index.docker.io/v1/" : registry;
    const bin = `docker-credential-${helper}`;
    const r = run(bin, ["get"], { input: server, encoding: "utf8", timeout: 60_000 });
    if (r.error !== undefined)
        throw new RegistryError(
            `${registry}: the Docker config names the credential helper '${helper}' and ${bin} did not run (${(r.error as NodeJS.ErrnoException).code ?? r.error.message}): install it on PATH, or give the credentials inline in auths["${registry}"]`,
        );
    if (r.status !== 0) {
        if (/credentials not found/i.test(`${r.stdout}${r.stderr}`)) return undefined;
        throw new RegistryError(
            `${registry}: ${bin} get failed (exit ${r.status}): ${String(r.stderr).trim().split("\n")[0] ?? ""}: run docker login ${registry} again`,
        );
    }
    const body = JSON.parse(String(r.stdout)) as { Username?: string; Secret?: string };
    if (typeof body.Username !== "string" || typeof body.Secret !== "string" || body.Secret === "") return undefined;
    if (body.Username === "<token>")
        throw new RegistryError(
            `${registry}: ${bin} holds an identity token, which this step does not exchange: docker login ${registry} with a user and password or access token`,
        );
    return { username: body.Username, password: body.Secret };
}

/**
 * The credentials a Docker config.json holds for a registry host, or undefined (anonymous): inline
 * `auths`, else the registry's `credHelpers` entry, else `credsStore`, in the Docker CLI's order
 * (docker/cli cli/config/configfile/file.go GetCredentialsStore).
 */
export function credentialsFor(dockerConfigJson: string | undefined, registry: string, run: typeof spawnSync = spawnSync): Credentials | undefined {
    if (dockerConfigJson === undefined) return undefined;
    const config = JSON.parse(dockerConfigJson) as {
        auths?: Record<string, { auth?: string; username?: string; password?: string }>;
        credHelpers?: Record<string, string>;
        credsStore?: string;
    };
    const hostOf = (k: string) => k.replace(/^https?:\/\//, "").split("/")[0];
    const names = hubAliases(registry);
    const entry = Object.entries(config.auths ?? {}).find(([k]) => names.includes(hostOf(k) ?? ""))?.[1];
    if (entry !== undefined) {
        if (typeof entry.username === "string" && typeof entry.password === "string") return { username: entry.username, password: entry.password };
        if (typeof entry.auth === "string" && entry.auth !== "") {
            const plain = Buffer.from(entry.auth, "base64").toString("utf8");
            const i = plain.indexOf(":");
            if (i > 0) return { username: plain.slice(0, i), password: plain.slice(i + 1) };
        }
    }
    const helper = Object.entries(config.credHelpers ?? {}).find(([k]) => names.includes(hostOf(k) ?? ""))?.[1] ?? config.credsStore;
    return helper === undefined || helper === "" ? undefined : helperCredentials(helper, registry, run);
}

/** A registry that cannot answer, or refused the credentials: the message names the registry, never the password. */
export class RegistryError extends Error {}

/** A registry host that could not be reached at all (no route, refused, no DNS name, timed out): the caller adds its mirror setting. */
export class UnreachableError extends RegistryError {
    constructor(
        /** `host[:port]` as dialled. */
        readonly host: string,
        readonly url: string,
        /** ECONNREFUSED, ENOTFOUND, a timeout, ... */
        readonly why: string,
    ) {
        super(`${host}: could not reach ${url} (${why})`);
    }
}

/** fetch, with a failure to connect turned into an UnreachableError naming the host and the cause (undici's "fetch failed" names neither). */
async function reach(url: string, init: RequestInit): Promise<Response> {
    try {
        return await fetch(url, init);
    } catch (e) {
        const err = e as Error & { cause?: { code?: string; message?: string } };
        const why = err.name === "TimeoutError" ? `no answer in ${TIMEOUT_MS / 1000} s` : (err.cause?.code ?? err.cause?.message ?? err.message);
        throw new UnreachableError(new URL(url).host, url, why);
    }
}

const MANIFEST_TYPES = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
].join(", ");

/** The API base of a registry host: plain http for loopback (as dockerd treats 127.0.0.0/8 as insecure), https elsewhere. */
export function registryBase(registry: string): string {
    if (registry === "docker.io") return "https://registry-1.docker.io";
    const host = registry.replace(/:\d+$/, "");
    const loopback = host === "localhost" || /^127\./.test(host) || host === "[::1]";
    return `${loopback ? "http" : "https"}://${registry}`;
}

function basic(c: Credentials): string {
    return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString("base64")}`;
}

function challenge(header: string | null): { scheme: string; params: Record<string, string> } | undefined {
    if (header === null) return undefined;
    const m = /^(\w+)\s*(.*)$/.exec(header.trim());
    if (!m) return undefined;
    const params: Record<string, string> = {};
    for (const p of (m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)) params[p[1] as string] = p[2] as string;
    return { scheme: (m[1] as string).toLowerCase(), params };
}

const TIMEOUT_MS = 30_000;

/**
 * The digest a reference (`host/repo:tag` or `...@sha256:`) resolves to, or undefined when the
 * registry has no such manifest. Throws RegistryError when the registry refuses the credentials.
 */
export async function manifestDigest(ref: string, dockerConfigJson?: string): Promise<string | undefined> {
    const { registry, repository } = parseImage(ref);
    const at = ref.indexOf("@");
    const name = at >= 0 ? ref.slice(0, at) : ref;
    const lastColon = name.lastIndexOf(":");
    const reference = at >= 0 ? ref.slice(at + 1) : lastColon > name.lastIndexOf("/") ? name.slice(lastColon + 1) : "latest";
    const url = `${registryBase(registry)}/v2/${repository}/manifests/${reference}`;
    const creds = credentialsFor(dockerConfigJson, registry);
    const head = (authorization?: string) =>
        reach(url, {
            method: "HEAD",
            headers: { accept: MANIFEST_TYPES, ...(authorization ? { authorization } : {}) },
            signal: AbortSignal.timeout(TIMEOUT_MS),
        });
    let res = await head();
    if (res.status === 401) {
        const c = challenge(res.headers.get("www-authenticate"));
        let authorization: string | undefined;
        if (c?.scheme === "basic") {
            if (creds === undefined)
                throw new RegistryError(`${registry}: asks for credentials and registryAuth holds none for it: add auths["${registry}"] to registryAuth`);
            authorization = basic(creds);
        } else if (c?.scheme === "bearer" && c.params.realm) {
            const q = new URLSearchParams({ ...(c.params.service ? { service: c.params.service } : {}), scope: `repository:${repository}:pull` });
            const t = await reach(`${c.params.realm}?${q}`, { headers: creds ? { authorization: basic(creds) } : {}, signal: AbortSignal.timeout(TIMEOUT_MS) });
            if (!t.ok)
                throw new RegistryError(
                    `${registry}: its token service refused ${creds ? `the registryAuth credentials of user '${creds.username}'` : "an anonymous pull"} (HTTP ${t.status})`,
                );
            const body = (await t.json()) as { token?: string; access_token?: string };
            authorization = `Bearer ${body.token ?? body.access_token ?? ""}`;
        }
        if (authorization === undefined)
            throw new RegistryError(`${registry}: answered 401 with no challenge this client knows (${res.headers.get("www-authenticate") ?? "none"})`);
        res = await head(authorization);
        if (res.status === 401)
            throw new RegistryError(
                `${registry}: refused ${creds ? `the registryAuth credentials of user '${creds.username}' (wrong password?)` : "the request"}: fix auths["${registry}"] in registryAuth`,
            );
    }
    if (res.status === 404) return undefined;
    if (!res.ok) throw new RegistryError(`${registry}: HEAD ${url} answered HTTP ${res.status}`);
    const digest = res.headers.get("docker-content-digest");
    if (digest === null || !/^sha256:[0-9a-f]{64}$/.test(digest)) throw new RegistryError(`${registry}: HEAD ${url} gave no Docker-Content-Digest`);
    return digest;
}
