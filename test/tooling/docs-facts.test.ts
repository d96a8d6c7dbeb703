/**
 * Facts with one source, named the same on every page: the agent-sandbox controller's version
 * (AGENT_SANDBOX_VERSION, what the cluster stack installs), the Python client's version (the
 * trainer's lock), and Node's requirement (package.json engines). A page (README, docs/, the
 * stack files, the component and package READMEs) that names another fails, naming the file,
 * the line and both values.
 * Run: node --import tsx --test test/tooling/docs-facts.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, test } from "node:test";
import { AGENT_SANDBOX_VERSION } from "../../components/config/cluster-schema";
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
