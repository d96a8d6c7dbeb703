/**
 * The one registry call the image step needs: a tag's manifest digest (HEAD /v2/<name>/manifests/<ref>,
 * the OCI distribution spec), with the registry's auth challenge answered the way the Docker CLI
 * answers it: Basic with the config.json's credentials, or a Bearer token from the realm the
 * challenge names (distribution docs/spec/auth/token.md), with those credentials when there are any.
 */
import { parseImage } from "../../../components/preflight/registry";

export interface Credentials {
    readonly username: string;
    readonly password: string;
}

/** The credentials a Docker config.json holds for a registry host, or undefined. */
export function credentialsFor(dockerConfigJson: string | undefined, registry: string): Credentials | undefined {
    if (dockerConfigJson === undefined) return undefined;
    const auths = (JSON.parse(dockerConfigJson) as { auths?: Record<string, { auth?: string; username?: string; password?: string }> }).auths ?? {};
    const hostOf = (k: string) => k.replace(/^https?:\/\//, "").split("/")[0];
    const hub = registry === "docker.io" ? ["index.docker.io", "registry-1.docker.io", "docker.io"] : [registry];
    const entry = Object.entries(auths).find(([k]) => hub.includes(hostOf(k) ?? ""))?.[1];
    if (entry === undefined) return undefined;
    if (typeof entry.username === "string" && typeof entry.password === "string") return { username: entry.username, password: entry.password };
    if (typeof entry.auth === "string") {
        const plain = Buffer.from(entry.auth, "base64").toString("utf8");
        const i = plain.indexOf(":");
        if (i > 0) return { username: plain.slice(0, i), password: plain.slice(i + 1) };
    }
    return undefined;
}

/** A registry that cannot answer, or refused the credentials: the message names the registry, never the password. */
export class RegistryError extends Error {}

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
        fetch(url, {
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
            const t = await fetch(`${c.params.realm}?${q}`, { headers: creds ? { authorization: basic(creds) } : {}, signal: AbortSignal.timeout(TIMEOUT_MS) });
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
