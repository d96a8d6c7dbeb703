/**
 * The stack file's own keys (components/config/stack-keys.ts) and how the program reads them
 * (components/config/load.ts under Pulumi mocks): a key that is no setting is refused with its
 * near miss (a misspelled secret never passes silently), a missing platform names the file and
 * the near miss it has instead, a platform that is not an object is a clean message.
 * Run: npx tsx --test test/config/stack-keys.test.ts
 */
import assert from "node:assert/strict";
import * as path from "node:path";
import { describe, test } from "node:test";
import * as pulumi from "@pulumi/pulumi";
import { missingPlatformMessage, nearMiss, stackObject, unknownStackKeys } from "../../components/config";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { REPO_ROOT } from "../../scripts/lib/plan";

const program = () => require(path.join(REPO_ROOT, "index.ts")) as () => Promise<Record<string, unknown>>;
const PLATFORM = JSON.stringify({ recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" }, images: { trainer: "registry.test/t:1" } });

describe("stack keys (pure)", () => {
    test("nearMiss: one or two edits, case-insensitive; nothing for a far word", () => {
        assert.equal(nearMiss("hfTokn", ["platform", "cluster", "hfToken"]), "hfToken");
        assert.equal(nearMiss("plattform", ["platform", "cluster", "hfToken"]), "platform");
        assert.equal(nearMiss("HFTOKEN", ["hfToken"]), "hfToken");
        assert.equal(nearMiss("clsuter", ["cluster"]), "cluster", "a swap is one edit");
        assert.equal(nearMiss("replicas", ["platform", "cluster", "hfToken"]), undefined);
    });
    test("unknownStackKeys: every key of the namespace that is no setting, with its near miss; other namespaces are not ours", () => {
        assert.deepEqual(
            unknownStackKeys([
                "agent-rl-infra:platform",
                "agent-rl-infra:hfToken",
                "agent-rl-infra:ingressKey-operators",
                "kubernetes:context",
                "agent-rl-infra:hfTokn",
                "agent-rl-infra:ingresKey-ops",
                "agent-rl-infra:replicas",
            ]),
            [
                "agent-rl-infra:hfTokn: not a setting of this project (the keys are platform, cluster, hfToken, registryAuth, ingressKey-<name> and envSecret-<name>): did you mean agent-rl-infra:hfToken? rename it (pulumi config rm hfTokn, then pulumi config set --secret hfToken ...)",
                "agent-rl-infra:ingresKey-ops: not a setting of this project (the keys are platform, cluster, hfToken, registryAuth, ingressKey-<name> and envSecret-<name>): did you mean agent-rl-infra:ingressKey-ops? rename it (pulumi config rm ingresKey-ops, then pulumi config set --secret ingressKey-ops ...)",
                "agent-rl-infra:replicas: not a setting of this project (the keys are platform, cluster, hfToken, registryAuth, ingressKey-<name> and envSecret-<name>): remove it (pulumi config rm replicas)",
            ],
        );
    });
    test("missingPlatformMessage names the file given and the near miss it has", () => {
        assert.equal(
            missingPlatformMessage("elsewhere/Pulumi.typo.yaml", ["agent-rl-infra:plattform"]),
            "config agent-rl-infra:platform is missing from elsewhere/Pulumi.typo.yaml, which has agent-rl-infra:plattform (did you mean agent-rl-infra:platform?): add a 'platform' object (start from a recipe: platform: { recipe: mbpp-whitebox, runId: run-001, target: { kind: docker } }), or a 'cluster' object for a cluster stack",
        );
    });
    test("stackObject: JSON objects pass; a string, a list, a number are named", () => {
        assert.deepEqual(stackObject("platform", '{"recipe":"x"}', "f.yaml"), { value: { recipe: "x" } });
        for (const [raw, got] of [
            ["not-an-object", 'the string "not-an-object"'],
            ["[1]", "a list"],
            ["3", "the number 3"],
        ] as const) {
            const r = stackObject("platform", raw, "stacks/Pulumi.s.yaml");
            assert.ok("problem" in r);
            assert.match(
                r.problem,
                new RegExp(
                    `^agent-rl-infra:platform: must be an object \\(a mapping under config: in stacks/Pulumi\\.s\\.yaml, e\\.g\\. .*\\), got ${got.replace(/[[\]"]/g, "\\$&")}$`,
                ),
            );
        }
    });
});

describe("the program reads the keys strictly (under mocks)", () => {
    const run = (config: Record<string, string>, secretKeys: string[] = []) => runUnderMocks(program(), { stack: "keys", config, secretKeys });
    test("a misspelled secret key stops the run before anything registers, naming the near miss", async () => {
        const r = await run({ "agent-rl-infra:platform": PLATFORM, "agent-rl-infra:hfTokn": "hf_x" }, ["agent-rl-infra:hfTokn"]);
        assert.ok(pulumi.RunError.isInstance(r.error), String(r.error));
        assert.match((r.error as Error).message, /agent-rl-infra:hfTokn: not a setting of this project .*did you mean agent-rl-infra:hfToken\?/);
        assert.ok(!(r.error as Error).message.includes("hf_x"), "never the value");
        assert.deepEqual(
            r.resources.filter((x) => x.type !== "pulumi:pulumi:Stack").map((x) => x.type),
            [],
        );
    });
    test("the right key plans", async () => {
        const r = await run({ "agent-rl-infra:platform": PLATFORM, "agent-rl-infra:hfToken": "hf_x" }, ["agent-rl-infra:hfToken"]);
        assert.equal(r.error, undefined);
    });
    test("a platform that is a string is a clean message, not a JSON error", async () => {
        const r = await run({ "agent-rl-infra:platform": "not-an-object" });
        assert.ok(pulumi.RunError.isInstance(r.error), String(r.error));
        assert.match(
            (r.error as Error).message,
            /agent-rl-infra:platform: must be an object \(a mapping under config: in stacks\/Pulumi\.keys\.yaml.*got the string "not-an-object"/,
        );
    });
    test("a missing platform names stacks/Pulumi.<stack>.yaml (Pulumi.yaml's stackConfigDir) and the near miss", async () => {
        const r = await run({ "agent-rl-infra:plattform": PLATFORM });
        assert.match(
            (r.error as Error).message,
            /^config agent-rl-infra:platform is missing from stacks\/Pulumi\.keys\.yaml, which has agent-rl-infra:plattform \(did you mean agent-rl-infra:platform\?\)/,
        );
    });
    test("a cluster stack's keys are as strict", async () => {
        const r = await run({ "agent-rl-infra:cluster": JSON.stringify({ target: { kind: "kubernetes", context: "c" } }), "agent-rl-infra:clustre": "{}" });
        assert.match((r.error as Error).message, /agent-rl-infra:clustre: not a setting of this project .*did you mean agent-rl-infra:cluster\?/);
    });
});
