/**
 * Runs the pack's policies over plain resources the way @pulumi/policy's analyzer does
 * (server.ts makeAnalyzeRpcFun / makeAnalyzeStackRpcFun): the same `args` shape (type,
 * props, urn, name, opts, isType/asType, getConfig, notApplicable), the same enforcement
 * resolution under a policy-pack config, "disabled" policies skipped. For the project's
 * tests and offline plans, where no Pulumi CLI runs the pack.
 */
import type {
    EnforcementLevel,
    Policies,
    PolicyPackConfig,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
} from "@pulumi/policy";
import { effectiveEnforcement, policies as packPolicies } from "./policies";

/** A resource as the engine would describe it to the pack. */
export interface LocalResource {
    /** Pulumi type token, e.g. `kubernetes:core/v1:Service`. */
    readonly type: string;
    /** Logical name. */
    readonly name: string;
    /** Inputs (resource policies) = outputs (stack policies) under mocks. */
    readonly props: Record<string, any>;
    /** @default a URN made from project, stack, type and name */
    readonly urn?: string;
}

export interface LocalViolation {
    readonly policy: string;
    readonly enforcementLevel: EnforcementLevel;
    readonly message: string;
    readonly urn?: string;
    readonly resourceName?: string;
}

class NotApplicable extends Error {}

const OPTS: PolicyResourceOptions = {
    protect: false,
    ignoreChanges: [],
    aliases: [],
    customTimeouts: { createSeconds: 0, updateSeconds: 0, deleteSeconds: 0 },
    additionalSecretOutputs: [],
};

function urnOf(r: LocalResource, stack: string): string {
    return r.urn ?? `urn:pulumi:${stack}::agent-rl-infra::${r.type}::${r.name}`;
}

function typeOf(resourceClass: unknown): string | undefined {
    return (resourceClass as { __pulumiType?: string }).__pulumiType;
}

/** Settings of one policy in a pack config, without its enforcement level (what `args.getConfig()` returns). */
function policyConfig(config: PolicyPackConfig, name: string): Record<string, unknown> {
    const c = config[name];
    if (typeof c !== "object" || c === null) return {};
    const { enforcementLevel: _level, ...rest } = c as Record<string, unknown>;
    return rest;
}

/** Every violation the policies report for `resources` (resource policies per resource, then stack policies). */
export async function runPolicies(
    resources: readonly LocalResource[],
    opts: { readonly config?: PolicyPackConfig; readonly policies?: Policies; readonly stack?: string } = {},
): Promise<LocalViolation[]> {
    const config = opts.config ?? {};
    const stack = opts.stack ?? "local";
    const out: LocalViolation[] = [];
    const stackTags = new Map<string, string>();
    const notApplicable = (reason?: string): never => {
        throw new NotApplicable(reason);
    };
    for (const p of opts.policies ?? packPolicies) {
        const level = effectiveEnforcement(p, config);
        if (level === "disabled") continue;
        const getConfig = <T extends object>() => policyConfig(config, p.name) as T;
        const validate = (p as ResourceValidationPolicy).validateResource;
        if (validate) {
            const validations = Array.isArray(validate) ? validate : [validate];
            for (const r of resources) {
                const urn = urnOf(r, stack);
                const args: ResourceValidationArgs = {
                    type: r.type,
                    props: r.props,
                    urn,
                    name: r.name,
                    opts: OPTS,
                    stackTags,
                    isType: (cls) => typeOf(cls) === r.type,
                    asType: ((cls: unknown) => (typeOf(cls) === r.type ? r.props : undefined)) as ResourceValidationArgs["asType"],
                    getConfig,
                    notApplicable,
                };
                for (const v of validations) {
                    try {
                        await v(args, (message) => out.push({ policy: p.name, enforcementLevel: level, message, urn, resourceName: r.name }));
                    } catch (e) {
                        if (!(e instanceof NotApplicable)) throw e;
                    }
                }
            }
        }
        const validateStack = (p as StackValidationPolicy).validateStack;
        if (validateStack) {
            const policyResources: PolicyResource[] = resources.map((r) => ({
                type: r.type,
                props: r.props,
                urn: urnOf(r, stack),
                name: r.name,
                opts: OPTS,
                dependencies: [],
                propertyDependencies: {},
                isType: (cls) => typeOf(cls) === r.type,
                asType: ((cls: unknown) => (typeOf(cls) === r.type ? r.props : undefined)) as PolicyResource["asType"],
            }));
            const args: StackValidationArgs = { resources: policyResources, stackTags, getConfig, notApplicable };
            try {
                await validateStack(args, (message, urn) => out.push({ policy: p.name, enforcementLevel: level, message, urn }));
            } catch (e) {
                if (!(e instanceof NotApplicable)) throw e;
            }
        }
    }
    return out;
}
