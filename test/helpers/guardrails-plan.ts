/**
 * What the guardrail tests plan: every stack in stacks/, every recipe on every target, and
 * the ingress exposure variants, through the real program (planToDir: index.ts under
 * Pulumi's mocks). Each test iterates over whatever the program registers, so new
 * components are covered as they land.
 *
 * Until the Platform wires the VllmIngress (platform.ts `buildIngress` throws "not built
 * yet"), black-box plans run with a stand-in `buildIngress` that does what the Platform
 * will do with the real component (resolveVllmIngress + new VllmIngress); the stand-in is
 * used only when the real program fails with exactly that error, and goes away by itself.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { RECIPE_NAMES } from "../../components/config";
import { resolveVllmIngress, VllmIngress } from "../../components/ingress";
import { Platform, type PlatformPlan } from "../../components/platform";
import type { PlatformSecrets } from "../../components/config";
import type { RecordedResource } from "../../scripts/lib/mockrun";
import { PlanError, planToDir, REPO_ROOT, type PlanOptions, type PlanResult, type PlanSource } from "../../scripts/lib/plan";
import type { LocalResource } from "../../policy/run-local";

export const STACKS = fs
    .readdirSync(path.join(REPO_ROOT, "stacks"))
    .filter((f) => /^Pulumi\..+\.yaml$/.test(f))
    .map((f) => f.slice("Pulumi.".length, -".yaml".length))
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

/** Every stack, every recipe x target, and the exposure variants of the black-box recipe on Kubernetes. */
export function allSources(targets: ReadonlyArray<"kubernetes" | "docker"> = ["kubernetes", "docker"]): GuardedSource[] {
    const out: GuardedSource[] = STACKS.map((stack) => ({ label: `stack ${stack}`, source: { stack } }));
    for (const recipe of RECIPE_NAMES) for (const target of targets) out.push({ label: `recipe ${recipe} on ${target}`, source: { recipe, target } });
    if (targets.includes("kubernetes")) {
        out.push({ label: "recipe opencode-blackbox on kubernetes, ingress exposure httproute", source: { recipe: "opencode-blackbox", target: "kubernetes" }, override: HTTPROUTE_OVERRIDE });
        out.push({ label: "recipe opencode-blackbox on kubernetes, ingress exposure loadbalancer", source: { recipe: "opencode-blackbox", target: "kubernetes" }, override: LOADBALANCER_OVERRIDE });
    }
    return out;
}

const NOT_WIRED = /VllmIngress component is not built yet/;

/** The Platform's ingress step as it will be wired: resolve, build the component, hand back the sandbox key. */
function standInBuildIngress(this: Platform, name: string, plan: PlatformPlan, secrets: PlatformSecrets): pulumi.Output<string> | undefined {
    if (!plan.config.ingress.enabled) return undefined;
    const description = resolveVllmIngress(plan.config, plan.names);
    const k8s = plan.config.target.kind === "kubernetes";
    const ingress = new VllmIngress(
        `${name}-ingress`,
        {
            description,
            suppliedKeys: secrets.ingressKeys,
            ...(k8s ? { namespace: this.namespaces.ingress } : { networks: { training: this.namespaces.training, sandboxes: this.namespaces.sandboxes } }),
        },
        { parent: this },
    );
    return ingress.sandboxKey;
}

export interface GuardedPlan {
    readonly result: PlanResult;
    /** Whether the stand-in ingress wiring was used (the Platform does not wire VllmIngress yet). */
    readonly standIn: boolean;
}

/** planToDir, falling back to the stand-in ingress wiring only while the Platform refuses black box. */
export async function planGuarded(source: PlanSource, opts: PlanOptions): Promise<GuardedPlan> {
    try {
        return { result: await planToDir(source, opts), standIn: false };
    } catch (e) {
        if (!(e instanceof PlanError) || !NOT_WIRED.test(e.message)) throw e;
    }
    return { result: await withStandInIngress(() => planToDir(source, opts)), standIn: true };
}

/** Runs `fn` with the stand-in ingress wiring in place of the Platform's "not built yet". */
export async function withStandInIngress<T>(fn: () => Promise<T>): Promise<T> {
    const proto = Platform.prototype as unknown as { buildIngress: unknown };
    const original = proto.buildIngress;
    proto.buildIngress = standInBuildIngress;
    try {
        return await fn();
    } finally {
        proto.buildIngress = original;
    }
}

/** Whether the real Platform still refuses black box (so a caller can say it used the stand-in). */
export function isNotWiredError(e: unknown): boolean {
    return e instanceof Error && NOT_WIRED.test(e.message);
}

const SECRET_SIG = "4dabf18193072939515e22adb298388d";

/** Inputs as @pulumi/policy hands them to a policy: plain JSON, secrets unwrapped, undefined dropped. */
export function sdkProps(v: any): any {
    if (v && typeof v === "object" && !Array.isArray(v) && v[SECRET_SIG] === "1b47061264138c4ac30d75fd1eb44270") return sdkProps(v.value);
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
