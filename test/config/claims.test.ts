// The stack-wide claims against what the last up made (issue 13 point 2): a class change or a
// shrink of an existing claim is refused at the config edge, before any resource registers.
// The rule (components/config/claims.ts) with every message, then the program under mocks
// reading its own previous outputs the way it does under the engine (a StackReference to itself).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { claimChangeProblems, deepMerge, platformNames, type ClaimRecords, type PlatformConfig } from "../../components/config";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { readStackFile, REPO_ROOT } from "../../scripts/lib/plan";
import { parseWithTestImages } from "../helpers/config";

const base = {
    recipe: "opencode-blackbox",
    runId: "stg-001",
    target: { kind: "kubernetes", context: "test", namespacePrefix: "arl-staging", storageClassName: "fast-ssd" },
};

function config(over: Record<string, unknown> = {}): PlatformConfig {
    return parseWithTestImages(deepMerge(base, over), "staging");
}

/** What the last up recorded for `c`: its claims at their configured sizes and class. */
function recorded(c: PlatformConfig, over: Partial<Record<keyof ClaimRecords, Partial<ClaimRecords["checkpoints"]>>> = {}): ClaimRecords {
    const n = platformNames(c);
    const claim = (role: keyof ClaimRecords) => ({
        namespace: n.namespaces.training,
        name: n.training[role],
        size: c.training[role].size,
        storageClassName: "fast-ssd",
        ...over[role],
    });
    return { modelCache: claim("modelCache"), checkpoints: claim("checkpoints") };
}

const problems = (previous: ClaimRecords | undefined, c: PlatformConfig) => claimChangeProblems(previous, c, platformNames(c));

describe("claims: what Kubernetes cannot change is refused at the config edge", () => {
    it("nothing recorded (first up, after destroy): nothing to refuse", () => {
        assert.deepEqual(problems(undefined, config()), []);
    });

    it("the same claims again, or larger: no problem (growing is the StorageClass's business)", () => {
        const c = config();
        assert.deepEqual(problems(recorded(c), c), []);
        const grown = config({ training: { checkpoints: { size: "2Ti" }, modelCache: { size: "1Ti" } } });
        assert.deepEqual(problems(recorded(c), grown), []);
    });

    it("a smaller checkpoints size names the field, both sizes, the claim and the fix", () => {
        const c = config({ training: { checkpoints: { size: "500Gi" } } });
        const prev = recorded(c, { checkpoints: { size: "1Ti" } });
        assert.deepEqual(problems(prev, c), [
            "training.checkpoints.size: 500Gi is smaller than the 1Ti of the claim arl-staging-training/" +
                `${prev.checkpoints!.name} this stack made; Kubernetes never shrinks a claim: keep 1Ti or more ` +
                "(growing works where the StorageClass allows volume expansion)",
        ]);
    });

    it("a smaller model cache is refused too, compared by value (1024Mi is not smaller than 1Gi)", () => {
        const c = config({ training: { modelCache: { size: "100Gi" } } });
        assert.match(problems(recorded(c, { modelCache: { size: "200Gi" } }), c).join("\n"), /^training\.modelCache\.size: 100Gi is smaller than the 200Gi/);
        const same = config({ training: { modelCache: { size: "1024Mi" } } });
        assert.deepEqual(problems(recorded(same, { modelCache: { size: "1Gi" } }), same), []);
    });

    it("a changed class on the checkpoints says how to really move them (destroy keeps the claim; delete it by hand)", () => {
        const c = config({ target: { storageClassName: "standard" }, training: { modelCache: { enabled: false, size: "200Gi" } } });
        const [p, ...rest] = problems(recorded(c), c);
        assert.deepEqual(rest, []);
        assert.equal(
            p,
            `target.storageClassName: 'standard' differs from 'fast-ssd', the class of the checkpoints claim arl-staging-training/${platformNames(c).training.checkpoints} ` +
                "this stack made; Kubernetes cannot change a claim's class: keep 'fast-ssd', or the checkpoints outlive the stack by design: to move them to 'standard', " +
                "copy out what you keep, then `pulumi destroy` (which keeps the claim), " +
                `\`kubectl delete pvc -n arl-staging-training ${platformNames(c).training.checkpoints}\`, and \`pulumi up\` with the new class`,
        );
    });

    it("a changed class on the model cache says to disable it for one up", () => {
        const c = config({ target: { storageClassName: "standard" }, training: { checkpoints: { enabled: false, size: "100Gi" } } });
        const found = problems(recorded(c), c);
        assert.equal(found.length, 1);
        assert.match(
            found[0],
            /the class of the modelCache claim .* set training\.modelCache\.enabled to false for one up .* enable it again with the new class$/,
        );
    });

    it("no class configured (the cluster default): the claim keeps its class, nothing to refuse", () => {
        const c = parseWithTestImages({ ...base, target: { ...base.target, storageClassName: undefined } }, "staging");
        assert.equal(c.target.kind === "kubernetes" && c.target.storageClassName, undefined);
        assert.deepEqual(problems(recorded(c), c), []);
    });

    it("a claim of another name or namespace (a new namespace prefix) starts empty: not compared", () => {
        const c = config({ target: { namespacePrefix: "arl-other" }, training: { checkpoints: { size: "1Gi" } } });
        const prev = recorded(config(), { checkpoints: { size: "1Ti" } });
        assert.deepEqual(problems(prev, c), []);
    });

    it("a disabled volume is not compared; every problem is reported at once", () => {
        const off = config({ training: { checkpoints: { enabled: false, size: "1Gi" } } });
        assert.deepEqual(problems(recorded(off, { checkpoints: { size: "1Ti" } }), off), []);
        const both = config({ target: { storageClassName: "standard" }, training: { checkpoints: { size: "1Gi" }, modelCache: { size: "1Gi" } } });
        assert.equal(problems(recorded(both, { checkpoints: { size: "1Ti" }, modelCache: { size: "1Ti" } }), both).length, 4);
    });
});

describe("claims: the program reads its own last outputs before registering anything", () => {
    const program = () => require(path.join(REPO_ROOT, "index.ts")) as () => Promise<Record<string, unknown>>;
    const staging = () => {
        const s = readStackFile("staging");
        return { stack: s.stack, config: s.config, secretKeys: s.secretKeys };
    };

    it("an up records its claims as a stack output, with the class and size", async () => {
        const run = await runUnderMocks(program(), staging());
        assert.equal(run.error, undefined);
        const claims = run.outputs?.claims as ClaimRecords;
        assert.equal(claims.checkpoints?.namespace, "arl-staging-training");
        assert.equal(claims.checkpoints?.size, "110Gi");
        assert.ok(claims.modelCache, "the model cache claim too");
    });

    it("the same config against its own recorded claims goes through; a shrink is refused with nothing registered", async () => {
        const first = await runUnderMocks(program(), staging());
        const claims = first.outputs?.claims as ClaimRecords;
        const again = await runUnderMocks(program(), { ...staging(), previousOutputs: { claims } });
        assert.equal(again.error, undefined);
        assert.ok(again.resources.length > 0);

        const bigger = { ...claims, checkpoints: { ...claims.checkpoints!, size: "2Ti" } };
        for (const preview of [false, true]) {
            const refused = await runUnderMocks(program(), { ...staging(), preview, previousOutputs: { claims: bigger } });
            assert.ok(pulumi.RunError.isInstance(refused.error as Error), `a clean RunError (${refused.error})`);
            assert.match((refused.error as Error).message, /training\.checkpoints\.size: 110Gi is smaller than the 2Ti of the claim arl-staging-training\//);
            assert.deepEqual(
                refused.resources.map((r) => r.type).filter((t) => t !== "pulumi:pulumi:Stack"),
                [],
                "no resource registered (the stack itself only)",
            );
        }
    });

    it("a Docker stack reads nothing back (no StackReference; host directories have no class or size)", async () => {
        const s = readStackFile("dev");
        const run = await runUnderMocks(program(), {
            stack: s.stack,
            config: s.config,
            secretKeys: s.secretKeys,
            previousOutputs: { claims: { checkpoints: { namespace: "x", name: "y", size: "9Ti" } } },
        });
        assert.equal(run.error, undefined);
        assert.equal(run.outputs?.claims, undefined);
    });
});
