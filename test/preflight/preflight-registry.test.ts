/**
 * The preflight's registry checks, without a target: image names as the runtimes normalize them,
 * which registryAuth entry serves which image on each target (the kubelet's keyring on Kubernetes,
 * the Docker provider's one host-name lookup on Docker), every message of the registry-credentials
 * check, and the pull Secret already in a namespace the stack makes. The pull Secret's fields are
 * read through kubectl's own jsonpath (kubectl --local, no server) to show its data is never read.
 * Run: node --import tsx --test test/preflight/preflight-registry.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import YAML from "yaml";
import { deepMerge, type PlatformConfig } from "../../components/config";
import { type PlatformPlan, resolvePlatform } from "../../components/platform";
import { checkDocker, type DockerFacts } from "../../components/preflight/docker";
import {
    checkKubernetes,
    checkPullSecret,
    type KubernetesFacts,
    PULL_SECRET_FIELDS,
    parsePullSecretFields,
    pullSecretNamespaces,
} from "../../components/preflight/kubernetes";
import {
    checkRegistryCredentials,
    dockerProviderKey,
    dockerProviderRegistry,
    dockerProviderServes,
    kubeletKey,
    kubeletServes,
    parseImage,
    pulledImages,
} from "../../components/preflight/registry";
import type { Finding } from "../../components/preflight/report";
import { loadStack, StackError } from "../../scripts/lib/load-stack";
import { parseWithTestImages } from "../helpers/config";

const k8sConfig = (over: Record<string, unknown> = {}): PlatformConfig =>
    parseWithTestImages(deepMerge({ recipe: "opencode-blackbox", runId: "pf-001", target: { kind: "kubernetes", context: "ctx" } }, over), "pf");
/** A Docker stack (the MBPP white box): the trainer from registry.test, nginx from Docker Hub, the coding env from ghcr.io. */
const dockerConfig = (over: Record<string, unknown> = {}): PlatformConfig =>
    parseWithTestImages(deepMerge({ recipe: "mbpp-whitebox", runId: "pf-001", target: { kind: "docker" } }, over), "pfd");
const planOf = (c: PlatformConfig, registryAuth?: readonly string[]): PlatformPlan =>
    resolvePlatform(c, { hfToken: true, ...(registryAuth ? { registryAuth } : {}) });

function assertFinding(f: Finding | undefined, status: Finding["status"], found: RegExp, fix?: RegExp): void {
    assert.ok(f, "a finding");
    assert.equal(f.status, status, `${f.check}: ${f.status}: ${f.found} / ${f.fix}`);
    assert.match(f.found, found);
    if (fix) assert.match(f.fix, fix);
    if (status !== "ok") assert.ok(f.fix.length > 0, "a warning or failure says what to do");
}

describe("image names (distribution/reference normalization)", () => {
    test("Docker Hub: the default registry, library/ for official images, index.docker.io as its legacy name", () => {
        for (const image of ["nginx", "nginx:1.27", "docker.io/nginx", "docker.io/library/nginx:1.27", "index.docker.io/library/nginx"])
            assert.deepEqual(parseImage(image), { registry: "docker.io", repository: "library/nginx" }, image);
        assert.deepEqual(parseImage("nginxinc/nginx-unprivileged:1.27-alpine"), { registry: "docker.io", repository: "nginxinc/nginx-unprivileged" });
        assert.deepEqual(parseImage("org/team/img:1"), { registry: "docker.io", repository: "org/team/img" });
    });
    test("a first part with a dot or a port, localhost, or an upper-case letter is a registry; tags and digests are dropped", () => {
        const digest = `sha256:${"a".repeat(64)}`;
        assert.deepEqual(parseImage("registry.example.com:5000/team/img:tag"), { registry: "registry.example.com:5000", repository: "team/img" });
        assert.deepEqual(parseImage(`ghcr.io/org/img@${digest}`), { registry: "ghcr.io", repository: "org/img" });
        assert.deepEqual(parseImage(`ghcr.io/org/img:1.0@${digest}`), { registry: "ghcr.io", repository: "org/img" });
        assert.deepEqual(parseImage("localhost/img"), { registry: "localhost", repository: "img" });
        assert.deepEqual(parseImage("localhost:5000/img:2"), { registry: "localhost:5000", repository: "img" });
        assert.deepEqual(parseImage("Registry/img"), { registry: "Registry", repository: "img" });
    });
});

describe("which entry serves which image", () => {
    test("kubelet: the keyring key drops the scheme and a /v1/ or /v2/ path", () => {
        assert.equal(kubeletKey("https://index.docker.io/v1/"), "index.docker.io");
        assert.equal(kubeletKey("http://registry.example.com/v2/"), "registry.example.com");
        assert.equal(kubeletKey("registry.example.com/team"), "registry.example.com/team");
    });
    test("kubelet: Docker Hub under index.docker.io or docker.io serves every Hub image and nothing else", () => {
        for (const entry of ["https://index.docker.io/v1/", "index.docker.io", "docker.io"])
            for (const image of ["nginx", "nginxinc/nginx-unprivileged:1.27-alpine", "docker.io/library/nginx"])
                assert.ok(kubeletServes(entry, image), `${entry} serves ${image}`);
        assert.equal(kubeletServes("https://index.docker.io/v1/", "ghcr.io/org/img"), false);
        assert.equal(kubeletServes("registry-1.docker.io", "nginx"), false, "registry-1.docker.io is no keyring name of Docker Hub");
    });
    test("kubelet: the port must match, each host label is a glob, a path must prefix the image's", () => {
        assert.ok(kubeletServes("registry.example.com:5000", "registry.example.com:5000/img"));
        assert.equal(kubeletServes("registry.example.com:5000", "registry.example.com/img"), false);
        assert.equal(kubeletServes("registry.example.com", "registry.example.com:5000/img"), false);
        assert.ok(kubeletServes("*.example.com", "a.example.com/img"));
        assert.equal(kubeletServes("*.example.com", "example.com/img"), false);
        assert.equal(kubeletServes("*.example.com", "a.b.example.com/img"), false);
        assert.ok(kubeletServes("r?.example.com", "r1.example.com/img"));
        assert.ok(kubeletServes("ghcr.io/org", "ghcr.io/org/img:1"));
        assert.equal(kubeletServes("ghcr.io/org", "ghcr.io/other/img:1"), false);
        assert.ok(kubeletServes("https://ghcr.io", "ghcr.io/org/img"));
    });
    test("Docker provider: one host name per image, registry-1.docker.io for Docker Hub; entries keyed by host", () => {
        assert.equal(dockerProviderRegistry("nginx:1.27"), "registry-1.docker.io");
        assert.equal(dockerProviderRegistry("nginxinc/nginx-unprivileged:1.27-alpine"), "registry-1.docker.io");
        assert.equal(dockerProviderRegistry("ghcr.io/org/img"), "ghcr.io");
        assert.equal(dockerProviderRegistry("localhost/img"), "localhost");
        assert.equal(dockerProviderRegistry("org/team/img"), "org", "two slashes: the provider reads the first part as the host");
        assert.equal(dockerProviderKey("https://index.docker.io/v1/"), "index.docker.io");
        assert.equal(dockerProviderKey("registry.example.com:5000/team"), "registry.example.com:5000");
        assert.ok(dockerProviderServes("registry-1.docker.io", "nginx"));
        // Hub credentials under a key the provider reads for Hub: the stack passes them under every Hub pull host too.
        for (const image of ["nginx", "docker.io/library/nginx", "index.docker.io/library/nginx"])
            for (const entry of ["https://index.docker.io/v1/", "index.docker.io", "docker.io"])
                assert.ok(dockerProviderServes(entry, image), `${entry} ${image}`);
        assert.equal(dockerProviderServes("https://index.docker.io/v1/", "ghcr.io/org/img"), false);
        assert.equal(dockerProviderServes("https://index.docker.io", "nginx"), false, "a Hub key the provider reads no Hub credentials from");
        assert.ok(dockerProviderServes("https://index.docker.io", "index.docker.io/library/nginx"), "filed under its host");
        assert.ok(dockerProviderServes("registry.example.com:5000", "registry.example.com:5000/img"));
        assert.equal(dockerProviderServes("registry.example.com", "registry.example.com:5000/img"), false);
    });
    test("the images pulled: every deployed image, the sandboxes' and the envs' included", () => {
        assert.deepEqual(
            pulledImages(k8sConfig()).map((i) => i.field),
            ["images.trainer", "images.nginx", "sandboxes.image"],
        );
        assert.deepEqual(
            pulledImages(dockerConfig()).map((i) => i.field),
            ["images.trainer", "images.nginx", "envs.coding.image"],
        );
    });
});

describe("preflight: Registry credentials", () => {
    test("no registryAuth: ok, naming each registry and who pulls from it", () => {
        assertFinding(
            checkRegistryCredentials(planOf(k8sConfig()), "kubernetes"),
            "ok",
            /^no registryAuth: the nodes' own credentials pull every image: registry\.test \(images\.trainer, sandboxes\.image\), docker\.io \(images\.nginx\) \(an image in a private registry needs registryAuth or node credentials\)$/,
        );
        assertFinding(
            checkRegistryCredentials(planOf(dockerConfig()), "docker"),
            "ok",
            /^no registryAuth: the Docker daemon pulls every image anonymously: registry\.test \(images\.trainer\), docker\.io \(images\.nginx\), ghcr\.io \(envs\.coding\.image\) \(an image in a private registry needs registryAuth\)$/,
        );
    });
    test("every image served: ok", () => {
        assertFinding(
            checkRegistryCredentials(planOf(k8sConfig(), ["registry.test", "https://index.docker.io/v1/"]), "kubernetes"),
            "ok",
            /^every image the stack pulls has a registryAuth entry: registry\.test \(images\.trainer, sandboxes\.image\), docker\.io \(images\.nginx\)$/,
        );
        assertFinding(checkRegistryCredentials(planOf(dockerConfig(), ["registry.test", "registry-1.docker.io", "ghcr.io"]), "docker"), "ok", /^every image/);
    });
    test("an image no entry serves, and an entry no image uses: a warning naming each", () => {
        const f = checkRegistryCredentials(planOf(k8sConfig(), ["registry.test", "ghcr.io"]), "kubernetes");
        assertFinding(
            f,
            "warn",
            /^no registryAuth entry serves images\.nginx \(nginxinc\/nginx-unprivileged:1\.27-alpine, registry docker\.io\): the nodes' own credentials pull it \(none are needed for a public image\); registryAuth entry "ghcr\.io" serves no image the stack pulls \(their registries: registry\.test, docker\.io\)$/,
            /^add an entry for docker\.io to registryAuth if images\.nginx is private; correct "ghcr\.io" to the registry of the image it is for, or remove it$/,
        );
        const docker = checkRegistryCredentials(planOf(dockerConfig(), ["registry-1.docker.io"]), "docker");
        assertFinding(
            docker,
            "warn",
            /^no registryAuth entry serves images\.trainer \(registry\.test\/agent-rl\/trainer:test, registry registry\.test\): the Docker daemon pulls it anonymously; no registryAuth entry serves envs\.coding\.image \(ghcr\.io\/huggingface\/openenv-coding-env:[^,]+, registry ghcr\.io\): the Docker daemon pulls it anonymously$/,
            /^add an entry for registry\.test to registryAuth if images\.trainer is private; add an entry for ghcr\.io to registryAuth if envs\.coding\.image is private$/,
        );
    });
    test("Docker: Hub credentials filed as docker login files them serve every Hub image (the stack passes them under registry-1.docker.io too)", () => {
        assertFinding(
            checkRegistryCredentials(planOf(dockerConfig(), ["registry.test", "ghcr.io", "https://index.docker.io/v1/"]), "docker"),
            "ok",
            /^every image the stack pulls has a registryAuth entry: registry\.test \(images\.trainer\), docker\.io \(images\.nginx\), ghcr\.io \(envs\.coding\.image\)$/,
        );
        assert.equal(checkRegistryCredentials(planOf(k8sConfig(), ["registry.test", "https://index.docker.io/v1/"]), "kubernetes").status, "ok");
    });
    test("Docker: Hub credentials under a key the provider reads no Hub credentials from serve no Hub pull; said once, with the fix", () => {
        const f = checkRegistryCredentials(planOf(dockerConfig(), ["registry.test", "ghcr.io", "https://index.docker.io"]), "docker");
        assertFinding(
            f,
            "warn",
            /^images\.nginx \(nginxinc\/nginx-unprivileged:[^)]+\) is on Docker Hub, and the Docker provider reads Docker Hub credentials under "https:\/\/index\.docker\.io\/v1\/", "index\.docker\.io", "docker\.io" \(or "registry-1\.docker\.io"\), not under "https:\/\/index\.docker\.io": the Docker daemon pulls it anonymously$/,
            /^file the Docker Hub credentials in registryAuth under auths\["https:\/\/index\.docker\.io\/v1\/"\] \(the key docker login writes\)$/,
        );
        assert.doesNotMatch(f.found, /serves no image/, "the Hub entry is explained once, not also called unused");
        // The same entries on Kubernetes serve every image.
        assert.equal(checkRegistryCredentials(planOf(k8sConfig(), ["registry.test", "https://index.docker.io"]), "kubernetes").status, "ok");
    });
    test("Docker: a Hub name with two slashes is looked up under its first part; the message says so", () => {
        const f = checkRegistryCredentials(planOf(dockerConfig({ images: { trainer: "team/sub/trainer:1" } }), ["registry-1.docker.io", "ghcr.io"]), "docker");
        assertFinding(
            f,
            "warn",
            /^no registryAuth entry serves images\.trainer \(team\/sub\/trainer:1, registry docker\.io \(the Docker provider looks it up under "team"\)\)/,
            /add an entry for team to registryAuth if images\.trainer is private/,
        );
    });
});

describe("the CLI's stack loading: registryAuth in the stack file", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-preflight-registry-"));
    after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const stackFile = (name: string, registryAuth: unknown) => {
        const file = path.join(dir, `Pulumi.${name}.yaml`);
        fs.writeFileSync(
            file,
            YAML.stringify({
                config: {
                    "agent-rl-infra:platform": {
                        recipe: "opencode-blackbox",
                        runId: "a-001",
                        images: { trainer: "registry.test/t:1" },
                        target: { kind: "kubernetes", context: "c" },
                        sandboxes: { image: "registry.test/s:1" },
                    },
                    "agent-rl-infra:registryAuth": registryAuth,
                },
            }),
        );
        const loaded = loadStack(name, file);
        assert.equal(loaded.kind, "run");
        return (loaded as Extract<typeof loaded, { kind: "run" }>).plan;
    };
    test("encrypted (pulumi config set --secret): the names are not read; a warning says so and how to check", () => {
        const plan = stackFile("enc", { secure: "v1:AAAA:encrypted" });
        assert.deepEqual(plan.registryAuth, []);
        assertFinding(
            checkRegistryCredentials(plan, "kubernetes"),
            "warn",
            /^registryAuth is set, but its registries are not known here \(a secret the stack file holds encrypted, not decrypted by the preflight\): which images it serves is unchecked; the stack pulls from registry\.test \(images\.trainer, sandboxes\.image\), docker\.io \(images\.nginx\)$/,
            /^run the program's preflight \(preflight: warn; pulumi preview\), which reads the decrypted registries, or compare by hand: pulumi config get registryAuth \| jq -r '\.auths \| keys\[\]'$/,
        );
        assert.equal(checkPullSecret(plan, {})?.status, "ok", "the pull Secret's check needs only its name");
    });
    test("in plain text: refused, naming the key and the command that encrypts it, never the value", () => {
        assert.throws(
            () => stackFile("plain", JSON.stringify({ auths: { "registry.test": { auth: "c2VjcmV0" } } })),
            (e: Error) =>
                e instanceof StackError &&
                /agent-rl-infra:registryAuth: the private-registry credentials .* holds it in plain text \(value not shown\).*pulumi config set --secret registryAuth/.test(
                    e.message,
                ) &&
                !e.message.includes("c2VjcmV0"),
        );
    });
});

describe("preflight: Pull Secret", () => {
    const auth = ["registry.test", "https://index.docker.io/v1/"];
    const plan = planOf(k8sConfig(), auth);
    const [training, ingress, sandboxes] = pullSecretNamespaces(plan);
    const name = plan.names.pullSecret;
    test("one in every namespace the stack makes", () => {
        assert.deepEqual(pullSecretNamespaces(plan), ["arl-pf-training", "arl-pf-ingress", "arl-pf-sandboxes"]);
        assert.equal(name, "arl-pf-registry-pull");
    });
    test("without registryAuth no Secret is made: no finding", () => {
        assert.equal(checkPullSecret(planOf(k8sConfig()), {}), undefined);
    });
    test("none there yet: ok; the stack's own from an earlier up: ok", () => {
        assertFinding(
            checkPullSecret(plan, {}),
            "ok",
            /^no Secret arl-pf-registry-pull in arl-pf-training, arl-pf-ingress, arl-pf-sandboxes yet: up creates it \(kubernetes\.io\/dockerconfigjson, from registryAuth\)$/,
        );
        assertFinding(
            checkPullSecret(plan, { [training!]: { type: "kubernetes.io/dockerconfigjson", partOf: "agent-rl-infra" } }),
            "ok",
            /no Secret arl-pf-registry-pull in arl-pf-ingress, arl-pf-sandboxes yet: .*; arl-pf-training\/arl-pf-registry-pull made by this project \(an earlier up\): up updates it$/,
        );
    });
    test("one the stack did not make (another type, no or another part-of label): fails, naming each and the fix", () => {
        const f = checkPullSecret(plan, {
            [training!]: { type: "Opaque", partOf: "" },
            [ingress!]: { type: "kubernetes.io/dockerconfigjson", partOf: "" },
            [sandboxes!]: { type: "kubernetes.io/dockerconfigjson", partOf: "other-tool" },
        });
        assertFinding(
            f,
            "fail",
            /^a Secret the stack did not make already holds the pull Secret's name: arl-pf-training\/arl-pf-registry-pull \(type Opaque, not kubernetes\.io\/dockerconfigjson, and a Secret's type cannot change; no app\.kubernetes\.io\/part-of label\), arl-pf-ingress\/arl-pf-registry-pull \(no app\.kubernetes\.io\/part-of label\), arl-pf-sandboxes\/arl-pf-registry-pull \(app\.kubernetes\.io\/part-of=other-tool\); up cannot create it there \(the Kubernetes provider refuses to create an object that exists\)$/,
            /^if nothing else uses it, delete it \(kubectl -n arl-pf-training delete secret arl-pf-registry-pull; kubectl -n arl-pf-ingress delete secret arl-pf-registry-pull; kubectl -n arl-pf-sandboxes delete secret arl-pf-registry-pull\); otherwise run the stack under another target\.namespacePrefix$/,
        );
    });
    test("the reader's fields: type and part-of through kubectl's jsonpath, never the data", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-pullsecret-"));
        after(() => fs.rmSync(dir, { recursive: true, force: true }));
        const SENTINEL = "c2VudGluZWwtcHVsbC10b2tlbg==";
        const read = (secret: object) => {
            const file = path.join(dir, "secret.json");
            fs.writeFileSync(file, JSON.stringify({ apiVersion: "v1", kind: "Secret", metadata: { name }, ...secret }));
            // kubectl --local prints the object as a server would send it, through the same template; no server involved.
            const r = spawnSync("kubectl", ["label", "--local", "-f", file, "probe=1", "-o", `jsonpath=${PULL_SECRET_FIELDS}`], { encoding: "utf8" });
            assert.equal(r.status, 0, r.stderr);
            assert.ok(!r.stdout.includes(SENTINEL), "no part of the data is printed");
            return parsePullSecretFields(r.stdout);
        };
        assert.deepEqual(
            read({
                type: "kubernetes.io/dockerconfigjson",
                metadata: { name, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
                data: { ".dockerconfigjson": SENTINEL },
            }),
            { type: "kubernetes.io/dockerconfigjson", partOf: "agent-rl-infra" },
        );
        assert.deepEqual(read({ type: "Opaque", data: { token: SENTINEL } }), { type: "Opaque", partOf: "" });
        assert.equal(parsePullSecretFields(""), undefined, "--ignore-not-found prints nothing for a missing Secret");
    });
});

describe("wired into both targets' checks", () => {
    const version = { gitVersion: "v1.36.3", major: "1", minor: "36" };
    const none = { ok: true as const, value: [] as any[] };
    const facts = (over: Partial<KubernetesFacts> = {}): KubernetesFacts => ({
        context: "ctx",
        kubeconfig: "/k",
        contexts: ["ctx"],
        version: { ok: true, value: version },
        nodes: none,
        storageClasses: none,
        priorityClasses: none,
        runtimeClasses: none,
        crds: none,
        sandboxControllers: none,
        jobSetControllers: none,
        daemonSets: none,
        dnsPods: { ok: true, value: 2 },
        namespaces: { ok: true, value: {} },
        ...over,
    });
    test("Kubernetes: registry credentials always; the pull Secret with registryAuth; an unreadable Secret is a warning", () => {
        const plan = planOf(k8sConfig(), ["registry.test"]);
        const f = checkKubernetes(plan, facts({ pullSecrets: { ok: true, value: {} } }));
        assert.equal(f.filter((x) => x.check === "Registry credentials").length, 1);
        assert.equal(f.find((x) => x.check === "Pull Secret")?.status, "ok");
        const forbidden = checkKubernetes(
            plan,
            facts({
                pullSecrets: { ok: false, error: 'secrets "arl-pf-registry-pull" is forbidden: User "dev" cannot get resource "secrets"', forbidden: true },
            }),
        );
        assertFinding(
            forbidden.find((x) => x.check === "Pull Secret"),
            "warn",
            /could not read secrets: secrets "arl-pf-registry-pull" is forbidden.*\(unchecked\)/,
            /credentials that may list secrets/,
        );
        assert.equal(
            checkKubernetes(planOf(k8sConfig()), facts()).some((x) => x.check === "Pull Secret"),
            false,
        );
    });
    test("Docker: registry credentials once the daemon answers", () => {
        const f = checkDocker(planOf(dockerConfig(), ["registry.test"]), {
            host: "unix:///x.sock",
            version: { ok: true, value: { version: "28.2.2", apiVersion: "1.50" } },
            info: { ok: false, error: "x" },
            containers: { ok: true, value: [] },
            disk: { unchecked: "x" },
        } satisfies DockerFacts);
        assert.equal(f.find((x) => x.check === "Registry credentials")?.status, "warn");
    });
});
