/**
 * What the config knows of each sandbox provider (`sandboxes.provider`): one record per name, data only. The
 * config's checks and defaults and every component read these records (or the predicates below), never the
 * provider's name; the sandbox component's table (components/sandbox/providers/index.ts) adds what each renders.
 * Adding a provider is a name in terms.ts SANDBOX_PROVIDER_NAMES, a record here and a module there: the
 * compiler lists what is missing.
 */
import type { Layout, SandboxProviderName, TargetKind } from "./terms";
import type { PlatformConfig } from "./types";

/**
 * The docker sandbox pool ran the stock image's `sleep`: no runtime served in it and no sandbox backend drove it, so a
 * black-box run on it would open no sandbox. And a Docker trainer reaches containers by `docker exec` only, so it
 * could not read the forwarder's trace: it would train on the in-sandbox capture proxy's, which runs as the agent's
 * uid (docs/design/sandbox-trust.md). Refused, and nothing of it is rendered, until a backend reads the forwarder's record.
 */
export const DOCKER_BLACKBOX_REFUSED =
    "sandboxes.provider: the docker sandbox pool (the default for layout blackbox on the docker target) is refused: no sandbox backend drives it, and a Docker trainer could not read the forwarder's trace, so it would train on the in-sandbox capture proxy's, which the agent's uid can rewrite. Use a Kubernetes target (provider agent-sandbox, the default there: the forwarder holds the key and records the trace out of the agent's reach)";

/**
 * Hosted sandboxes run OpenEnv's capture proxy as the agent's uid, with the ingress key in its environment: the agent
 * can read the key and rewrite, replace or invent the token ids and logprobs the trainer trains on
 * (docs/design/sandbox-trust.md; python/tests/test_hosted_sandbox.py runs those attacks against the hosted layout).
 * Nothing outside a hosted sandbox records the trace, so a black box on hf is refused, with no override. A white box
 * may still run its model's code on a hosted env server (envs.<name>.external): the trainer generates and holds the
 * trace there and hands no key to the env (test/config/hosted-whitebox.test.ts).
 */
export const HOSTED_BLACKBOX_REFUSED =
    "sandboxes.provider: hosted (hf) sandboxes are refused for the black box: OpenEnv's capture proxy records the token ids and logprobs as the agent's own uid, which can rewrite them, kill the proxy and answer on its port, and read the shared ingress key from its environment (a key to the public ingress, usable from anywhere until rotated), and nothing outside the sandbox records the trace. Use a Kubernetes target with provider agent-sandbox: the forwarder, under another uid, records the trace and holds a per-rollout key out of the agent's reach. (A white-box recipe may run its model's code on a hosted env server, envs.<name>.external: the trainer holds the trace there and no key goes to the env.)";

/** A warm pool of sandboxes run by a controller on the cluster: what the stack installs, sizes and checks for it. */
export interface SandboxPoolFacts {
    /** The controller whose CRDs (SandboxTemplate, SandboxWarmPool, SandboxClaim) the pool is made of. */
    readonly controller: "agent-sandbox";
    /** Whether each claim's forwarder takes a per-rollout key from the trainer (a claim marks a rollout's start and end). */
    readonly rolloutKeys: boolean;
}

/** What the predicates read of a config: its provider's name. */
export type ProviderOf = { readonly sandboxes: { readonly provider: SandboxProviderName } };

/** What the config knows of one provider. */
export interface SandboxProviderRecord {
    /** The layouts it serves: the black box's sandboxes, or none at all (the white boxes run the model's code in env servers). */
    readonly layouts: "blackbox" | "not-blackbox";
    /** The one target it runs on, and what a stack on the other is told; absent: any target. */
    readonly target?: { readonly kind: TargetKind; readonly elsewhere: string };
    /** Why a black box on its target may not use it (the message names the fix); absent: usable. */
    readonly refused?: string;
    /** The warm pool it runs; absent: nothing is deployed for sandboxes. */
    readonly pool?: SandboxPoolFacts;
    /** `sandboxes.image` when unset: "" (required: validate.ts says so where a pool needs it) or a public image. */
    readonly defaultImage: "required" | "stock";
}

/** One record per provider name: the compiler fails when a name lacks one. */
export const SANDBOX_PROVIDER_RECORDS = {
    "agent-sandbox": {
        layouts: "blackbox",
        target: {
            kind: "kubernetes",
            elsewhere:
                "sandboxes.provider: agent-sandbox runs on Kubernetes, but the target is docker: use a Kubernetes target (the docker sandbox pool and hosted sandboxes, provider hf, are refused for the black box)",
        },
        pool: { controller: "agent-sandbox", rolloutKeys: true },
        defaultImage: "required",
    },
    docker: {
        layouts: "blackbox",
        target: { kind: "docker", elsewhere: "sandboxes.provider: the docker sandbox pool needs the docker target: on Kubernetes use agent-sandbox" },
        refused: DOCKER_BLACKBOX_REFUSED,
        defaultImage: "stock",
    },
    hf: { layouts: "blackbox", refused: HOSTED_BLACKBOX_REFUSED, defaultImage: "stock" },
    none: { layouts: "not-blackbox", defaultImage: "stock" },
} as const satisfies { readonly [P in SandboxProviderName]: SandboxProviderRecord };

/** The provider a stack gets when it names none: agent-sandbox for a black box on Kubernetes, docker (refused) on Docker, else none. */
export function defaultSandboxProvider(layout: Layout, target: TargetKind): SandboxProviderName {
    if (layout !== "blackbox") return "none";
    return target === "kubernetes" ? "agent-sandbox" : "docker";
}

/** The record of the stack's provider. */
export function sandboxProviderRecord(c: ProviderOf): SandboxProviderRecord {
    const records: { readonly [P in SandboxProviderName]: SandboxProviderRecord } = SANDBOX_PROVIDER_RECORDS;
    return records[c.sandboxes.provider];
}

/**
 * The warm pool the stack runs, or undefined: none for the white boxes, and none for a provider the config refuses
 * (so a refused provider renders nothing even where a test skips the refusal).
 */
export function sandboxPoolOf(c: ProviderOf): SandboxPoolFacts | undefined {
    const r = sandboxProviderRecord(c);
    return r.refused === undefined ? r.pool : undefined;
}

/** Whether the stack runs a warm pool (the sandboxes namespace, its quota, claims, the controller's CRDs). */
export function runsSandboxPool(c: ProviderOf): boolean {
    return sandboxPoolOf(c) !== undefined;
}

/** Whether the pool's forwarders take a per-rollout key from the trainer, which the ingress's verifier then checks. */
export function takesRolloutKeys(c: ProviderOf): boolean {
    return sandboxPoolOf(c)?.rolloutKeys === true;
}

/** What the config check says of the provider: every problem at once, each naming the field and the fix. */
export function sandboxProviderProblems(c: PlatformConfig): string[] {
    const r = sandboxProviderRecord(c);
    const blackbox = c.training.layout === "blackbox";
    const onItsTarget = r.target === undefined || r.target.kind === c.target.kind;
    const problems: string[] = [];
    if (blackbox && r.layouts !== "blackbox") {
        problems.push(
            `sandboxes.provider: the black-box layout runs one sandbox per in-flight rollout: ${c.target.kind === "kubernetes" ? "set provider to agent-sandbox" : "use a Kubernetes target (provider agent-sandbox; the docker sandbox pool and hosted sandboxes are refused for the black box)"}`,
        );
    }
    if (blackbox && onItsTarget && r.refused !== undefined) problems.push(r.refused);
    if (!blackbox && r.layouts === "blackbox") {
        problems.push(
            `sandboxes.provider: only the black-box layout uses sandboxes (layout is ${c.training.layout}): remove sandboxes.provider or set it to none`,
        );
    }
    if (!onItsTarget && r.target !== undefined) problems.push(r.target.elsewhere);
    return problems;
}

/**
 * The refusal again, for a config that skipped the config check (a library user's own PlatformConfig): a refused
 * provider renders nothing, so the Platform stops with its reason rather than half a black box.
 */
export function refusedProviderProblems(c: ProviderOf & Pick<PlatformConfig, "training">): string[] {
    const refused = sandboxProviderRecord(c).refused;
    return c.training.layout === "blackbox" && refused !== undefined ? [refused] : [];
}
