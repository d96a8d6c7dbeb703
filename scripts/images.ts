/**
 * npm run images: build and push every image a stack needs, then name them by digest in its stack file.
 *
 *   npm run images -- lock [image...]        fill images/lock.json (trust on first use; read, then commit it)
 *   npm run images -- <stack> [--to <registry>/<path>] [--registry-auth-file <config.json>]
 *
 * A CLI beside plan and preflight, not an image resource of the stack: the images are inputs of the
 * stack's plan (which stays offline and needs no Docker), and one set of images serves many run
 * stacks; so they are built once, recorded by digest in the stack file (what `pulumi config set`
 * writes), and the plan and `pulumi up` read them as any other config.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import YAML from "yaml";
import { CONFIG_NAMESPACE, type PlatformConfig } from "../components/config";
import { parseImage } from "../components/preflight/registry";
import { BUILD_NETWORK_ENV, type Built, buildAndPush, buildNetworkFrom, neededImages, SOURCE_OVERRIDES } from "./lib/images/build";
import { BASE_MIRROR_ENV, MirrorSettingError } from "./lib/images/base-mirrors";
import { fillLock, ImageStepError } from "./lib/images/lock-step";
import { RegistryError } from "./lib/images/registry";
import { IMAGE_NAMES, type ImageName, REPO_ROOT } from "./lib/images/pins";
import { checkHelp, runCli, UsageError } from "./lib/cli";
import { loadRunStack, StackError } from "./lib/load-stack";

const USAGE = [
    "usage: npm run images -- lock [image...]   record base digests and script sha256s in images/lock.json (trust on first use)",
    "       npm run images -- <stack | path/to/Pulumi.<stack>.yaml> [--to <registry>/<path>] [--registry-auth-file <config.json>]",
    `images: ${IMAGE_NAMES.join(", ")}`,
    "mirrors (environment; each is part of the images' input hash):",
    ...SOURCE_OVERRIDES.map((o) => `  ${o.env}  replaces ${o.replaces}`),
    `  ${BASE_MIRROR_ENV}  <registry>=<mirror>[/<path>],...: pull the base images through a pull-through cache (the lock step and the build)`,
    "  AGENTRL_HF_ENDPOINT  replaces https://huggingface.co for the lock step's commit lookup",
    `  ${BUILD_NETWORK_ENV}  docker build --network for the builds' RUN steps (host: a mirror on this machine's loopback); not hashed`,
].join("\n");

export type ImagesArgs =
    | { readonly kind: "lock"; readonly images: readonly ImageName[] }
    | { readonly kind: "build"; readonly stack: string; readonly stackFile?: string; readonly to?: string; readonly registryAuthFile?: string };

export function parseImagesArgs(argv: readonly string[]): ImagesArgs {
    checkHelp(argv);
    if (argv[0] === "lock") {
        const images = argv.slice(1);
        for (const i of images)
            if (!(IMAGE_NAMES as readonly string[]).includes(i)) throw new UsageError(`unknown image ${i}: known are ${IMAGE_NAMES.join(", ")}`);
        return { kind: "lock", images: (images.length > 0 ? images : IMAGE_NAMES) as ImageName[] };
    }
    let stack: string | undefined;
    let to: string | undefined;
    let registryAuthFile: string | undefined;
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i] as string;
        const value = () => {
            const v = argv[++i];
            if (v === undefined || v.startsWith("--")) throw new UsageError(`${a} needs a value`);
            return v;
        };
        if (a === "--to") to = value();
        else if (a === "--registry-auth-file") registryAuthFile = value();
        else if (a.startsWith("-")) throw new UsageError(`unknown option ${a}`);
        else if (stack === undefined) stack = a;
        else throw new UsageError(`unexpected argument ${a}: give one stack`);
    }
    if (stack === undefined) throw new UsageError("name a stack (or 'lock')");
    let stackFile: string | undefined;
    if (stack.endsWith(".yaml")) {
        const m = /^Pulumi\.([A-Za-z0-9._-]+)\.yaml$/.exec(path.basename(stack));
        if (!m) throw new UsageError(`a stack file must be named Pulumi.<stack>.yaml, got ${stack}`);
        stackFile = path.resolve(stack);
        stack = m[1] as string;
    }
    if (to !== undefined && !/^[a-z0-9.-]+(:\d+)?(\/[a-z0-9._-]+)+$/.test(to)) throw new UsageError(`--to must be <registry host>/<path>, got ${to}`);
    return { kind: "build", stack, ...(stackFile ? { stackFile } : {}), ...(to ? { to } : {}), ...(registryAuthFile ? { registryAuthFile } : {}) };
}

/** The stack's registryAuth: from a file, else decrypted by Pulumi (`pulumi config get`), which alone holds the passphrase. */
export function readRegistryAuth(stack: string, file?: string): string {
    if (file !== undefined) return fs.readFileSync(file, "utf8");
    const r = spawnSync("pulumi", ["config", "get", "registryAuth", "--stack", stack, "--cwd", REPO_ROOT], { encoding: "utf8", timeout: 60_000 });
    if ((r.error as NodeJS.ErrnoException | undefined)?.code === "ENOENT")
        throw new ImageStepError(
            `stack ${stack}: reading registryAuth needs the Pulumi CLI, which is not on PATH: pass --registry-auth-file ~/.docker/config.json (what docker login writes; credHelpers and credsStore work) or install the Pulumi CLI (https://www.pulumi.com/docs/iac/download-install/)`,
        );
    if (r.status !== 0 || r.stdout.trim() === "")
        throw new ImageStepError(
            `stack ${stack}: could not read registryAuth with 'pulumi config get registryAuth --stack ${stack}' (${(r.stderr || String(r.error ?? "")).trim().split("\n")[0] ?? ""}): set it (pulumi config set --secret registryAuth "$(cat config.json)") or pass --registry-auth-file <config.json>`,
        );
    return r.stdout.trim();
}

/** Sets one config field, making its parent a map where the file leaves it empty (`images:` with nothing under it). */
function setField(doc: YAML.Document, field: readonly string[], value: string): void {
    const p = ["config", `${CONFIG_NAMESPACE}:platform`, ...field];
    for (let i = 2; i < p.length; i++) if (!YAML.isMap(doc.getIn(p.slice(0, i), true))) doc.setIn(p.slice(0, i), doc.createNode({}));
    doc.setIn(p, value);
}

/** Names each built image by digest in the stack file (comments and order kept, as `pulumi config set --path` would set them). */
export function writeImageRefs(stackFile: string, refs: ReadonlyArray<{ field: readonly string[]; ref: string }>): void {
    const doc = YAML.parseDocument(fs.readFileSync(stackFile, "utf8"));
    for (const { field, ref } of refs) setField(doc, field, ref);
    fs.writeFileSync(stackFile, doc.toString());
}

/** The fields the image step fills: a stack may leave them out before its first build. */
const FILLED_FIELDS: ReadonlyArray<readonly string[]> = [
    ["images", "trainer"],
    ["sandboxes", "image"],
    ["images", "mtail"],
];

/**
 * The stack's config, as `npm run plan` reads it; when it does not load, once more with a placeholder
 * (`<to>/unbuilt:placeholder`) in each image field the step fills that the file leaves out, so a
 * stack can name its images for the first time through this step. The first error stands when the
 * placeholders do not help.
 */
export function loadForImages(stack: string, stackFile: string, to: string | undefined): PlatformConfig {
    try {
        return loadRunStack(stack, stackFile).config;
    } catch (first) {
        if (!(first instanceof StackError) || first.unknownStack || to === undefined) throw first;
        const doc = YAML.parseDocument(fs.readFileSync(stackFile, "utf8"));
        const key = `${CONFIG_NAMESPACE}:platform`;
        let added = false;
        for (const field of FILLED_FIELDS)
            if (doc.getIn(["config", key, ...field]) === undefined) {
                setField(doc, field, `${to}/unbuilt:placeholder`);
                added = true;
            }
        if (!added) throw first;
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-images-stack-"));
        try {
            const copy = path.join(dir, path.basename(stackFile));
            fs.writeFileSync(copy, doc.toString());
            return loadRunStack(stack, copy).config;
        } catch {
            throw first;
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }
}

/** Where a stack's images go: --to, else the directory of its current images.trainer. */
function destination(args: { to?: string }, trainer: string | undefined): string {
    if (args.to !== undefined) return args.to;
    if (trainer === undefined) throw new UsageError("the stack names no images.trainer to take the registry from: pass --to <registry>/<path>");
    const { registry, repository } = parseImage(trainer);
    return `${registry}/${path.posix.dirname(repository)}`;
}

async function main(): Promise<number> {
    const args = parseImagesArgs(process.argv.slice(2));
    const log = (l: string) => process.stderr.write(`images: ${l}\n`);
    if (args.kind === "lock") {
        await fillLock(args.images, { pinsRoot: REPO_ROOT, root: REPO_ROOT, log });
        log("images/lock.json written: read what it names (the scripts at their commits), then commit it");
        return 0;
    }
    const stackFile = args.stackFile ?? path.join(REPO_ROOT, "stacks", `Pulumi.${args.stack}.yaml`);
    const config = loadForImages(args.stack, stackFile, args.to);
    const to = destination(args, config.images.trainer);
    const dockerConfigJson = readRegistryAuth(args.stack, args.registryAuthFile);
    const buildNetwork = buildNetworkFrom(process.env);
    // docker's own lines as it prints them: a real trainer build runs for many minutes.
    const progress = (l: string) => process.stderr.write(`images:   | ${l}\n`);
    const built: Array<Built & { field: readonly string[] }> = [];
    for (const need of neededImages(config))
        built.push({ ...(await buildAndPush(need.image, { root: REPO_ROOT, to, dockerConfigJson, buildNetwork, log, progress })), field: need.field });
    writeImageRefs(stackFile, built);
    for (const b of built) process.stdout.write(`${b.field.join(".")}: ${b.ref}${b.pushed ? "" : " (already pushed)"}\n`);
    log(`${path.relative(process.cwd(), stackFile)} names them by digest: npm run plan -- ${args.stack}`);
    return 0;
}

if (require.main === module)
    runCli("images", USAGE, main, (e) =>
        e instanceof ImageStepError || e instanceof StackError || e instanceof RegistryError || e instanceof MirrorSettingError ? e.message : undefined,
    );
