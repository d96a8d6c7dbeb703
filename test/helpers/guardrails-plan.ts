/**
 * What the guardrail tests plan: every stack in stacks/, every recipe on every target, and
 * the ingress exposure variants, through the real program (planToDir: index.ts under
 * Pulumi's mocks). Each test iterates over whatever the program registers, so new
 * components are covered as they land.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { RECIPE_NAMES, RECIPES } from "../../components/config";
import type { RecordedResource } from "../../scripts/lib/mockrun";
import { isClusterStack, planToDir, REPO_ROOT, type PlanOptions, type PlanResult, type PlanSource } from "../../scripts/lib/plan";
import type { LocalResource } from "../../policy/run-local";
import { isSecret } from "./secrets";

export const STACKS = fs
    .readdirSync(path.join(REPO_ROOT, "stacks"))
    .filter((f) => /^Pulumi\..+\.yaml$/.test(f))
    .map((f) => f.slice("Pulumi.".length, -".yaml".length))
    // Run stacks: the cluster stack's objects have their own strict-schema and policy test (cluster-stack.test.ts).
    .filter((stack) => !isClusterStack({ stack }))
    .sort();

/** The ingress exposed through a Gateway API HTTPRoute (TLS ends at the Gateway). */
export const HTTPROUTE_OVERRIDE = { ingress: { exposure: "httproute", host: "vllm.example.com", gateway: { name: "gw", namespace: "gateway-system" } } };
/** The ingress exposed through a LoadBalancer (TLS at the proxy, from a Secret). */
export const LOADBALANCER_OVERRIDE = { ingress: { exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "vllm-tls" } } };

export interface GuardedSource {
    readonly label: string;
    readonly source: PlanSource;
    readonly override?: Record<string, unknown>;
}

/**
 * Every stack, every recipe x target, and the exposure variants of the black-box recipe on Kubernetes. A black-box
 * recipe on Docker has no plan: the docker sandbox pool and hosted sandboxes are both refused for the black box
 * (config DOCKER_BLACKBOX_REFUSED, HOSTED_BLACKBOX_REFUSED; test/stack/plan.test.ts checks the refusal).
 */
export function allSources(targets: ReadonlyArray<"kubernetes" | "docker"> = ["kubernetes", "docker"]): GuardedSource[] {
    const out: GuardedSource[] = STACKS.map((stack) => ({ label: `stack ${stack}`, source: { stack } }));
    for (const recipe of RECIPE_NAMES)
        for (const target of targets) {
            if (target === "docker" && RECIPES[recipe].training.layout === "blackbox") continue;
            out.push({ label: `recipe ${recipe} on ${target}`, source: { recipe, target } });
        }
    if (targets.includes("kubernetes")) {
        out.push({
            label: "recipe opencode-blackbox on kubernetes, ingress exposure httproute",
            source: { recipe: "opencode-blackbox", target: "kubernetes" },
            override: HTTPROUTE_OVERRIDE,
        });
        out.push({
            label: "recipe opencode-blackbox on kubernetes, ingress exposure loadbalancer",
            source: { recipe: "opencode-blackbox", target: "kubernetes" },
            override: LOADBALANCER_OVERRIDE,
        });
    }
    return out;
}

export interface GuardedPlan {
    readonly result: PlanResult;
}

/** planToDir for a guardrail source. */
export async function planGuarded(source: PlanSource, opts: PlanOptions): Promise<GuardedPlan> {
    return { result: await planToDir(source, opts) };
}

/** Inputs as @pulumi/policy hands them to a policy: plain JSON, secrets unwrapped, undefined dropped. */
export function sdkProps(v: any): any {
    if (isSecret(v)) return sdkProps(v.value);
    if (Array.isArray(v)) return v.map(sdkProps);
    if (v && typeof v === "object") {
        const out: Record<string, unknown> = {};
        for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = sdkProps(x);
        return out;
    }
    return v;
}

/** The recorded resources as the policy pack sees them (custom resources; components carry no props). */
export function policyResources(resources: readonly RecordedResource[]): LocalResource[] {
    return resources.filter((r) => r.custom && r.type !== "pulumi:pulumi:Stack").map((r) => ({ type: r.type, name: r.name, props: sdkProps(r.inputs) }));
}

/** A fresh temp dir removed at exit. */
export function tempDir(prefix: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
    return dir;
}
