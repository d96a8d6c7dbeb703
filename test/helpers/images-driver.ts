/**
 * Runs the image step's lock or build inside the test dockerd's network namespace (started under
 * `nsenter --net=...` by test/images-build.test.ts), where the test registry listens on loopback.
 * It serves the pinned scripts and the Hub's commit list from loopback itself (the build's RUN steps
 * reach it through `docker build --network host`, the daemon's namespace), then prints one JSON line:
 * { ok: true, result } or { ok: false, message }.
 *   node --import tsx test/helpers/images-driver.ts <request.json>
 */
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import { buildAndPush } from "../../scripts/lib/images/build";
import { fillLock } from "../../scripts/lib/images/lock-step";
import type { ImageName } from "../../scripts/lib/images/pins";

export interface DriverRequest {
    readonly mode: "lock" | "build";
    readonly images: readonly ImageName[];
    readonly pinsRoot: string;
    readonly root: string;
    readonly to: string;
    readonly dockerConfigJson: string;
    readonly replace?: Record<string, string>;
    /** Served at /<path>: the scripts as huggingface.co and raw.githubusercontent.com lay them out. */
    readonly scriptsDir: string;
    /** Served at /api/models/<repo>/commits/<branch>. */
    readonly hubCommits: Record<string, Array<{ id: string; date: string }>>;
}

async function main(): Promise<void> {
    const req = JSON.parse(fs.readFileSync(process.argv[2] as string, "utf8")) as DriverRequest;
    const server = http.createServer((q, r) => {
        const url = decodeURIComponent((q.url ?? "/").split("?")[0] as string);
        const hub = /^\/api\/models\/(.+)\/commits\/([^/]+)$/.exec(url);
        if (hub) {
            const commits = req.hubCommits[hub[1] as string];
            r.writeHead(commits ? 200 : 404, { "content-type": "application/json" }).end(JSON.stringify(commits ?? { error: "no such repo" }));
            return;
        }
        const file = path.join(req.scriptsDir, path.normalize(url));
        if (!file.startsWith(req.scriptsDir) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
            r.writeHead(404).end("not found");
            return;
        }
        r.writeHead(200).end(fs.readFileSync(file));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    process.env.AGENTRL_FETCH_BASE_URL = base;
    process.env.AGENTRL_HF_ENDPOINT = base;
    const log = (l: string) => process.stderr.write(`driver: ${l}\n`);
    try {
        const result =
            req.mode === "lock"
                ? await fillLock(req.images, { pinsRoot: req.pinsRoot, root: req.root, dockerConfigJson: req.dockerConfigJson, log })
                : await Promise.all(
                      req.images.map((image) =>
                          buildAndPush(image, {
                              root: req.root,
                              pinsRoot: req.pinsRoot,
                              to: req.to,
                              dockerConfigJson: req.dockerConfigJson,
                              replace: req.replace ?? {},
                              buildNetwork: "host",
                              log,
                          }),
                      ),
                  );
        process.stdout.write(`${JSON.stringify({ ok: true, result })}\n`);
    } catch (e) {
        process.stdout.write(`${JSON.stringify({ ok: false, message: (e as Error).message })}\n`);
    } finally {
        server.close();
    }
}

void main();
