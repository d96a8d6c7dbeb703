// The shared test helpers themselves: manifests() takes apiVersion/kind from the type token and
// refuses a resource whose own inputs disagree, and the secret helpers read the mock monitor's
// wrapper; runWatched kills a silent process group and names it. Run: node --import tsx --test test/tooling/test-helpers.test.ts
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { before, describe, test } from "node:test";
import * as pulumi from "@pulumi/pulumi";
import { loadManifestSchemas, validateManifestStrict } from "../helpers/k8s-schema";
import { FREE_PORT_RANGE, freePort, freePortIn } from "../helpers/http";
import { manifests } from "../helpers/manifests";
import { whileNameLookupFails } from "../helpers/name-lookup";
import { runWatched } from "../helpers/processes";
import { scaled } from "../helpers/waits";
import type { RecordedResource } from "../helpers/mock";
import { isSecret, sentAsSecret, unwrapSecrets } from "../helpers/secrets";

const secret = (value: unknown) => ({ [pulumi.runtime.specialSigKey]: pulumi.runtime.specialSecretSig, value });
const netpol = (inputs: Record<string, any>): RecordedResource => ({
    type: "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    name: "np",
    custom: true,
    inputs: { metadata: { name: "np" }, spec: { podSelector: {} }, ...inputs },
});

before(loadManifestSchemas);

describe("manifests()", () => {
    test("a grouped kind gets its group once (networking.k8s.io/v1, not networking.k8s.io.k8s.io/v1)", () => {
        const [o] = manifests([netpol({})]);
        assert.equal(o.apiVersion, "networking.k8s.io/v1");
        assert.equal(o.kind, "NetworkPolicy");
        assert.deepEqual(validateManifestStrict(o), []);
    });

    test("core and named groups: v1, apps/v1, batch/v1, policy/v1, rbac.authorization.k8s.io/v1", () => {
        const rs = ["core/v1:Service", "apps/v1:Deployment", "batch/v1:Job", "policy/v1:PodDisruptionBudget", "rbac.authorization.k8s.io/v1:Role"].map(
            (t): RecordedResource => ({ type: `kubernetes:${t}`, name: t, custom: true, inputs: {} }),
        );
        assert.deepEqual(
            manifests(rs).map((o) => o.apiVersion),
            ["v1", "apps/v1", "batch/v1", "policy/v1", "rbac.authorization.k8s.io/v1"],
        );
    });

    test("an apiVersion input that disagrees with the type token fails, naming both", () => {
        assert.throws(
            () => manifests([netpol({ apiVersion: "networking.k8s.io.k8s.io/v1" })]),
            /input apiVersion "networking\.k8s\.io\.k8s\.io\/v1" disagrees with the type token's "networking\.k8s\.io\/v1"/,
        );
        assert.throws(() => manifests([netpol({ kind: "Ingress" })]), /input kind "Ingress" disagrees/);
    });

    test("a wrong apiVersion has no schema: validateManifestStrict reports it", () => {
        const [problem] = validateManifestStrict({ ...manifests([netpol({})])[0], apiVersion: "networking.k8s.io.k8s.io/v1" });
        assert.match(problem, /no schema known/);
    });

    test("skips components and other providers; unwraps secrets", () => {
        const rs: RecordedResource[] = [
            { type: "agentrl:training:TrainingNode", name: "t", custom: false, inputs: {} },
            { type: "docker:index/container:Container", name: "c", custom: true, inputs: {} },
            { type: "kubernetes:core/v1:Secret", name: "s", custom: true, inputs: { stringData: secret({ k: "v" }) } },
        ];
        assert.deepEqual(manifests(rs), [{ apiVersion: "v1", kind: "Secret", stringData: { k: "v" } }]);
    });
});

describe("secrets", () => {
    test("isSecret knows the mock monitor's wrapper and nothing else", () => {
        assert.equal(isSecret(secret("x")), true);
        assert.equal(isSecret({ value: "x" }), false);
        assert.equal(isSecret(null), false);
        assert.equal(isSecret("x"), false);
    });

    test("unwrapSecrets replaces every wrapper, nested or in a list", () => {
        assert.deepEqual(unwrapSecrets({ a: secret([secret("x"), "y"]), b: 1 }), { a: ["x", "y"], b: 1 });
    });

    test("sentAsSecret: the value or an object on the way to it is a secret", () => {
        const inputs = { stringData: secret({ "keys.conf": "k" }), data: { plain: "p" } };
        assert.equal(sentAsSecret(inputs, ["stringData", "keys.conf"]), true);
        assert.equal(sentAsSecret(inputs, ["data", "plain"]), false);
    });
});

describe("runWatched", () => {
    test("a run that keeps printing, or keeps growing a watched file, ends normally with its output and status", async () => {
        const log = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-watched-")), "log");
        // Silent on stdout for twice the (load-scaled) stall bound, so without the watched file it would be
        // killed; the log grows every 0.2 s, 15 times inside the 3 s bound, so a busy CPU that delays a few
        // writes still leaves progress in every window (CI saw a 1 s bound with 0.5 s writes killed).
        const writes = Math.ceil((2 * scaled(3000)) / 200);
        const r = await runWatched("a growing log", "sh", ["-c", `for i in $(seq ${writes}); do echo $i >>${log}; sleep 0.2; done; echo done; exit 3`], {
            stallMs: 3000,
            budgetMs: 120_000,
            watch: [log],
        });
        assert.deepEqual([r.status, r.stdout], [3, "done\n"]);
        fs.rmSync(path.dirname(log), { recursive: true });
    });

    test("a run that goes silent is killed, with its children, and fails naming it and its last output", async () => {
        const pidFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-watched-")), "pid");
        const t0 = Date.now();
        await assert.rejects(
            runWatched("the stuck step", "sh", ["-c", `echo fetching; sleep 600 & echo $! >${pidFile}; wait`], { stallMs: 3000, budgetMs: 60_000 }), // 3 s: time for sh to print its line on a busy CPU
            (e: Error) => {
                assert.match(e.message, /^the stuck step: no progress for \d+ s \(bound \d+ ms: no output\); killed\. Its last output:\nfetching$/);
                return true;
            },
        );
        assert.ok(Date.now() - t0 < scaled(30_000), "killed long before the child's 600 s"); // the stall bound is scaled, so is this
        // The backgrounded child (its process group) is gone too: no process, or a zombie its new parent has not reaped yet.
        const stat = `/proc/${Number(fs.readFileSync(pidFile, "utf8"))}/stat`;
        if (fs.existsSync(stat)) assert.match(fs.readFileSync(stat, "utf8"), /^\d+ \(sleep\) Z /);
        fs.rmSync(path.dirname(pidFile), { recursive: true });
    });
});

describe("freePort", () => {
    test("ports below the kernel's ephemeral range, each handed out once, each one the caller can listen on", async () => {
        const ephemeralFrom = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
        assert.ok(FREE_PORT_RANGE.to <= ephemeralFrom, `range ends at ${FREE_PORT_RANGE.to}, the ephemeral range starts at ${ephemeralFrom}`);
        const ports: number[] = [];
        for (let i = 0; i < 40; i++) ports.push(await freePort());
        assert.equal(new Set(ports).size, ports.length);
        for (const p of ports) assert.ok(p >= FREE_PORT_RANGE.from && p < FREE_PORT_RANGE.to, `${p} outside the range`);
        const srv = net.createServer();
        await new Promise<void>((ok) => srv.listen(ports[0], "127.0.0.1", () => ok()));
        await new Promise<void>((ok) => srv.close(() => ok()));
    });

    test("skips a held port and one already handed out, then fails naming the range", async () => {
        // Three ports below FREE_PORT_RANGE (so freePort's own picks cannot interfere): the first free of them, the middle one held.
        const from = FREE_PORT_RANGE.from - 40 + Math.floor(Math.random() * 30);
        const held = net.createServer();
        await new Promise<void>((ok, no) => held.once("error", no).listen(from + 1, "127.0.0.1", () => ok()));
        try {
            assert.equal(await freePortIn(from, from + 3, 0), from);
            assert.equal(await freePortIn(from, from + 3, 0), from + 2);
            await assert.rejects(freePortIn(from, from + 3, 0), new RegExp(`^Error: freePort: no free TCP port from ${from} to ${from + 2} on this machine$`));
        } finally {
            await new Promise<void>((ok) => held.close(() => ok()));
        }
    });
});

describe("whileNameLookupFails", () => {
    test("runs again while the output shows a failed name lookup and returns the first result without one; other failures are returned", async () => {
        const outs = [
            "urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>",
            "socket.gaierror: [Errno -2] Name or service not known",
            "TimeoutError: timed out",
        ];
        let runs = 0;
        const r = await whileNameLookupFails("a pod's GET", async () => ({ code: 1, out: outs[runs++]! }));
        assert.deepEqual([runs, r.out], [3, "TimeoutError: timed out"]);
    });
});
