/**
 * The image step where the network is not what it expects: offline or behind a firewall the lock
 * step names the host it could not reach and the mirror setting (no stack trace); a base image's
 * pull-through mirror answers for its registry; the registry config may hold credential helpers
 * (what `docker login` and the cloud helpers write) or nothing at all (an anonymous registry).
 * No dockerd, no registry fixture: loopback HTTP servers and a closed loopback port.
 * Run: node --import tsx --test test/tooling/images-offline.test.ts
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { readRegistryAuth } from "../../scripts/images";
import { BASE_MIRROR_ENV, mirroredRef, parseBaseMirrors } from "../../scripts/lib/images/base-mirrors";
import { fillLock, ImageStepError, resolveHubCommit, scriptDigests } from "../../scripts/lib/images/lock-step";
import { lockPath, readPins, REPO_ROOT } from "../../scripts/lib/images/pins";
import { credentialsFor, RegistryError } from "../../scripts/lib/images/registry";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-images-offline-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A loopback port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
    const s = http.createServer();
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    const { port } = s.address() as AddressInfo;
    await new Promise<void>((r) => s.close(() => r()));
    return port;
}

/** A pins root holding one base-only image (mtail's pins with another base) and an empty lock. */
function pinsRootWithBase(name: string, baseRef: string): string {
    const root = path.join(tmp, name);
    fs.mkdirSync(path.join(root, "images"), { recursive: true });
    const pins = { ...readPins("mtail"), base: { ...readPins("mtail").base, ref: baseRef } };
    fs.writeFileSync(path.join(root, "images", "mtail.pins.json"), JSON.stringify(pins));
    fs.writeFileSync(lockPath(root), JSON.stringify({ images: { mtail: { base: null, args: {} } } }));
    return root;
}

describe("the lock step offline", () => {
    test("npm run images -- lock with the base's registry out of reach: exit 1, the host and the mirror setting, no stack trace, the lock untouched", async () => {
        const port = await closedPort();
        const lockBefore = fs.readFileSync(lockPath(REPO_ROOT), "utf8");
        const r = spawnSync(process.execPath, ["--import", "tsx", "scripts/images.ts", "lock", "mtail"], {
            cwd: REPO_ROOT,
            encoding: "utf8",
            timeout: 120_000,
            env: { ...process.env, [BASE_MIRROR_ENV]: `docker.io=127.0.0.1:${port}/dockerhub` },
        });
        assert.equal(r.status, 1, r.stderr);
        assert.equal(
            r.stderr.trim(),
            `images: mtail: base debian:bookworm-slim through its mirror (127.0.0.1:${port}/dockerhub/library/debian:bookworm-slim): could not reach 127.0.0.1:${port} (ECONNREFUSED): ${BASE_MIRROR_ENV} sends docker.io to 127.0.0.1:${port}/dockerhub: check that mirror, or fix its entry`,
        );
        assert.doesNotMatch(r.stderr, /internal error|fetch failed|\n\s+at /);
        assert.equal(fs.readFileSync(lockPath(REPO_ROOT), "utf8"), lockBefore);
    });

    test("a base registry out of reach with no mirror set names the host and the setting to add", async () => {
        const port = await closedPort();
        const root = pinsRootWithBase("no-mirror", `127.0.0.1:${port}/agentrl/base:1`);
        await assert.rejects(fillLock(["mtail"], { pinsRoot: root, root: REPO_ROOT, baseMirrors: {} }), (e: unknown) => {
            assert.ok(e instanceof ImageStepError);
            assert.equal(
                e.message,
                `mtail: base 127.0.0.1:${port}/agentrl/base:1: could not reach 127.0.0.1:${port} (ECONNREFUSED): set ${BASE_MIRROR_ENV}=127.0.0.1:${port}=<your mirror host>[/<path>] (a pull-through cache of 127.0.0.1:${port}; docs/guides/images.md "Mirrors")`,
            );
            return true;
        });
    });

    test("the Hub out of reach names its host and AGENTRL_HF_ENDPOINT", async () => {
        const port = await closedPort();
        const source = readPins("trainer-whitebox").sources.find((s) => s.resolve !== undefined);
        assert.ok(source, "the white-box trainer's seeds resolve on the Hub");
        await assert.rejects(resolveHubCommit(source, `http://127.0.0.1:${port}`), (e: unknown) => {
            assert.ok(e instanceof ImageStepError);
            assert.match(
                e.message,
                new RegExp(
                    `could not reach 127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\) for http://127\\.0\\.0\\.1:${port}/api/models/.*: set AGENTRL_HF_ENDPOINT to a Hub mirror`,
                ),
            );
            return true;
        });
    });
});

describe("the lock step for the attention kernel (kernels-community/flash-attn3)", () => {
    test("its commit is the newest of the kernel repository's v1 branch by the pins' day, and its digest is the sha256 of its files' sha256sum lines", async () => {
        const source = readPins("trainer-blackbox").sources.find((s) => s.fetchSet === "flash-attn3");
        assert.ok(source, "images/trainer-blackbox.pins.json pins the kernel TRL's AsyncGRPO loads");
        const [commit, later] = ["7".repeat(40), "8".repeat(40)];
        const variant = (source.scripts[0]?.file ?? "").replace(/^build\//, "");
        // STAND-IN kernel files (not flash-attn3), served as the Hub serves a kernel repository.
        const files: Record<string, string> = { "__init__.py": "# STAND-IN for flash-attn3 (images-offline.test.ts)\n", "metadata.json": "{}\n" };
        // A static server in its own process (scriptDigests runs the fetch synchronously, which would stall one in this process).
        const srv = path.join(tmp, "kernel-hub");
        const put = (rel: string, body: string) => {
            fs.mkdirSync(path.dirname(path.join(srv, rel)), { recursive: true });
            fs.writeFileSync(path.join(srv, rel), body);
        };
        put(
            "api/kernels/kernels-community/flash-attn3/commits/v1",
            JSON.stringify([
                { id: later, date: "2027-01-01T00:00:00Z" },
                { id: commit, date: "2026-11-30T00:00:00Z" },
            ]),
        );
        put(
            `api/kernels/kernels-community/flash-attn3/tree/${commit}/build/${variant}`,
            JSON.stringify(Object.keys(files).map((f) => ({ type: "file", path: `build/${variant}/${f}` }))),
        );
        for (const [f, body] of Object.entries(files)) put(`kernels/kernels-community/flash-attn3/resolve/${commit}/build/${variant}/${f}`, body);
        const port = await closedPort();
        const hub = spawn("python3", ["-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", srv], { stdio: "ignore" });
        const base = `http://127.0.0.1:${port}`;
        for (
            let i = 0;
            i < 100 &&
            !(await fetch(`${base}/`).then(
                (r) => r.ok,
                () => false,
            ));
            i++
        )
            await new Promise((r) => setTimeout(r, 100));
        const before = process.env.AGENTRL_FETCH_BASE_URL;
        try {
            assert.equal(await resolveHubCommit(source, base), commit);
            process.env.AGENTRL_FETCH_BASE_URL = base;
            const sha = (t: string) => createHash("sha256").update(t).digest("hex");
            const lines = Object.keys(files)
                .sort()
                .map((f) => `${sha(files[f] as string)}  ${f}\n`)
                .join("");
            assert.deepEqual(scriptDigests(REPO_ROOT, "flash-attn3", commit), { KERNEL_FLASH_ATTN3_REVISION: commit, KERNEL_FLASH_ATTN3_SHA256: sha(lines) });
        } finally {
            if (before === undefined) delete process.env.AGENTRL_FETCH_BASE_URL;
            else process.env.AGENTRL_FETCH_BASE_URL = before;
            hub.kill();
        }
    });
});

describe("a pull-through mirror for the base images", () => {
    test("the lock step asks the mirror and records the upstream name with the mirror's digest", async () => {
        const digest = `sha256:${"ab".repeat(32)}`;
        const seen: string[] = [];
        // A registry that serves one manifest, as a pull-through cache serves Docker Hub's (distribution's proxy mode).
        const mirror = http.createServer((req, res) => {
            seen.push(`${req.method} ${req.url}`);
            if (req.url === "/v2/dockerhub/library/debian/manifests/bookworm-slim") res.writeHead(200, { "docker-content-digest": digest }).end();
            else res.writeHead(404).end();
        });
        await new Promise<void>((r) => mirror.listen(0, "127.0.0.1", r));
        try {
            const host = `127.0.0.1:${(mirror.address() as AddressInfo).port}`;
            const root = pinsRootWithBase("mirror", "debian:bookworm-slim");
            const lock = await fillLock(["mtail"], { pinsRoot: root, root: REPO_ROOT, baseMirrors: parseBaseMirrors(`docker.io=${host}/dockerhub`) });
            assert.equal(lock.images.mtail.base, `debian:bookworm-slim@${digest}`);
            assert.deepEqual(seen, ["HEAD /v2/dockerhub/library/debian/manifests/bookworm-slim"]);
        } finally {
            mirror.close();
        }
    });

    test("the build pulls the base through the mirror by the lock's digest", () => {
        const mirrors = parseBaseMirrors("docker.io=mirror.example.com/dockerhub, ghcr.io=mirror.example.com:5000");
        const d = `@sha256:${"cd".repeat(32)}`;
        assert.equal(mirroredRef(`vllm/vllm-openai:v0.29.0${d}`, mirrors), `mirror.example.com/dockerhub/vllm/vllm-openai:v0.29.0${d}`);
        assert.equal(mirroredRef(`debian:bookworm-slim${d}`, mirrors), `mirror.example.com/dockerhub/library/debian:bookworm-slim${d}`);
        assert.equal(
            mirroredRef("ghcr.io/huggingface/openenv-opencode-sandbox:sha-86a180e", mirrors),
            "mirror.example.com:5000/huggingface/openenv-opencode-sandbox:sha-86a180e",
        );
        assert.equal(mirroredRef("quay.io/x/y:1", mirrors), "quay.io/x/y:1");
    });

    test("a malformed setting names every bad entry and the form", () => {
        assert.throws(
            () => parseBaseMirrors("docker.io,ghcr.io=https://mirror"),
            new RegExp(
                `^Error: ${BASE_MIRROR_ENV}: 'docker.io' is not <registry>=<mirror host>\\[/<path>\\] \\(e\\.g\\. docker\\.io=mirror\\.example\\.com/dockerhub\\); 'ghcr.io=https://mirror' is not`,
            ),
        );
    });
});

describe("the registry config: credential helpers and anonymous registries", () => {
    // A stand-in credential helper speaking docker-credential-helpers' protocol (no real helper installs here):
    // the server URL on stdin, {"ServerURL","Username","Secret"} on stdout, "credentials not found" for others.
    const bin = path.join(tmp, "bin");
    fs.mkdirSync(bin, { recursive: true });
    fs.writeFileSync(
        path.join(bin, "docker-credential-standin"),
        [
            "#!/bin/sh",
            '[ "$1" = get ] || exit 2',
            "read server",
            'case "$server" in',
            '  registry.example.com|https://index.docker.io/v1/) printf \'{"ServerURL":"%s","Username":"robot","Secret":"s3cret"}\' "$server" ;;',
            '  *) echo "credentials not found in native keychain"; exit 1 ;;',
            "esac",
        ].join("\n"),
        { mode: 0o755 },
    );
    const withPath = <T>(f: () => T): T => {
        const saved = process.env.PATH;
        process.env.PATH = `${bin}${path.delimiter}${saved ?? ""}`;
        try {
            return f();
        } finally {
            process.env.PATH = saved;
        }
    };

    test("credHelpers and credsStore are asked, in the Docker CLI's order after inline auths", () => {
        withPath(() => {
            const helpers = JSON.stringify({ credHelpers: { "registry.example.com": "standin" } });
            assert.deepEqual(credentialsFor(helpers, "registry.example.com"), { username: "robot", password: "s3cret" });
            assert.equal(credentialsFor(helpers, "other.example.com"), undefined, "a registry no helper names: anonymous");
            const store = JSON.stringify({ credsStore: "standin", auths: { "registry.example.com": {} } });
            assert.deepEqual(
                credentialsFor(store, "registry.example.com"),
                { username: "robot", password: "s3cret" },
                "docker login's empty auths entry defers to the store",
            );
            assert.deepEqual(credentialsFor(store, "docker.io"), { username: "robot", password: "s3cret" });
            assert.equal(credentialsFor(store, "quay.io"), undefined, "the store holds nothing for it: anonymous");
            const inline = JSON.stringify({ credsStore: "standin", auths: { "registry.example.com": { username: "u", password: "p" } } });
            assert.deepEqual(credentialsFor(inline, "registry.example.com"), { username: "u", password: "p" });
        });
    });

    test("an anonymous registry: an empty config holds no credentials and is not refused", () => {
        assert.equal(credentialsFor("{}", "registry.example.com"), undefined);
        assert.equal(credentialsFor(JSON.stringify({ auths: {} }), "127.0.0.1:5000"), undefined);
    });

    test("a helper that is not installed names it and the fix", () => {
        assert.throws(
            () =>
                credentialsFor(
                    JSON.stringify({ credHelpers: { "123.dkr.ecr.us-east-1.amazonaws.com": "ecr-login-missing" } }),
                    "123.dkr.ecr.us-east-1.amazonaws.com",
                ),
            (e: unknown) =>
                e instanceof RegistryError &&
                e.message ===
                    `123.dkr.ecr.us-east-1.amazonaws.com: the Docker config names the credential helper 'ecr-login-missing' and docker-credential-ecr-login-missing did not run (ENOENT): install it on PATH, or give the credentials inline in auths["123.dkr.ecr.us-east-1.amazonaws.com"]`,
        );
    });

    test("without the Pulumi CLI, reading the stack's registryAuth says to pass the Docker config instead", () => {
        const saved = process.env.PATH;
        process.env.PATH = bin; // holds no pulumi
        try {
            assert.throws(
                () => readRegistryAuth("dev"),
                (e: unknown) =>
                    e instanceof ImageStepError &&
                    /^stack dev: reading registryAuth needs the Pulumi CLI, which is not on PATH: pass --registry-auth-file ~\/\.docker\/config\.json/.test(
                        e.message,
                    ),
            );
        } finally {
            process.env.PATH = saved;
        }
    });
});
