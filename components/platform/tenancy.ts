/**
 * A run in a team's namespaces (target.team) against the team's quotas, before anything registers:
 * what this run alone requests at once, beside the quota the cluster stack set. Runs of the team
 * share the quota, so a run that fits alone may still wait for another's pods (Kubernetes refuses
 * the pods over the quota: "exceeded quota"); one that cannot fit even alone is refused here.
 */
import type { PlatformConfig } from "../config/types";
import { quantityValue } from "../shared/quantity";
import type { SandboxDescription } from "../sandbox";

/** GPUs the run's pods request at once: the trainer on each node and vLLM (on its own node with nodes > 1). */
export function runGpus(t: PlatformConfig["training"]): number {
    return t.nodes > 1 ? t.trainerGpus * t.nodes + t.vllmGpus : t.vllmGpus + t.trainerGpus;
}

/** Every quota of the run's team this run alone exceeds, each with the fix. */
export function tenantQuotaProblems(config: PlatformConfig, sandboxes: SandboxDescription | undefined): string[] {
    const tenant = config.cluster?.tenant;
    if (tenant === undefined || config.target.kind !== "kubernetes") return [];
    const team = config.target.team;
    const problems: string[] = [];
    const over = (role: string, what: string, limit: number | string, need: number | string, fix: string) =>
        problems.push(
            `target.team: team '${team}''s ${role} quota allows ${what} ${limit} at once, and this run alone requests ${need}: ${fix}, or raise teams.${team}.quotas.${role} in the cluster stack '${config.clusterStack}'`,
        );
    const training = tenant.quotas.training;
    const gpus = runGpus(config.training);
    if (training?.gpus !== undefined && gpus > training.gpus)
        over("training", `${config.target.gpuResourceName}`, training.gpus, gpus, "lower training.vllmGpus / trainerGpus / nodes");
    const pool = tenant.quotas.sandboxes;
    if (sandboxes !== undefined && pool !== undefined) {
        const q = sandboxes.quota;
        // The Harbor path holds a warm pool per task image: fewer images is a fix too.
        const harbor = sandboxes.pools.filter((p) => p.taskKey !== undefined).length;
        const fix =
            (sandboxes.pools.some((p) => p.autoscale !== undefined)
                ? "lower sandboxes.autoscale.maxPoolSize (the quota counts the autoscaler's maximum) / poolSize / headroom / cpu / memory"
                : "lower sandboxes.poolSize / headroom / cpu / memory") +
            (harbor > 0 ? `, or list fewer harbor.taskImages (${harbor} warm pools of ${sandboxes.poolSize} each)` : "");
        if (pool.pods !== undefined && q.pods > pool.pods) over("sandboxes", "pods", pool.pods, q.pods, fix);
        if (pool.cpu !== undefined && quantityValue(q.cpu) > quantityValue(pool.cpu)) over("sandboxes", "requests.cpu", pool.cpu, q.cpu, fix);
        if (pool.memory !== undefined && quantityValue(q.memory) > quantityValue(pool.memory)) over("sandboxes", "requests.memory", pool.memory, q.memory, fix);
    }
    return problems;
}
