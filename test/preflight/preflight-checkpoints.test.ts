/**
 * The preflight's checkpoint-volume checks, without a target: on Kubernetes the kept claim against
 * training.checkpoints.size (never shrinks, keeps its class, grows only where its StorageClass allows
 * volume expansion) and the checkpoint rule; on Docker the free space of dataDir's file system
 * against what one run writes. Every message tested.
 * Run: node --import tsx --test test/preflight/preflight-checkpoints.test.ts
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type CheckpointNeed, checkpointNeed, describeNeed } from "../../components/config/checkpoints";
import { deepMerge, type PlatformConfig } from "../../components/config";
import { type PlatformPlan, resolvePlatform } from "../../components/platform";
import { checkCheckpointSpace, checkDocker, type DockerFacts } from "../../components/preflight/docker";
import { type ClaimFacts, checkCheckpointVolume, checkKubernetes, claimFacts, type KubernetesFacts } from "../../components/preflight/kubernetes";
import type { Finding } from "../../components/preflight/report";
import { parseWithTestImages } from "../helpers/config";

const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const config = (target: Record<string, unknown>, over: Record<string, unknown> = {}): PlatformConfig =>
    parseWithTestImages(deepMerge({ recipe: "mbpp-whitebox", runId: "pf-001", target }, over), target.kind === "docker" ? "pfd" : "pf");
const planOf = (c: PlatformConfig): PlatformPlan => resolvePlatform(c, { hfToken: true });
const k8s = (over: Record<string, unknown> = {}, target: Record<string, unknown> = {}) =>
    planOf(config({ kind: "kubernetes", context: "ctx", ...target }, over));
const docker = (over: Record<string, unknown> = {}) => planOf(config({ kind: "docker" }, over));

function assertFinding(f: Finding | undefined, status: Finding["status"], found: RegExp, fix?: RegExp): void {
    assert.ok(f, "a finding");
    assert.equal(f.status, status, `${f.check}: ${f.status}: ${f.found} / ${f.fix}`);
    assert.match(f.found, found);
    if (fix) assert.match(f.fix, fix);
    if (status !== "ok") assert.ok(f.fix.length > 0, "a warning or failure says what to do");
}

const GiB = 1024 ** 3;
/** The rule's one-run need of the plan's config, as the messages show it. */
const needOf = (p: PlatformPlan): CheckpointNeed => checkpointNeed(p.config)!;
const ruleFor = (p: PlatformPlan) => literal(`(one run: ${needOf(p).runSize} = ${describeNeed(needOf(p))})`);

/** A checkpoint claim as the API server returns it. */
const pvc = (o: { size?: string; capacity?: string | null; sc?: string; labels?: Record<string, string>; conditions?: string[]; phase?: string } = {}) =>
    claimFacts({
        metadata: { name: "checkpoints", labels: o.labels ?? { "app.kubernetes.io/part-of": "agent-rl-infra" } },
        spec: { resources: { requests: { storage: o.size ?? "100Gi" } }, ...(o.sc === "" ? {} : { storageClassName: o.sc ?? "standard" }) },
        status: {
            phase: o.phase ?? "Bound",
            ...(o.capacity === null ? {} : { capacity: { storage: o.capacity ?? o.size ?? "100Gi" } }),
            conditions: (o.conditions ?? []).map((type) => ({ type, status: "True" })),
        },
    });
const sc = (name: string, allowVolumeExpansion?: boolean) => ({
    metadata: { name, annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
    provisioner: "ebs.csi.aws.com",
    reclaimPolicy: "Retain",
    ...(allowVolumeExpansion !== undefined ? { allowVolumeExpansion } : {}),
});

describe("Kubernetes: Checkpoint volume", () => {
    const plan = k8s();
    test("no checkpoints: no finding", () => {
        assert.equal(checkCheckpointVolume(k8s({ training: { checkpoints: { enabled: false } } }), undefined, []), undefined);
    });
    test("a claim as the API server returns it: requested and actual size, class, phase, true conditions, part-of", () => {
        assert.deepEqual(pvc({ size: "100Gi", capacity: "120Gi", conditions: ["FileSystemResizePending"] }), {
            requested: "100Gi",
            capacity: "120Gi",
            storageClassName: "standard",
            phase: "Bound",
            conditions: ["FileSystemResizePending"],
            partOf: "agent-rl-infra",
        } satisfies ClaimFacts);
    });
    test("no claim yet: ok, the size up creates and how many runs of the model it holds by the rule", () => {
        const runs = Math.floor((100 * GiB) / needOf(plan).runBytes);
        assertFinding(
            checkCheckpointVolume(plan, undefined, [sc("standard")]),
            "ok",
            new RegExp(
                `^no claim arl-pf-training/checkpoints yet: up creates it at 100Gi \\(training\\.checkpoints\\.size\\); 100 GiB holds ${runs} runs of Qwen/Qwen3-1\\.7B by the checkpoint rule ${ruleFor(plan)}$`,
            ),
        );
    });
    test("the claim there, same size: kept and reused", () => {
        assertFinding(
            checkCheckpointVolume(plan, pvc(), [sc("standard")]),
            "ok",
            /^the claim arl-pf-training\/checkpoints \(100Gi, class standard, Bound\) is kept and reused; 100 GiB holds \d+ runs/,
        );
    });
    test("a smaller size: fails, Kubernetes never shrinks a claim", () => {
        assertFinding(
            checkCheckpointVolume(plan, pvc({ size: "200Gi" }), [sc("standard", true)]),
            "fail",
            /^training\.checkpoints\.size 100Gi is smaller than the claim arl-pf-training\/checkpoints \(200Gi, class standard, Bound\): Kubernetes never shrinks a claim; 200 GiB holds \d+ runs/,
            /^set training\.checkpoints\.size to 200Gi or more$/,
        );
    });
    test("a larger size: ok where the claim's StorageClass allows volume expansion, fails where it does not", () => {
        const small = pvc({ size: "50Gi" });
        assertFinding(
            checkCheckpointVolume(plan, small, [sc("standard", true)]),
            "ok",
            /^the claim arl-pf-training\/checkpoints \(50Gi, class standard, Bound\) is kept and reused; up grows it to 100Gi \(StorageClass standard allows volume expansion\); 100 GiB holds/,
        );
        for (const classes of [[sc("standard", false)], [sc("standard")]])
            assertFinding(
                checkCheckpointVolume(plan, small, classes),
                "fail",
                /^training\.checkpoints\.size 100Gi grows the claim arl-pf-training\/checkpoints \(50Gi, class standard, Bound\), but StorageClass standard does not allow volume expansion: the API server refuses the resize and the up fails; 50 GiB holds \d+ runs/,
                /^keep training\.checkpoints\.size at 50Gi, or, if its CSI driver \(ebs\.csi\.aws\.com\) can expand volumes: kubectl patch storageclass standard -p '\{"allowVolumeExpansion":true\}'$/,
            );
    });
    test("a larger size for a claim whose class is gone, or that has none: fails", () => {
        assertFinding(
            checkCheckpointVolume(plan, pvc({ size: "50Gi", sc: "old" }), [sc("standard", true)]),
            "fail",
            /but its StorageClass old no longer exists, and a claim without one cannot be expanded/,
            /^keep training\.checkpoints\.size at 50Gi$/,
        );
        assertFinding(
            checkCheckpointVolume(plan, pvc({ size: "50Gi", sc: "" }), [sc("standard", true)]),
            "fail",
            /\(50Gi, class none, Bound\), but a claim without a class cannot be expanded/,
        );
    });
    test("target.storageClassName other than the claim's class: fails, a claim's class cannot change", () => {
        const named = k8s({}, { storageClassName: "fast" });
        assertFinding(
            checkCheckpointVolume(named, pvc(), [sc("standard"), sc("fast")]),
            "fail",
            /^the claim arl-pf-training\/checkpoints \(100Gi, class standard, Bound\) has another class than target\.storageClassName fast, and a claim's class cannot change/,
            /^set target\.storageClassName to standard; to move the checkpoints, copy them out \(npm run checkpoints\), pulumi destroy \(which keeps the claim\), kubectl -n arl-pf-training delete pvc checkpoints, then up$/,
        );
    });
    test("a resize not finished: a warning", () => {
        assertFinding(
            checkCheckpointVolume(plan, pvc({ size: "100Gi", capacity: "50Gi", conditions: ["FileSystemResizePending"] }), [sc("standard", true)]),
            "warn",
            /^the claim arl-pf-training\/checkpoints \(100Gi, class standard, Bound\) has 50Gi of the 100Gi it asks \(FileSystemResizePending\); 50 GiB holds/,
            /^wait for the resize \(kubectl -n arl-pf-training describe pvc checkpoints\)/,
        );
        assertFinding(
            checkCheckpointVolume(plan, pvc({ capacity: null, phase: "Pending" }), [sc("standard")]),
            "ok",
            /\(100Gi, class standard, Pending\) is kept and reused/,
        );
    });
    test("a claim this project did not make (no part-of label): a warning, up adopts it with what it holds", () => {
        assertFinding(
            checkCheckpointVolume(plan, pvc({ labels: {} }), [sc("standard")]),
            "warn",
            /exists without the app\.kubernetes\.io\/part-of=agent-rl-infra label, so this project did not make it: up adopts it \(patchForce\) with what it holds; 100 GiB holds/,
            /^if it is not this stack's checkpoints, move it aside first/,
        );
    });
    test('a program that writes no checkpoint (opencode\'s save_strategy "no"): said, not a count of runs', () => {
        const opencode = k8s({ recipe: "opencode-blackbox", sandboxes: { image: "registry.test/s:1" } });
        assert.equal(needOf(opencode).runBytes, 0);
        assertFinding(
            checkCheckpointVolume(opencode, undefined, []),
            "ok",
            /; Qwen\/Qwen3-8B's program writes nothing there by the checkpoint rule \(it hard-codes save_strategy="no"/,
        );
    });
    test("a model the rule has no parameter count for: said, with the field to set", () => {
        const custom = k8s({ model: { name: "acme/custom-7b" } });
        assertFinding(
            checkCheckpointVolume(custom, undefined, []),
            "ok",
            /the checkpoint rule cannot size a run: no parameter count for acme\/custom-7b \(set training\.checkpoints\.parameters\)$/,
        );
    });
    test("wired into checkKubernetes: after the StorageClass; a claim that cannot be read is a warning", () => {
        const version = { gitVersion: "v1.36.3", major: "1", minor: "36" };
        const none = { ok: true as const, value: [] as any[] };
        const facts: KubernetesFacts = {
            context: "ctx",
            kubeconfig: "/k",
            contexts: ["ctx"],
            version: { ok: true, value: version },
            nodes: none,
            storageClasses: { ok: true, value: [sc("standard", false)] },
            priorityClasses: none,
            runtimeClasses: none,
            crds: none,
            sandboxControllers: none,
            jobSetControllers: none,
            daemonSets: none,
            dnsPods: { ok: true, value: 2 },
            namespaces: { ok: true, value: {} },
            checkpointClaim: { ok: true, value: pvc({ size: "50Gi" }) },
        };
        const checks = checkKubernetes(plan, facts).map((f) => f.check);
        assert.equal(checks.indexOf("Checkpoint volume"), checks.indexOf("Checkpoint reclaim policy") + 1);
        assert.equal(checkKubernetes(plan, facts).find((f) => f.check === "Checkpoint volume")?.status, "fail");
        const forbidden = checkKubernetes(plan, {
            ...facts,
            checkpointClaim: { ok: false, error: 'persistentvolumeclaims "checkpoints" is forbidden', forbidden: true },
        });
        assertFinding(
            forbidden.find((f) => f.check === "Checkpoint volume"),
            "warn",
            /could not read persistentvolumeclaims: persistentvolumeclaims "checkpoints" is forbidden \(unchecked\)/,
            /credentials that may list persistentvolumeclaims/,
        );
    });
});

describe("Docker: Checkpoint space", () => {
    const plan = docker();
    const need = needOf(plan);
    const rule = literal(`one run of Qwen/Qwen3-1.7B writes ${need.runSize} by the checkpoint rule (${describeNeed(need)})`);
    test("no checkpoints: no finding", () => {
        assert.equal(checkCheckpointSpace(docker({ training: { checkpoints: { enabled: false } } }), { checkedPath: "/srv", freeBytes: 0 }), undefined);
    });
    test("enough free space for one run or more: ok, how many", () => {
        const runs = Math.floor((100 * GiB) / need.runBytes);
        assertFinding(
            checkCheckpointSpace(plan, { checkedPath: "/srv/agent-rl", freeBytes: 100 * GiB }),
            "ok",
            new RegExp(`^100 GiB free under /srv/agent-rl holds ${runs} runs: ${rule}$`),
        );
    });
    test("less than one run writes: fails, the saves would fail when the disk fills", () => {
        assertFinding(
            checkCheckpointSpace(plan, { checkedPath: "/srv", freeBytes: 2 * GiB }),
            "fail",
            new RegExp(`^2 GiB free under /srv/agent-rl \\(measured at /srv\\), less than ${rule}: the run's checkpoint saves fail when the disk fills$`),
            /^free \d+(\.\d)? GiB or more there \(old runs' checkpoints: npm run checkpoints -- pfd --prune <runId>\), or move target\.dataDir to a larger disk$/,
        );
    });
    test("a remote daemon: unchecked, a warning naming the command and the need", () => {
        assertFinding(
            checkCheckpointSpace(plan, { unchecked: "ssh://gpu-host is not a local socket" }),
            "warn",
            new RegExp(`^/srv/agent-rl: unchecked \\(ssh://gpu-host is not a local socket\\); ${rule}$`),
            new RegExp(`^check on the host: df -h /srv/agent-rl \\(it needs ${need.runSize} free for one run; training\\.checkpoints\\.size is 100Gi\\)$`),
        );
    });
    test("a model the rule has no parameter count for: a warning naming the field", () => {
        assertFinding(
            checkCheckpointSpace(docker({ model: { name: "acme/custom-7b" } }), { checkedPath: "/srv/agent-rl", freeBytes: 100 * GiB }),
            "warn",
            /^the checkpoint rule cannot size a run: no parameter count for acme\/custom-7b; 100 GiB free under \/srv\/agent-rl$/,
            /^set training\.checkpoints\.parameters/,
        );
    });
    test("wired into checkDocker, after the free space of dataDir", () => {
        const f = checkDocker(plan, {
            host: "unix:///x.sock",
            version: { ok: true, value: { version: "28.2.2", apiVersion: "1.50" } },
            info: { ok: false, error: "x" },
            containers: { ok: true, value: [] },
            disk: { checkedPath: "/srv/agent-rl", freeBytes: 2 * GiB },
        } satisfies DockerFacts);
        const checks = f.map((x) => x.check);
        assert.equal(checks.indexOf("Checkpoint space"), checks.indexOf("Free space in dataDir") + 1);
        assert.equal(f.find((x) => x.check === "Checkpoint space")?.status, "fail");
    });
});
