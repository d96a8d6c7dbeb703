/** Quota headroom: what the stack requests against the ResourceQuotas of its namespaces that exist. */
import type { PlatformPlan } from "../../platform";
import { fail, type Finding, human, ok, value } from "../report";
import type { NamespaceFacts } from "./facts";
import { addTo, merge, podTotals, type ResourceTotals, stackRequests } from "./needs";

const QUOTA_KEYS: Readonly<Record<string, string>> = {
    cpu: "requests.cpu",
    memory: "requests.memory",
    "requests.cpu": "requests.cpu",
    "requests.memory": "requests.memory",
    "limits.cpu": "limits.cpu",
    "limits.memory": "limits.memory",
    "ephemeral-storage": "requests.ephemeral-storage",
    "requests.ephemeral-storage": "requests.ephemeral-storage",
    "limits.ephemeral-storage": "limits.ephemeral-storage",
    pods: "pods",
    "count/pods": "pods",
    persistentvolumeclaims: "persistentvolumeclaims",
    "count/persistentvolumeclaims": "persistentvolumeclaims",
    "requests.storage": "requests.storage",
};

/**
 * Quota headroom in the stack's namespaces that already exist: for each ResourceQuota not the
 * stack's own, hard - used, plus what the stack already runs there (an `up` replaces it), must
 * hold what the stack requests.
 */
export function checkQuotas(plan: PlatformPlan, namespaces: Readonly<Record<string, NamespaceFacts | undefined>>): Finding {
    const check = "Quota headroom";
    const requests = stackRequests(plan);
    const gpu = plan.training.scheduling.gpuResourceName;
    const own = new Set([plan.sandboxes?.names.quota].filter((x): x is string => x !== undefined));
    const stackClaims = [plan.training.modelCache, plan.training.checkpoints].filter((v) => v !== undefined);
    const short: string[] = [];
    const checked: string[] = [];
    const absent: string[] = [];
    for (const [ns, want] of Object.entries(requests)) {
        const facts = namespaces[ns];
        if (!facts) {
            absent.push(ns);
            continue;
        }
        // What this stack already holds there comes back when `up` replaces it.
        const held: ResourceTotals = {};
        for (const p of facts.stackPods) merge(held, podTotals(p.spec ?? {}, gpu));
        for (const v of stackClaims) {
            if (facts.claims.includes(v.name) && ns === plan.training.namespace) {
                addTo(held, "persistentvolumeclaims", 1);
                addTo(held, "requests.storage", v.size);
            }
        }
        for (const q of facts.quotas) {
            if (own.has(q.metadata?.name)) continue;
            checked.push(`${ns}/${q.metadata.name}`);
            for (const [key, hard] of Object.entries<string>(q.status?.hard ?? q.spec?.hard ?? {})) {
                const as = QUOTA_KEYS[key] ?? (key === `requests.${gpu}` ? key : undefined);
                if (as === undefined || want[as] === undefined) continue;
                const used = value(q.status?.used?.[key] ?? "0");
                const free = value(hard) - used + value(held[as] ?? "0");
                const need = value(want[as]);
                if (need > free + 1e-9) {
                    short.push(
                        `${ns} quota ${q.metadata.name} ${key}: the stack needs ${human(as, need)}, ${human(as, Math.max(0, free))} free (hard ${hard}, used ${q.status?.used?.[key] ?? "0"})`,
                    );
                }
            }
        }
    }
    const notYet = absent.length > 0 ? `; ${absent.join(", ")} do${absent.length === 1 ? "es" : ""} not exist yet (no quota)` : "";
    if (short.length > 0) {
        return fail(
            check,
            `${short.join("; ")}${notYet}`,
            "raise the quota (kubectl -n <namespace> edit resourcequota <name>) or lower what the stack requests (replicas, cpu/memory, sandboxes.poolSize)",
        );
    }
    if (checked.length === 0) return ok(check, `no ResourceQuota in the stack's existing namespaces${notYet}`);
    return ok(check, `the stack fits ${checked.join(", ")}${notYet}`);
}
