/**
 * The images step's tag covers every byte that goes into an image: each file a Dockerfile COPYs or
 * ADDs (its contents and its mode, which COPY keeps), on continuation lines and under copied
 * folders too, the build ARGs and the base's digest. A change to any of them gives a new
 * `inputs-<hash>` tag, so the step never takes a registry's image of other inputs as this build.
 *
 * Runs `buildAndPush` itself on a temp copy of the sandbox image's files, against a STAND-IN
 * registry on loopback that holds every tag it is asked for (so the step stops at "already pushed"
 * and needs no dockerd): the tag it asks for is the tag the inputs hash names.
 * Run: node --import tsx --test test/tooling/images-inputs.test.ts
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { buildAndPush } from "../../scripts/lib/images/build";
import { REPO_ROOT } from "../../scripts/lib/images/pins";

const BASE_DIGEST = `sha256:${"1".repeat(64)}`;
const OTHER_BASE_DIGEST = `sha256:${"2".repeat(64)}`;

/** A STAND-IN registry: answers every manifest HEAD with a digest, so the step finds each tag "already pushed". */
let registry: http.Server;
let to = "";
before(async () => {
    registry = http.createServer((req, res) => {
        const digest = `sha256:${createHash("sha256")
            .update(req.url ?? "")
            .digest("hex")}`;
        res.writeHead(req.method === "HEAD" && /^\/v2\/.+\/manifests\//.test(req.url ?? "") ? 200 : 404, { "docker-content-digest": digest });
        res.end();
    });
    await new Promise<void>((resolve) => registry.listen(0, "127.0.0.1", resolve));
    to = `127.0.0.1:${(registry.address() as AddressInfo).port}/agent-rl`;
});
after(() => registry.close());

/** The sandbox image's Dockerfile and the files it copies, in a temp tree; its pins and a filled lock beside them. */
function sandboxTree(): { root: string; python: string } {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-inputs-"));
    const python = path.join(root, "python");
    for (const rel of [
        "Dockerfile",
        "image/install-layout.sh",
        "agent_rl_sandbox/runtime.py",
        "agent_rl_sandbox/forwarder.py",
        "agent_rl_sandbox/rollout_keys.py",
    ]) {
        fs.mkdirSync(path.dirname(path.join(python, rel)), { recursive: true });
        fs.copyFileSync(path.join(REPO_ROOT, "python", rel), path.join(python, rel));
        fs.chmodSync(path.join(python, rel), fs.statSync(path.join(REPO_ROOT, "python", rel)).mode & 0o777);
    }
    fs.mkdirSync(path.join(root, "images"));
    fs.copyFileSync(path.join(REPO_ROOT, "images", "sandbox.pins.json"), path.join(root, "images", "sandbox.pins.json"));
    setBase(root, BASE_DIGEST);
    return { root, python };
}

function setBase(root: string, digest: string): void {
    const pins = JSON.parse(fs.readFileSync(path.join(root, "images", "sandbox.pins.json"), "utf8")) as { base: { ref: string } };
    const lock = { images: { sandbox: { base: `${pins.base.ref}@${digest}`, args: {} } } };
    fs.writeFileSync(path.join(root, "images", "lock.json"), JSON.stringify(lock));
}

async function tagOf(root: string): Promise<string> {
    const built = await buildAndPush("sandbox", { root, to, dockerConfigJson: "{}" });
    assert.equal(built.pushed, false, "the stand-in registry holds every tag");
    return built.tag;
}

describe("the inputs hash names every byte of the image", () => {
    test("the same tree gives the same tag", async () => {
        const a = sandboxTree();
        const b = sandboxTree();
        assert.equal(await tagOf(a.root), await tagOf(b.root));
        assert.match(await tagOf(a.root), /\/sandbox:inputs-[0-9a-f]{24}$/);
    });

    test("a changed byte of a copied file (runtime.py) gives a new tag", async () => {
        const { root, python } = sandboxTree();
        const before = await tagOf(root);
        fs.appendFileSync(path.join(python, "agent_rl_sandbox/runtime.py"), "\n# one more line\n");
        assert.notEqual(await tagOf(root), before);
    });

    test("a copied file's mode, which COPY keeps in the image, gives a new tag", async () => {
        const { root, python } = sandboxTree();
        const before = await tagOf(root);
        fs.chmodSync(path.join(python, "agent_rl_sandbox/runtime.py"), 0o755);
        assert.notEqual(await tagOf(root), before);
    });

    test("a file named on a COPY's continuation line is hashed", async () => {
        const { root, python } = sandboxTree();
        const dockerfile = path.join(python, "Dockerfile");
        const text = fs.readFileSync(dockerfile, "utf8");
        const one = "COPY agent_rl_sandbox/runtime.py /tmp/runtime.py\nCOPY agent_rl_sandbox/forwarder.py /tmp/forwarder.py\n";
        assert.ok(text.includes(one));
        fs.writeFileSync(dockerfile, text.replace(one, "COPY agent_rl_sandbox/forwarder.py \\\n    agent_rl_sandbox/runtime.py /tmp/\n"));
        const before = await tagOf(root);
        fs.appendFileSync(path.join(python, "agent_rl_sandbox/runtime.py"), "\n# one more line\n");
        assert.notEqual(await tagOf(root), before);
    });

    test("a copied folder is hashed by every file under it, and an ADDed file as a COPYed one", async () => {
        const { root, python } = sandboxTree();
        const dockerfile = path.join(python, "Dockerfile");
        const text = fs.readFileSync(dockerfile, "utf8");
        fs.writeFileSync(
            dockerfile,
            text
                .replace("COPY agent_rl_sandbox/runtime.py /tmp/runtime.py\n", "COPY agent_rl_sandbox/ /tmp/pkg/\n")
                .replace("COPY image/install-layout.sh /tmp/install-layout.sh\n", "ADD image/install-layout.sh /tmp/install-layout.sh\n"),
        );
        const first = await tagOf(root);
        fs.appendFileSync(path.join(python, "agent_rl_sandbox/runtime.py"), "\n# one more line\n");
        const second = await tagOf(root);
        assert.notEqual(second, first);
        fs.appendFileSync(path.join(python, "image/install-layout.sh"), "\n# one more line\n");
        assert.notEqual(await tagOf(root), second);
    });

    test("an ADD from a URL is refused: its bytes are not inputs the step can hash", async () => {
        const { root, python } = sandboxTree();
        const dockerfile = path.join(python, "Dockerfile");
        fs.appendFileSync(dockerfile, "ADD https://example.com/x.tar.gz /tmp/x.tar.gz\n");
        await assert.rejects(buildAndPush("sandbox", { root, to, dockerConfigJson: "{}" }), /ADD https:\/\/example\.com\/x\.tar\.gz.*not hashed/);
    });

    test("the base's digest gives a new tag", async () => {
        const { root } = sandboxTree();
        const before = await tagOf(root);
        setBase(root, OTHER_BASE_DIGEST);
        assert.notEqual(await tagOf(root), before);
    });
});
