/**
 * The docs against the code: README.md stays a few screens, every link between README.md and docs/
 * resolves (files and headings), every `npm run plan` command in their shell blocks plans (every
 * stack file a guide shows included), the other commands name a script and a stack that exist, and
 * the docs hold no claim the code contradicts (each case below is one that did). The configuration
 * reference and the JSON Schema are test/tooling/schema-docs.test.ts's.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, test } from "node:test";
import { platformSchema } from "../../components/config";
import { HelpRequested } from "../../scripts/lib/cli";
import { isClusterStack, knownStacks, planClusterToDir, planToDir } from "../../scripts/lib/plan";
import { parsePlanArgs } from "../../scripts/plan";
import { parseImagesArgs } from "../../scripts/images";
import { parsePreflightArgs } from "../../scripts/preflight";
import { anchors, docCommands, docFiles, docStacks, localLinks, readDoc, REPO } from "../helpers/docs";

const read = (rel: string) => fs.readFileSync(path.join(REPO, rel), "utf8");
const README = read("README.md");
const regexLiteral = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

describe("README.md is a few screens; the rest is docs/", () => {
    test("README.md has at most 250 lines, none over 200 characters outside code and tables", () => {
        const lines = README.split("\n");
        assert.ok(lines.length <= 250, `README.md has ${lines.length} lines`);
        assert.deepEqual(
            lines.filter((l) => l.length > 200 && !l.startsWith("|")).map((l) => l.slice(0, 60)),
            [],
        );
    });

    test("README.md names the two commands and where to go next", () => {
        assert.match(README, /npm run plan -- dev/);
        assert.match(README, /^npm test\b/m);
        assert.match(README, /\(docs\/README\.md\)/);
        for (const guide of ["mbpp-whitebox-eval", "mbpp-whitebox", "wordle-whitebox", "opencode-blackbox", "kubernetes", "docker-gpu-host", "platform-teams"])
            assert.match(README, new RegExp(`\\(docs/guides/${guide}\\.md\\)`), guide);
    });
});

describe("links between README.md and docs/ resolve", () => {
    const files = docFiles();

    test("every relative link names a file that exists, and every #anchor a heading of that file", () => {
        const problems: string[] = [];
        for (const doc of files) {
            for (const link of localLinks(readDoc(doc))) {
                const [target, anchor] = link.split("#") as [string, string | undefined];
                const file = target === "" ? doc : path.normalize(path.join(path.dirname(doc), target));
                if (!fs.existsSync(path.join(REPO, file))) {
                    problems.push(`${doc}: ${link}: no file ${file}`);
                    continue;
                }
                if (anchor !== undefined && anchor !== "" && file.endsWith(".md") && !anchors(read(file)).has(anchor))
                    problems.push(`${doc}: ${link}: ${file} has no heading #${anchor}`);
            }
        }
        assert.deepEqual(problems, []);
    });

    test("every file under docs/ is reached from docs/README.md or README.md", () => {
        const reached = new Set<string>();
        for (const from of ["README.md", "docs/README.md"])
            for (const link of localLinks(read(from))) reached.add(path.normalize(path.join(path.dirname(from), link.split("#")[0]!)));
        assert.deepEqual(
            files.filter((f) => f.startsWith("docs/") && f !== "docs/README.md" && !reached.has(f)),
            [],
        );
    });

    test("the check can fail: a link to a missing heading is found", () => {
        assert.ok(anchors(read("docs/reference/stack-file.md")).has("what-each-target-ignores"));
        assert.ok(!anchors(read("docs/reference/stack-file.md")).has("what-each-target-ignore"));
    });
});

describe("the commands in README.md and docs/", () => {
    const commands = docCommands();
    const stacks = docStacks();
    const scripts = Object.keys(JSON.parse(read("package.json")).scripts as Record<string, string>);
    const placeholder = (args: readonly string[]) => args.some((a) => /[<>]/.test(a));

    test("every `npm run` names a script of package.json", () => {
        assert.ok(commands.length >= 10, `found ${commands.length} commands`);
        assert.deepEqual(
            commands.filter((c) => !scripts.includes(c.script)).map((c) => `${c.doc}: ${c.line}`),
            [],
        );
    });

    test("every `npm run preflight` or `npm run images` of a stack names a stack of stacks/ or one a guide's stack file creates (their live targets are not here: their own tests and zero-to-up.test.ts run them)", () => {
        const known = [...knownStacks(), ...stacks.map((s) => s.name)];
        const problems: string[] = [];
        for (const c of commands.filter((c) => (c.script === "preflight" || (c.script === "images" && c.args[0] !== "lock")) && !placeholder(c.args))) {
            const stack = c.script === "preflight" ? parsePreflightArgs(c.args).stack : parseImagesArgs(c.args);
            const name = typeof stack === "string" ? stack : stack.kind === "build" ? stack.stack : "";
            if (!known.includes(name)) problems.push(`${c.doc}: ${c.line}: no stack ${name} in stacks/ nor a guide's stack file`);
        }
        assert.deepEqual(problems, []);
    });

    test("the stack check can fail: a preflight of a stack no file names is found", () => {
        const known = [...knownStacks(), ...stacks.map((s) => s.name)];
        assert.ok(known.includes("blackbox") && known.includes("staging"));
        assert.ok(!known.includes("blackbx"));
    });

    test("every guide's stack file is named once", () => {
        const names = stacks.map((s) => s.name);
        assert.deepEqual(
            names.filter((n, i) => names.indexOf(n) !== i),
            [],
        );
        for (const g of ["mbpp-whitebox-eval", "mbpp-whitebox", "wordle-whitebox", "opencode-blackbox"])
            assert.ok(
                stacks.some((s) => s.doc === `docs/guides/${g}.md`),
                `docs/guides/${g}.md shows a stack file`,
            );
    });

    test("every `npm run plan` command plans (a guide's stack file for path/to/Pulumi.<name>.yaml), and every stack file a guide shows plans", async () => {
        const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-docs-plan-"));
        try {
            const files = new Map<string, string>();
            for (const s of stacks) {
                const dir = fs.mkdtempSync(path.join(tmp, "stack-"));
                const file = path.join(dir, `Pulumi.${s.name}.yaml`);
                fs.writeFileSync(file, s.text);
                files.set(s.name, file);
            }
            const runs: string[][] = [];
            for (const c of commands.filter((c) => c.script === "plan")) {
                // path/to/Pulumi.<name>.yaml, or a stack name a guide's file creates (stacks/Pulumi.<name>.yaml on the user's side).
                const args = c.args.map((a) => {
                    const m = /^path\/to\/Pulumi\.([a-z0-9-]+)\.yaml$/.exec(a);
                    if (m !== null && files.has(m[1]!)) return files.get(m[1]!)!;
                    return files.has(a) && !knownStacks().includes(a) ? files.get(a)! : a;
                });
                if (placeholder(args)) continue;
                runs.push(args);
            }
            // Every guide's stack file, as `npm run plan -- path/to/Pulumi.<name>.yaml` would plan it.
            for (const f of files.values()) if (!runs.some((r) => r.includes(f))) runs.push([f]);
            assert.ok(runs.length >= 8, `planned ${runs.length}`);
            const problems: string[] = [];
            for (const [i, argv] of runs.entries()) {
                let parsed: ReturnType<typeof parsePlanArgs>;
                try {
                    parsed = parsePlanArgs(argv);
                } catch (e) {
                    if (e instanceof HelpRequested) continue;
                    problems.push(`npm run plan -- ${argv.join(" ")}: ${(e as Error).message}`);
                    continue;
                }
                const outDir = path.join(tmp, `out-${i}`);
                try {
                    if ("stack" in parsed.source && isClusterStack(parsed.source)) await planClusterToDir(parsed.source, { outDir });
                    else await planToDir(parsed.source, { outDir });
                    assert.ok(fs.existsSync(path.join(outDir, "plan.md")));
                } catch (e) {
                    problems.push(`npm run plan -- ${argv.join(" ")}: ${(e as Error).message.slice(0, 400)}`);
                }
            }
            assert.deepEqual(problems, []);
        } finally {
            fs.rmSync(tmp, { recursive: true, force: true });
        }
    });
});

describe("docs say what the code does", () => {
    test("README.md repeats no paragraph (the 'Using it.' block once appeared twice)", () => {
        const paragraphs = README.split(/\n\s*\n/).map((p) => p.trim());
        const seen = new Map<string, number>();
        for (const p of paragraphs) if (p.length >= 160) seen.set(p, (seen.get(p) ?? 0) + 1);
        assert.deepEqual(
            [...seen.entries()].filter(([, n]) => n > 1).map(([p]) => p.slice(0, 80)),
            [],
        );
    });

    test("the Quickstart: a user's first step is the offline plan, the contributor's npm test comes after it", () => {
        const quick = README.slice(README.indexOf("## Quickstart"), README.indexOf("\n## ", README.indexOf("## Quickstart") + 5));
        const user = quick.slice(0, quick.indexOf("### Contributors"));
        assert.ok(quick.includes("### Contributors"), "a Contributors part of its own");
        assert.match(user, /npm run plan -- dev/);
        assert.match(user, /images\.trainer/);
        assert.doesNotMatch(user, /npm test/, "the user's steps do not start with the 45-minute contributor suite");
        assert.match(quick.slice(quick.indexOf("### Contributors")), /npm test/);
    });

    test("the deploy steps (trainer image, pulumi up with the passphrase) are in the Docker and Kubernetes guides", () => {
        for (const guide of ["docs/guides/docker-gpu-host.md", "docs/guides/kubernetes.md"]) {
            const text = read(guide);
            assert.match(text, /PULUMI_CONFIG_PASSPHRASE/, guide);
            assert.match(text, /npm run preflight -- /, guide);
            assert.match(text, /^pulumi up$/m, guide);
        }
        assert.match(read("docs/guides/docker-gpu-host.md"), /images\.trainer/);
    });

    test("the policy-pack claim says what is enforced and where, not 'mandatory' as a given", () => {
        const docs = docFiles().map(readDoc).join("\n");
        assert.doesNotMatch(docs, /the policy pack mandatory/);
        const line = read("docs/reference/configuration.md")
            .split("\n")
            .find((l) => l.startsWith("| `prod` |"))!;
        assert.ok(line);
        assert.match(line, /--policy-pack-config policy\/config\.prod\.json/);
        assert.match(line, /nothing checks that it ran/);
    });

    test("components/ingress/README.md's TLS table has every tls.mode of the schema", () => {
        const modes = (platformSchema.shape.ingress as any)._zod.def.innerType.shape.tls._zod.def.innerType.shape.mode._zod.def.innerType.options as string[];
        const ingress = read("components/ingress/README.md");
        const tls = ingress.slice(ingress.indexOf("## TLS"));
        for (const m of modes) assert.match(tls, new RegExp(`mode: ${regexLiteral(m)}\\b`), `tls.mode ${m}`);
    });

    test("components/env/README.md: egress is what the catalog and envs.<name>.egress say, and Docker replicas have a network of their own", () => {
        const env = read("components/env/README.md");
        assert.doesNotMatch(env, /egress stays open/);
        assert.doesNotMatch(env, /everything sits on the private\s+training network/);
        assert.doesNotMatch(env, /capacity responder \(`<router>-responder`, in the router's network namespace\) on the private training network/);
        assert.match(env, /envs\.<name>\.egress/);
    });

    test("harbor.md: harbor run runs inside the trainer pod (the pool admits only the trainer's pods, on the ports network-paths.md computes), with the kubectl exec", () => {
        const harbor = read("docs/guides/harbor.md");
        const section = harbor.slice(harbor.indexOf("### Where `harbor run` runs"), harbor.indexOf("**`harbor run` exits 0"));
        assert.ok(section.length > 200, "the section is there, before the exit-code note");
        assert.match(section, /only from inside the trainer pod/);
        const row = /^\| trainer \| sandbox \| (TCP [\d,-]+) \|$/m.exec(read("docs/design/network-paths.md"))?.[1];
        assert.ok(row, "network-paths.md has the trainer -> sandbox row");
        assert.ok(section.includes(`trainer | sandbox | ${row}`), `the section quotes ${row}`);
        assert.match(section, /kubectl -n <prefix>-training exec -it job\/\$\(pulumi stack output trainingJob\) -c trainer --/);
    });

    test("python/README.md: the sandbox uid is sandboxes.runAsUser's default, 65532", () => {
        const py = read("python/README.md");
        assert.doesNotMatch(py, /uid 1000\b/);
        assert.match(py, /65532/);
    });
});

describe("plan.md's prod line", () => {
    test("a prod plan says the policy pack runs only when the command names it; a dev plan does not claim it", async () => {
        const { POLICY_PACK_NOTE } = await import("../../scripts/lib/plan-markdown");
        const out = fs.mkdtempSync(path.join(os.tmpdir(), "arl-readme-plan-"));
        try {
            await planToDir({ stack: "prod" }, { outDir: path.join(out, "prod") });
            const prod = fs.readFileSync(path.join(out, "prod", "plan.md"), "utf8");
            assert.ok(prod.includes(POLICY_PACK_NOTE));
            assert.doesNotMatch(prod, /policy pack mandatory/);
            assert.match(prod, /--policy-pack policy --policy-pack-config policy\/config\.prod\.json/);
            await planToDir({ stack: "dev" }, { outDir: path.join(out, "dev") });
            assert.doesNotMatch(fs.readFileSync(path.join(out, "dev", "plan.md"), "utf8"), /policy pack/);
        } finally {
            fs.rmSync(out, { recursive: true, force: true });
        }
    });
});
