/**
 * Private-registry credentials (the registryAuth stack secret): the config edge's checks, a
 * kubernetes.io/dockerconfigjson Secret in every namespace the stack makes, referenced by every pod
 * spec (sandbox template and JobSet pods included) and the trainer's ServiceAccount; Docker: the
 * provider's registryAuth for every registry the config.json names, and Docker Hub credentials filed
 * as `docker login` files them under every host the provider looks Hub images up under. The value
 * never reaches a file the offline plan writes.
 * Run: node --import tsx --test test/platform/registry-auth.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { checkRegistryAuth, dockerProviderAddresses } from "../../components/config";
import { dockerProviderKey, dockerProviderRegistry } from "../../components/preflight/registry";
import { planToDir } from "../../scripts/lib/plan";
import { isSecret, sentAsSecret, unwrapSecrets } from "../helpers/secrets";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-pull-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const SENTINEL = "U0VOVElORUwtUFVMTC11c2VyOnRva2VuLTRjOWU="; // base64 of a sentinel user:token
const DOCKER_CONFIG = JSON.stringify({ auths: { "registry.internal.example": { auth: SENTINEL }, "ghcr.io": { auth: SENTINEL } } });

/** Every pod spec a manifest renders (workloads, JobSet replicated jobs, agent-sandbox templates). */
function podSpecs(m: Record<string, any>): Array<Record<string, any>> {
    if (["Deployment", "StatefulSet", "Job"].includes(m.kind)) return [m.spec.template.spec];
    if (m.kind === "JobSet") return m.spec.replicatedJobs.map((r: any) => r.template.spec.template.spec);
    if (m.kind === "SandboxTemplate") return [m.spec.podTemplate.spec];
    return [];
}

/** Every file under `dir`. */
const walk = (d: string): string[] =>
    fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(d, e.name)) : [path.join(d, e.name)]));

describe("registryAuth: the config edge", () => {
    test("each bad value is refused naming the key and the fix, never the value", () => {
        const cases: Array<[string, RegExp]> = [
            [`not json ${SENTINEL}`, /^registryAuth: not JSON \(value not shown\): set it to a Docker config\.json/],
            [JSON.stringify({ credsStore: "desktop" }), /^registryAuth: has no "auths" object naming at least one registry \(value not shown\)/],
            [
                JSON.stringify({ auths: { "ghcr.io": {} } }),
                /^registryAuth: auths\["ghcr\.io"\] holds no credentials \(no auth, username\/password or identitytoken; value not shown\)/,
            ],
        ];
        for (const [value, re] of cases) {
            const { problems } = checkRegistryAuth(value);
            assert.equal(problems.length, 1, value);
            assert.match(problems[0], re);
            assert.ok(!problems[0].includes(SENTINEL), "the message shows no part of the value");
            assert.match(problems[0], /pulumi config set --secret registryAuth/);
        }
        assert.deepEqual(checkRegistryAuth(DOCKER_CONFIG), { problems: [], registries: ["registry.internal.example", "ghcr.io"] });
        assert.deepEqual(checkRegistryAuth(undefined), { problems: [], registries: [] });
    });

    test("a bad value stops the plan before anything registers", async () => {
        await assert.rejects(
            planToDir({ recipe: "mbpp-whitebox", target: "kubernetes" }, { outDir: path.join(tmp, "bad"), secrets: { registryAuth: "{}" } }),
            /registryAuth: has no "auths" object/,
        );
    });
});

describe("registryAuth on Kubernetes: a pull Secret in every namespace, referenced by every pod", () => {
    for (const recipe of ["opencode-blackbox", "opencode-blackbox-32b", "mbpp-whitebox"]) {
        test(`${recipe}`, async () => {
            const outDir = path.join(tmp, `k8s-${recipe}`);
            const result = await planToDir({ recipe, target: "kubernetes" }, { outDir, secrets: { registryAuth: DOCKER_CONFIG } });
            const namespaces = result.manifests.filter((m) => m.kind === "Namespace").map((m) => m.metadata.name);
            assert.ok(namespaces.length >= 2);
            const pull = result.manifests.filter((m) => m.kind === "Secret" && m.type === "kubernetes.io/dockerconfigjson");
            assert.deepEqual(pull.map((s) => s.metadata.namespace).sort(), [...namespaces].sort(), "one pull Secret per namespace the stack makes");
            const name = pull[0].metadata.name;
            assert.ok(pull.every((s) => s.metadata.name === name));
            // Sent to the provider as a secret holding the config.json.
            const recorded = result.resources.filter(
                (r) => r.type === "kubernetes:core/v1:Secret" && unwrapSecrets(r.inputs).type === "kubernetes.io/dockerconfigjson",
            );
            assert.equal(recorded.length, namespaces.length);
            for (const r of recorded) {
                assert.ok(sentAsSecret(r.inputs, ["stringData", ".dockerconfigjson"]), "the dockerconfigjson is a secret output");
                assert.equal(unwrapSecrets(r.inputs).stringData[".dockerconfigjson"], DOCKER_CONFIG);
            }
            const specs = result.manifests.flatMap((m) => podSpecs(m).map((spec) => ({ m, spec })));
            assert.ok(specs.length >= 3, `${recipe}: pods rendered`);
            for (const { m, spec } of specs) assert.deepEqual(spec.imagePullSecrets, [{ name }], `${m.kind} ${m.metadata.name}`);
            for (const sa of result.manifests.filter((m) => m.kind === "ServiceAccount")) assert.deepEqual(sa.imagePullSecrets, [{ name }], sa.metadata.name);
            if (recipe === "opencode-blackbox")
                assert.ok(
                    specs.some(({ m }) => m.kind === "SandboxTemplate"),
                    "the sandbox template pulls with it",
                );
            if (recipe === "opencode-blackbox-32b")
                assert.ok(
                    specs.some(({ m }) => m.kind === "JobSet"),
                    "the JobSet's pods pull with it",
                );
            // Nothing the plan writes holds the credentials; plan.md says where they went.
            for (const f of walk(outDir)) assert.ok(!fs.readFileSync(f, "utf8").includes(SENTINEL), `${f} holds the credentials`);
            const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
            assert.match(
                md,
                new RegExp(
                    `Registry credentials \\(registryAuth, a secret\\): the pull Secret \`${name}\` \\(kubernetes\\.io/dockerconfigjson\\) in each of the ${namespaces.length} namespaces`,
                ),
            );
        });
    }

    test("without registryAuth no pod names a pull Secret (node credentials only, as before)", async () => {
        const result = await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir: path.join(tmp, "k8s-none") });
        assert.equal(result.manifests.filter((m) => m.kind === "Secret" && m.type === "kubernetes.io/dockerconfigjson").length, 0);
        for (const m of result.manifests) for (const spec of podSpecs(m)) assert.equal(spec.imagePullSecrets, undefined, `${m.kind} ${m.metadata.name}`);
    });
});

describe("registryAuth on Docker: the provider pulls every image with it", () => {
    // A white box with vLLM as a server of its own: trainer, vLLM and env images (Docker runs no black box: it is refused).
    const WHITEBOX_SERVER = { training: { layout: "whitebox-server", gpusOnNode: 2 } };
    test("one registryAuth entry per registry the config.json names, its content a secret", async () => {
        const outDir = path.join(tmp, "docker");
        const result = await planToDir(
            { recipe: "mbpp-whitebox", target: "docker" },
            { outDir, secrets: { registryAuth: DOCKER_CONFIG }, platformOverride: WHITEBOX_SERVER },
        );
        const provider = result.resources.find((r) => r.type === "pulumi:providers:docker");
        assert.ok(provider, "the Docker provider is registered");
        // Provider inputs travel JSON-encoded; the whole list is a secret since its content is one.
        const auth = provider.inputs.registryAuth;
        assert.ok(isSecret(auth), "registryAuth is sent as a secret");
        const unwrapped = unwrapSecrets(auth);
        const plain = (typeof unwrapped === "string" ? JSON.parse(unwrapped) : unwrapped) as Array<{ address: string; configFileContent: string }>;
        assert.deepEqual(
            plain.map((e) => e.address),
            ["registry.internal.example", "ghcr.io"],
        );
        assert.ok(plain.every((e) => e.configFileContent === DOCKER_CONFIG));
        // Every image the stack pulls goes through that provider.
        const images = result.resources.filter((r) => r.type === "docker:index/remoteImage:RemoteImage");
        assert.ok(images.length >= 3);
        for (const f of walk(outDir)) assert.ok(!fs.readFileSync(f, "utf8").includes(SENTINEL), `${f} holds the credentials`);
        assert.match(
            fs.readFileSync(path.join(outDir, "plan.md"), "utf8"),
            /Registry credentials \(registryAuth, a secret\): the Docker provider's registryAuth for registry\.internal\.example, ghcr\.io/,
        );
    });
    test("Docker Hub credentials under https://index.docker.io/v1/ (what docker login writes) are passed under every Hub pull host", async () => {
        // terraform-provider-docker v4 files an entry under its address's host and looks a pull up by the
        // image's exact host: registry-1.docker.io for `vllm/vllm-openai`, never index.docker.io.
        const hub = JSON.stringify({ auths: { "ghcr.io": { auth: SENTINEL }, "https://index.docker.io/v1/": { auth: SENTINEL } } });
        const outDir = path.join(tmp, "docker-hub");
        const result = await planToDir(
            { recipe: "mbpp-whitebox", target: "docker" },
            { outDir, secrets: { registryAuth: hub }, platformOverride: WHITEBOX_SERVER },
        );
        const provider = result.resources.find((r) => r.type === "pulumi:providers:docker");
        assert.ok(provider && isSecret(provider.inputs.registryAuth), "registryAuth is sent as a secret");
        const unwrapped = unwrapSecrets(provider.inputs.registryAuth);
        const plain = (typeof unwrapped === "string" ? JSON.parse(unwrapped) : unwrapped) as Array<{ address: string; configFileContent: string }>;
        assert.deepEqual(
            plain.map((e) => e.address),
            ["ghcr.io", "https://index.docker.io/v1/", "registry-1.docker.io", "docker.io"],
        );
        assert.ok(
            plain.every((e) => e.configFileContent === hub),
            "each reads the same config.json",
        );
        // Every Docker Hub image the stack pulls has an entry filed under the host the provider looks it up under.
        const hubImages = result.resources
            .filter((r) => r.type === "docker:index/remoteImage:RemoteImage")
            .map((r) => unwrapSecrets(r.inputs).name as string)
            .filter((image) => dockerProviderRegistry(image) === "registry-1.docker.io");
        // The env router's nginx (the white box's vLLM runs from the trainer image, not vllm/vllm-openai).
        assert.ok(hubImages.length >= 1, `Docker Hub images pulled: ${hubImages.join(", ")}`);
        const hosts = plain.map((e) => dockerProviderKey(e.address));
        for (const image of hubImages) assert.ok(hosts.includes(dockerProviderRegistry(image)), image);
        for (const f of walk(outDir)) assert.ok(!fs.readFileSync(f, "utf8").includes(SENTINEL), `${f} holds the credentials`);
        assert.match(
            fs.readFileSync(path.join(outDir, "plan.md"), "utf8"),
            /the Docker provider's registryAuth for ghcr\.io, https:\/\/index\.docker\.io\/v1\/, registry-1\.docker\.io, docker\.io,/,
        );
    });
    test("Hub pull hosts are added only for a Hub key the provider reads, and only those not named already", () => {
        assert.deepEqual(dockerProviderAddresses(["ghcr.io"]), ["ghcr.io"]);
        assert.deepEqual(dockerProviderAddresses(["docker.io", "registry-1.docker.io"]), ["docker.io", "registry-1.docker.io", "index.docker.io"]);
        assert.deepEqual(dockerProviderAddresses(["index.docker.io"]), ["index.docker.io", "registry-1.docker.io", "docker.io"]);
        assert.deepEqual(dockerProviderAddresses(["https://index.docker.io"]), ["https://index.docker.io"], "a key the provider reads no Hub credentials from");
    });
});
