/**
 * Runs the image step's lock or build inside the test dockerd's network namespace (started under
 * `nsenter --net=...` by test/tooling/images-build.test.ts), where the test registry and the stand-in
 * base mirror (AGENTRL_BASE_REGISTRY_MIRRORS, from the test) listen on loopback.
 * It serves, from loopback, everything the builds fetch (test/images/serve.py over the test's
 * directory; the build's RUN steps reach it through `docker build --network host`, the daemon's
 * namespace), and points the image step's source overrides at it (SOURCE_OVERRIDES,
 * scripts/lib/images/build.ts): the pinned scripts, the Hub's commit lists (laid out by the test under
 * /api) and the stand-in kernel's tree listing and files where huggingface.co and
 * raw.githubusercontent.com serve them, the stand-in OpenEnv repository (git's smart HTTP, as GitHub
 * serves it) at /huggingface/OpenEnv.git, the PyPI subset at /simple and the Debian subset at
 * /debian. Every line docker build and docker push print goes to <request.json>.progress as it
 * comes (the test's sign that the build goes on). Then it prints one JSON line:
 * { ok: true, result } or { ok: false, message }.
 *   node --import tsx test/helpers/images-driver.ts <request.json>
 */
import * as fs from "node:fs";
import { spawn } from "node:child_process";
import * as path from "node:path";
import { buildAndPush } from "../../scripts/lib/images/build";
import { fillLock } from "../../scripts/lib/images/lock-step";
import type { ImageName } from "../../scripts/lib/images/pins";
import { scaledCount } from "./waits";

export interface DriverRequest {
    readonly mode: "lock" | "build";
    readonly images: readonly ImageName[];
    readonly pinsRoot: string;
    readonly root: string;
    readonly to: string;
    readonly dockerConfigJson: string;
    /** Per image: context files replaced by the test's stand-ins (BuildOptions.replace). */
    readonly replace?: Partial<Record<ImageName, Record<string, string>>>;
    /** Served at /<path>: the scripts as huggingface.co and raw.githubusercontent.com lay them out, the Hub's commit lists, and the mirrors above. */
    readonly scriptsDir: string;
}

/** The port of the script server in the daemon's namespace (the driver's own: the test's page commands have theirs on another). */
const SCRIPTS_PORT = 8765;

async function main(): Promise<void> {
    const req = JSON.parse(fs.readFileSync(process.argv[2] as string, "utf8")) as DriverRequest;
    // A server of its own process: the lock step blocks this one (spawnSync) while the scripts are
    // fetched from it.
    const server = spawn("python3", [path.join(__dirname, "..", "images", "serve.py"), String(SCRIPTS_PORT), req.scriptsDir], {
        stdio: ["ignore", "ignore", "inherit"],
    });
    const progressFile = fs.openSync(`${process.argv[2]}.progress`, "a");
    const progress = (l: string) => fs.writeSync(progressFile, `${l}\n`);
    const base = `http://127.0.0.1:${SCRIPTS_PORT}`;
    let up = false;
    for (let i = 0; i < scaledCount(100) && !up; i++) {
        up = await fetch(`${base}/`, { signal: AbortSignal.timeout(2_000) }).then(
            () => true,
            () => false,
        );
        if (!up) await new Promise((r) => setTimeout(r, 200));
    }
    process.env.AGENTRL_FETCH_BASE_URL = base;
    process.env.AGENTRL_HF_ENDPOINT = base;
    process.env.AGENTRL_OPENENV_GIT_URL = `${base}/huggingface/OpenEnv.git`;
    process.env.AGENTRL_PIP_INDEX_URL = `${base}/simple`;
    process.env.AGENTRL_DEBIAN_MIRROR = base;
    const log = (l: string) => process.stderr.write(`driver: ${l}\n`);
    try {
        if (!up) throw new Error(`the script server did not answer on ${base}`);
        let result: unknown;
        if (req.mode === "lock") result = await fillLock(req.images, { pinsRoot: req.pinsRoot, root: req.root, dockerConfigJson: req.dockerConfigJson, log });
        else {
            // One after the other, in the order asked (as npm run images builds them).
            const built = [];
            for (const image of req.images)
                built.push(
                    await buildAndPush(image, {
                        root: req.root,
                        pinsRoot: req.pinsRoot,
                        to: req.to,
                        dockerConfigJson: req.dockerConfigJson,
                        replace: req.replace?.[image] ?? {},
                        buildNetwork: "host",
                        log,
                        progress,
                    }),
                );
            result = built;
        }
        process.stdout.write(`${JSON.stringify({ ok: true, result })}\n`);
    } catch (e) {
        process.stdout.write(`${JSON.stringify({ ok: false, message: (e as Error).message })}\n`);
    } finally {
        server.kill("SIGKILL");
        fs.closeSync(progressFile);
    }
}

void main();
