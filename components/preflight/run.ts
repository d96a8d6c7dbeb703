/**
 * runPreflight: the one entry of the checks (the CLI's, and the program's opt-in step before any
 * resource registers: preflightStep). The CLI's stack loading is its own (scripts/lib/load-stack.ts), so the program
 * imports only what checks a target.
 */
import * as pulumi from "@pulumi/pulumi";
import type { ClusterConfig, PlatformConfig } from "../config";
import { resolvePlatform, type PlatformPlan } from "../platform";
import { checkDocker, type DockerReadOptions, readDocker } from "./docker";
import { checkClusterStack, checkKubernetes, type KubernetesReadOptions, readClusterStack, readKubernetes } from "./kubernetes";
import type { Finding, ReportHeader } from "./report";

export interface PreflightOptions extends KubernetesReadOptions, DockerReadOptions {
    /** The resolved plan, when the caller has it already (the program does). */
    readonly plan?: PlatformPlan;
}

export interface PreflightResult {
    readonly header: ReportHeader;
    readonly findings: readonly Finding[];
}

/** What the report names as the target. */
export function targetLabel(config: PlatformConfig): string {
    const t = config.target;
    if (t.kind === "docker") return `docker ${t.host}`;
    return `kubernetes context ${t.context ?? "(the kubeconfig's current context)"}${t.kubeconfig !== undefined ? `, kubeconfig ${t.kubeconfig}` : ""}`;
}

/** Checks the live target of `config`; never throws for what the target lacks (that is a finding). */
export async function runPreflight(config: PlatformConfig, opts: PreflightOptions = {}): Promise<PreflightResult> {
    // Secrets' presence only decides a config problem (hubRepoId without hfToken), not a target prerequisite.
    const plan = opts.plan ?? resolvePlatform(config, { hfToken: true });
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const findings =
        config.target.kind === "kubernetes"
            ? checkKubernetes(plan, await readKubernetes(plan, opts), Math.ceil(timeoutMs / 1000))
            : checkDocker(plan, await readDocker(plan, opts));
    return { header: { stack: config.stack, target: targetLabel(config) }, findings };
}

/** Checks the cluster a cluster stack (agent-rl-infra:cluster) points at: what its up needs, and what its run stacks will. */
export async function runClusterPreflight(stack: string, config: ClusterConfig, opts: KubernetesReadOptions = {}): Promise<PreflightResult> {
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const findings = checkClusterStack(config, await readClusterStack(config, opts), Math.ceil(timeoutMs / 1000));
    const t = config.target;
    return {
        header: { stack, target: `cluster stack, kubernetes context ${t.context}${t.kubeconfig !== undefined ? `, kubeconfig ${t.kubeconfig}` : ""}` },
        findings,
    };
}

/**
 * The program's preflight (config `preflight`): `warn` logs every failed or warned check as a
 * warning and goes on; `enforce` stops the up before any resource registers when a check fails,
 * naming each with its fix. `off` does nothing.
 */
export async function preflightStep(config: PlatformConfig, plan: PlatformPlan): Promise<void> {
    if (config.preflight === "off") return;
    const { findings } = await runPreflight(config, { plan });
    const line = (f: Finding) => `preflight ${f.status === "fail" ? "failed" : "warning"}: ${f.check}: ${f.found}${f.fix ? `; fix: ${f.fix}` : ""}`;
    const failed = findings.filter((f) => f.status === "fail");
    for (const f of findings.filter((x) => x.status === "warn" || (x.status === "fail" && config.preflight === "warn"))) pulumi.log.warn(line(f));
    if (config.preflight === "enforce" && failed.length > 0) {
        throw new pulumi.RunError(
            `preflight (preflight: enforce) found ${failed.length} missing prerequisite${failed.length === 1 ? "" : "s"}; nothing was created:\n${failed.map((f) => `  - ${f.check}: ${f.found}${f.fix ? `\n    fix: ${f.fix}` : ""}`).join("\n")}`,
        );
    }
}
