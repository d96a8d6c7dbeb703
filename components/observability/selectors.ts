/**
 * Which series are this stack's: the label matchers the alert rules and the dashboard both select by.
 */
import { STACK_SERIES_LABEL } from "../shared/metrics-pods";
import type { ObservedStack } from "./model";

export function sel(matchers: Readonly<Record<string, string>>): string {
    return `{${Object.entries(matchers)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(",")}}`;
}

/**
 * The matchers of one part's series of this stack: its namespace and the stack's label, since a
 * team's run stacks share the team's namespaces (docs/guides/platform-teams.md "Teams") and `namespace` alone would sum them.
 */
export function ownSeries(s: ObservedStack, part: keyof ObservedStack["namespaces"], extra: Readonly<Record<string, string>> = {}): string {
    return sel({ namespace: s.namespaces[part], [STACK_SERIES_LABEL]: s.stack, ...extra });
}

/** The templates of the stack's warm pools: the one pool's, or (Harbor) one per task image. */
export function poolTemplates(pool: NonNullable<ObservedStack["sandboxPool"]>): readonly string[] {
    return pool.templates ?? [pool.template];
}

/** Series of these templates (one: an equality matcher; several: one regex over their names, DNS labels with no regex metacharacter but '-'). */
export function templateSeries(templates: readonly string[], extra: Readonly<Record<string, string>> = {}): string {
    if (templates.length === 1) return sel({ sandbox_template: templates[0], ...extra });
    const rest = sel(extra).slice(1, -1);
    return `{sandbox_template=~${JSON.stringify(templates.join("|"))}${rest === "" ? "" : `,${rest}`}}`;
}

/** A warm pool's ready sandboxes (agent-sandbox's agent_sandboxes series). */
export const WARM_READY = { owned_by: "SandboxWarmPool", ready_condition: "true" } as const;

/** The label matchers selecting each part's series of this stack. */
export function selectors(s: ObservedStack) {
    return {
        training: ownSeries(s, "training"),
        ingress: ownSeries(s, "ingress"),
        envs: ownSeries(s, "envs"),
        warmPool: s.sandboxPool ? templateSeries(poolTemplates(s.sandboxPool), WARM_READY) : "",
        claims: s.sandboxPool ? templateSeries(poolTemplates(s.sandboxPool)) : "",
    };
}
