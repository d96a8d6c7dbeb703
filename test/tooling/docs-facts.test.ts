/**
 * Facts with one source, named the same on every page: the agent-sandbox controller's version
 * (AGENT_SANDBOX_VERSION, what the cluster stack installs), JobSet's (JOBSET_RELEASE), Kueue's (KUEUE_RELEASE), the Python
 * client's version (the trainer's lock), Node's requirement (package.json engines), the names of the
 * images `npm run images` builds and the trainer images' Python (components/config/built-images.ts). A page (README, docs/, the
 * stack files, the component and package READMEs) that names another fails, naming the file,
 * the line and both values.
 * Run: node --import tsx --test test/tooling/docs-facts.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, test } from "node:test";
import { BUILT_IMAGE_NAMES, BUILT_IMAGES } from "../../components/config/built-images";
import { AGENT_SANDBOX_VERSION, JOBSET_RELEASE, KUEUE_RELEASE } from "../../components/config/cluster-schema";
import { STOCK_SANDBOX_IMAGE } from "../../components/config/schema";
import { readPins } from "../../scripts/lib/images/pins";
import { docFiles, REPO } from "../helpers/docs";

/** The pages a user reads: the docs, the stack files and the READMEs beside the code (not test/ fixtures' notes). */
function pages(): string[] {
    const beside = ["components", "python", "trainer", "images", "policy"].flatMap((dir) => {
        const out: string[] = [];
        const walk = (d: string) => {
            if (!fs.existsSync(path.join(REPO, d))) return;
            for (const e of fs.readdirSync(path.join(REPO, d), { withFileTypes: true })) {
                const rel = path.join(d, e.name);
                if (e.isDirectory() && e.name !== "node_modules" && !e.name.startsWith(".")) walk(rel);
                else if (e.name.endsWith(".md")) out.push(rel);
            }
        };
        walk(dir);
        return out;
    });
    const stacks = fs
        .readdirSync(path.join(REPO, "stacks"))
        .filter((f) => f.endsWith(".yaml"))
        .map((f) => path.join("stacks", f));
    return [...docFiles(), ...beside, ...stacks];
}

/** Every `file:line: found` where `pattern`'s first group differs from `expected`. */
export function disagreements(files: readonly string[], read: (f: string) => string, pattern: RegExp, expected: string): string[] {
    const out: string[] = [];
    for (const f of files)
        read(f)
            .split("\n")
            .forEach((line, i) => {
                for (const m of line.matchAll(pattern)) if (m[1] !== expected) out.push(`${f}:${i + 1}: ${m[0]} (the source says ${expected})`);
            });
    return out;
}

const read = (f: string) => fs.readFileSync(path.join(REPO, f), "utf8");
/** The controller: `agent-sandbox v1.0.1`, not the Python client `k8s-agent-sandbox 1.0.8`. */
const CONTROLLER = /(?<![\w-])agent-sandbox`? (v\d+\.\d+\.\d+)/g;
/** The Python client package, as the lock pins it. */
const CLIENT = /k8s-agent-sandbox`?(?: |==)(\d+\.\d+\.\d+)/g;
/** JobSet's release, written in full (`JobSet v0.10 or later` is a floor, not a release). */
const JOBSET = /JobSet`? (v\d+\.\d+\.\d+)/g;
/** Kueue's release, written in full. */
const KUEUE = /Kueue`? (v\d+\.\d+\.\d+)/g;
/**
 * An image this repository builds, as a page names it in a registry (`registry.example.com/agent-rl/trainer-blackbox:0.1.0`,
 * `<registry>/sandbox@sha256:...`): the last path part of a trainer, sandbox or mtail image with a tag or digest.
 */
const BUILT_IMAGE_REF = /[\w.<>:-]+(?:\/[\w.<>-]+)*\/([\w-]*(?:trainer|sandbox|mtail)[\w-]*)(?=[:@][\w<])/g;
/** Names that are not ours: the upstream sandbox image, and harbor.md's layer of the user's own over trainer-blackbox. */
const NOT_BUILT_HERE = [STOCK_SANDBOX_IMAGE.split("/").pop()!.split(":")[0]!, "trainer-harbor"];
/** Every `file:line: name` where a page names a built image by a name BUILT_IMAGE_NAMES does not hold. */
export function imageNameProblems(files: readonly string[], read: (f: string) => string): string[] {
    const known = [...BUILT_IMAGE_NAMES, ...NOT_BUILT_HERE] as string[];
    const out: string[] = [];
    for (const f of files)
        read(f)
            .split("\n")
            .forEach((line, i) => {
                for (const m of line.matchAll(BUILT_IMAGE_REF))
                    if (!known.includes(m[1]!)) out.push(`${f}:${i + 1}: ${m[0]} (the images are ${BUILT_IMAGE_NAMES.join(", ")})`);
            });
    return out;
}
/** The trainer's Python as a page states it: "the trainer side is Python 3.11", "the trainer's lock is 3.11", "the trainer image's Python is 3.12". */
const TRAINER_PYTHON = /trainer(?: image)?(?:'s| side)(?: lock| Python)?(?: is)?(?: Python)? (3\.\d+)/g;
const clientVersion = () => /^k8s-agent-sandbox==(\S+)$/m.exec(read("trainer/requirements.txt"))?.[1];

describe("facts from one source, the same on every page", () => {
    test("the agent-sandbox controller's version is AGENT_SANDBOX_VERSION wherever a page names one", () => {
        assert.deepEqual(disagreements(pages(), read, CONTROLLER, AGENT_SANDBOX_VERSION), []);
    });

    test("the Python client k8s-agent-sandbox is the trainer lock's version wherever a page names one", () => {
        const v = clientVersion();
        assert.ok(v !== undefined, "trainer/requirements.txt pins k8s-agent-sandbox");
        assert.match(read("python/pyproject.toml"), new RegExp(`"k8s-agent-sandbox==${v.replace(/\./g, "\\.")}"`));
        assert.deepEqual(disagreements(pages(), read, CLIENT, v), []);
    });

    test("README's first lines name Node's requirement as package.json's engines does", () => {
        const engines = (JSON.parse(read("package.json")) as { engines: { node: string } }).engines.node;
        const major = /^>=(\d+)$/.exec(engines)?.[1];
        assert.ok(major !== undefined, `engines.node is >=<major>, got ${engines}`);
        const head = read("README.md").split("\n").slice(0, 5).join("\n");
        assert.match(head, new RegExp(`Node\\.js ${major} or later`));
        assert.deepEqual(disagreements(["README.md", "docs/contributing.md"], read, /Node(?:\.js)? (\d+) or later/g, major), []);
    });

    test("JobSet's release is JOBSET_RELEASE wherever a page names one", () => {
        assert.deepEqual(disagreements(pages(), read, JOBSET, JOBSET_RELEASE), []);
    });

    test("Kueue's release is KUEUE_RELEASE wherever a page names one", () => {
        assert.deepEqual(disagreements(pages(), read, KUEUE, KUEUE_RELEASE), []);
    });

    test("the images npm run images builds have one name each on every page (built-images.ts), and the pins agree with the table", () => {
        assert.deepEqual(imageNameProblems(pages(), read), []);
        for (const name of BUILT_IMAGE_NAMES) assert.equal(readPins(name).dockerfile, BUILT_IMAGES[name].dockerfile, name);
    });

    test("the trainer's Python is the trainer images' (built-images.ts) wherever a page states it", () => {
        const python = BUILT_IMAGES["trainer-blackbox"].python?.version;
        assert.equal(python, BUILT_IMAGES["trainer-whitebox"].python?.version);
        assert.ok(python !== undefined);
        assert.match(read("trainer/README.md"), new RegExp(`image's Python ${python.replace(".", "\\.")}`));
        assert.deepEqual(disagreements(pages(), read, TRAINER_PYTHON, python), []);
    });

    test("the new checks fail on a second name: another JobSet or Kueue, an image's old name, the trainer on another Python", () => {
        const page = (text: string) => () => text;
        assert.deepEqual(disagreements(["x.md"], page("needs JobSet v0.10.1 (CRDs)"), JOBSET, "v0.12.0"), ["x.md:1: JobSet v0.10.1 (the source says v0.12.0)"]);
        assert.deepEqual(disagreements(["x.md"], page("install Kueue v0.16.2 first"), KUEUE, "v0.17.0"), ["x.md:1: Kueue v0.16.2 (the source says v0.17.0)"]);
        assert.deepEqual(imageNameProblems(["stacks/Pulumi.x.yaml"], page("      trainer: registry.example.com/agent-rl/trl-opencode-trainer:0.1.0")), [
            `stacks/Pulumi.x.yaml:1: registry.example.com/agent-rl/trl-opencode-trainer (the images are ${BUILT_IMAGE_NAMES.join(", ")})`,
        ]);
        assert.equal(imageNameProblems(["x.md"], page("docker build -t <registry>/agent-rl-sandbox:<tag> python")).length, 1);
        assert.deepEqual(
            imageNameProblems(
                ["x.md"],
                page("`registry.example.com/agent-rl/sandbox@sha256:...` from ghcr.io/huggingface/openenv-opencode-sandbox:sha-86a180e"),
            ),
            [],
        );
        assert.deepEqual(disagreements(["x.md"], page("Harbor needs Python >= 3.12 and the trainer side is Python 3.11 (vLLM 0.29)"), TRAINER_PYTHON, "3.12"), [
            "x.md:1: trainer side is Python 3.11 (the source says 3.12)",
        ]);
        assert.equal(disagreements(["x.md"], page("the trainer's lock is 3.11"), TRAINER_PYTHON, "3.12").length, 1);
        assert.deepEqual(disagreements(["x.md"], page("the trainer image's Python is 3.12"), TRAINER_PYTHON, "3.12"), []);
    });

    test("the checks fail on a second name: a page with another controller or client version, in any form", () => {
        const page = (text: string) => () => text;
        assert.deepEqual(disagreements(["stacks/Pulumi.cluster.yaml"], page("    # agent-sandbox v0.5.6 (CRDs, controller, RBAC)"), CONTROLLER, "v1.0.1"), [
            "stacks/Pulumi.cluster.yaml:1: agent-sandbox v0.5.6 (the source says v1.0.1)",
        ]);
        assert.deepEqual(disagreements(["x.md"], page("the `agent-sandbox` v1.0.0 CRDs"), CONTROLLER, "v1.0.1"), [
            "x.md:1: agent-sandbox` v1.0.0 (the source says v1.0.1)",
        ]);
        assert.deepEqual(disagreements(["x.md"], page("client (`k8s-agent-sandbox` 1.0.7)"), CLIENT, "1.0.8"), [
            "x.md:1: k8s-agent-sandbox` 1.0.7 (the source says 1.0.8)",
        ]);
        // The client's version is not read as the controller's.
        assert.deepEqual(disagreements(["x.md"], page("k8s-agent-sandbox 1.0.8 speaks v1beta1"), CONTROLLER, "v1.0.1"), []);
    });
});
