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

/** The label matchers selecting each part's series of this stack. */
export function selectors(s: ObservedStack) {
    return {
        training: ownSeries(s, "training"),
        ingress: ownSeries(s, "ingress"),
        envs: ownSeries(s, "envs"),
        warmPool: s.sandboxPool ? sel({ sandbox_template: s.sandboxPool.template, owned_by: "SandboxWarmPool", ready_condition: "true" }) : "",
        claims: s.sandboxPool ? sel({ sandbox_template: s.sandboxPool.template }) : "",
    };
}
