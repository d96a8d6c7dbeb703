/**
 * Runs a Pulumi program under Pulumi's official mock runtime (`pulumi.runtime.setMocks`)
 * and records every resource the program registers, with the inputs it sends to the
 * engine. Providers do not run: no auto-naming, no awaiting, no diffs. Used by the offline
 * plan (`npm run plan`) and by the tests.
 */
import * as pulumi from "@pulumi/pulumi";
import { ALLOW_EXAMPLE_IMAGES_ENV } from "../../components/config/validate";

/** One resource the program asked the engine to create. */
export interface RecordedResource {
    /** Type token, e.g. `kubernetes:batch/v1:Job`. */
    readonly type: string;
    /** Pulumi logical name. */
    readonly name: string;
    /** Inputs as the engine would receive them (a secret value arrives wrapped in Pulumi's secret signature object). */
    readonly inputs: Record<string, any>;
    /** Whether it is a custom (provider-managed) resource rather than a component. */
    readonly custom: boolean;
    /** Provider reference, when one was set. */
    readonly provider?: string;
    /** The customTimeouts resource option, when one was set (what the engine hands the provider). */
    readonly customTimeouts?: { readonly create?: string; readonly update?: string; readonly delete?: string };
}

export interface MockRunOptions {
    /** Pulumi project name. @default "agent-rl-infra" */
    readonly project?: string;
    /** Stack name. */
    readonly stack: string;
    /** Run as a preview (unknown outputs) instead of an update. @default false */
    readonly preview?: boolean;
    /** Config map, keys fully qualified (`agent-rl-infra:platform`), values as strings. */
    readonly config?: Record<string, string>;
    /** Keys of `config` that are secrets. */
    readonly secretKeys?: readonly string[];
    /**
     * Outputs of the stack's last update, as a StackReference to the stack itself reads them
     * (the program reads its own previous outputs). Such reads are not recorded as resources.
     * @default {} (a stack never updated)
     */
    readonly previousOutputs?: Record<string, unknown>;
    /** Outputs of other stacks a StackReference may read, by full name (`<org>/<project>/<stack>`); any other reference fails the run. @default {} */
    readonly stackOutputs?: Readonly<Record<string, Record<string, unknown>>>;
    /**
     * Run the program as a real `up` would judge images in the example registry (refused). The offline
     * plan and the mock tests never pull an image, so they allow them. @default false
     */
    readonly refuseExampleImages?: boolean;
    /** State of objects the program reads (Resource.get), by `<type>::<id>`; any other read gets empty state. @default {} */
    readonly reads?: Readonly<Record<string, Record<string, unknown>>>;
    /** Function tokens the program may call; any other call fails the run. @default [] */
    readonly allowedCalls?: Readonly<Record<string, (inputs: any) => Record<string, any>>>;
}

export interface MockRunResult {
    readonly resources: RecordedResource[];
    /** Stack outputs, resolved (secret outputs unwrapped: only for tests, never printed). */
    readonly outputs: Record<string, unknown> | undefined;
    /** Names of stack outputs that are secret. */
    readonly secretOutputs: string[];
    /** The error the program ended with, if any. */
    readonly error?: unknown;
}

const STACK_REFERENCE = "pulumi:pulumi:StackReference";

/** Whether a recorded input value is a Pulumi secret: the mock monitor hands it over as `{ [specialSigKey]: specialSecretSig, value }` (@pulumi/pulumi runtime/rpc.ts). */
export function isSecret(v: unknown): v is { value: unknown } {
    return v !== null && typeof v === "object" && (v as Record<string, unknown>)[pulumi.runtime.specialSigKey] === pulumi.runtime.specialSecretSig;
}

/** A recorded input with every secret wrapper replaced by its value: what the provider receives. */
export function unwrapSecrets(v: any): any {
    if (isSecret(v)) return unwrapSecrets(v.value);
    if (Array.isArray(v)) return v.map(unwrapSecrets);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unwrapSecrets(x)]));
    return v;
}

/** State a mocked provider would return: the inputs, plus what real providers compute. */
function mockState(type: string, name: string, inputs: Record<string, any>): Record<string, any> {
    if (type.startsWith("random:index/random")) {
        // A stand-in for the generated value: deterministic, recognisable, never a real key.
        return { ...inputs, result: `mock-random-${name}` };
    }
    return { ...inputs };
}

/**
 * Runs `program` (the same function `pulumi up` runs) under mocks and returns what it
 * registered. The runs are sequential: Pulumi's runtime state is process-global.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a Pulumi program may return nothing (a callback that returns void)
export async function runUnderMocks(program: () => Promise<Record<string, unknown> | void>, opts: MockRunOptions): Promise<MockRunResult> {
    const resources: RecordedResource[] = [];
    // Resource options the mock's newResource does not see, taken from the registration request.
    const timeouts = new Map<string, RecordedResource["customTimeouts"]>();
    const project = opts.project ?? "agent-rl-infra";
    // index.ts refuses the example registry on a real up; nothing here pulls an image.
    if (opts.refuseExampleImages === true) delete process.env[ALLOW_EXAMPLE_IMAGES_ENV];
    else process.env[ALLOW_EXAMPLE_IMAGES_ENV] = "1";
    pulumi.runtime.setAllConfig(opts.config ?? {}, [...(opts.secretKeys ?? [])]);
    await pulumi.runtime.setMocks(
        {
            newResource(args: pulumi.runtime.MockResourceArgs): { id: string | undefined; state: Record<string, any> } {
                if (args.type === STACK_REFERENCE) {
                    const self = `${pulumi.getOrganization()}/${project}/${opts.stack}`;
                    const served = args.inputs.name === self ? (opts.previousOutputs ?? {}) : opts.stackOutputs?.[args.inputs.name];
                    if (served === undefined)
                        throw new Error(
                            `unexpected StackReference to ${args.inputs.name}: served are the stack itself (${self}) and ${Object.keys(opts.stackOutputs ?? {}).join(", ") || "no other"}`,
                        );
                    return { id: args.inputs.name, state: { name: args.inputs.name, outputs: served, secretOutputNames: [] } };
                }
                // A read of an existing object (Resource.get): nothing is created; the offline plan reads no
                // cluster, so the object's state is empty unless a test serves it.
                if (args.id !== undefined && args.id !== "") return { id: args.id, state: opts.reads?.[`${args.type}::${args.id}`] ?? {} };
                const customTimeouts = timeouts.get(`${args.type}::${args.name}`);
                resources.push({
                    type: args.type,
                    name: args.name,
                    inputs: args.inputs,
                    custom: args.custom ?? true,
                    provider: args.provider,
                    ...(customTimeouts ? { customTimeouts } : {}),
                });
                return { id: opts.preview ? undefined : `${args.name}-id`, state: mockState(args.type, args.name, args.inputs) };
            },
            call(args: pulumi.runtime.MockCallArgs): Record<string, any> {
                const handler = opts.allowedCalls?.[args.token];
                if (!handler) throw new Error(`unexpected call to ${args.token}: the program must not invoke provider functions`);
                return handler(args.inputs);
            },
        },
        project,
        opts.stack,
        opts.preview ?? false,
        // The organization the self-managed backend reports (a StackReference's name starts with it).
        "organization",
    );
    const monitor = (pulumi.runtime as any).getMonitor();
    const register = monitor.registerResource.bind(monitor);
    monitor.registerResource = (req: any, callback: unknown) => {
        const t = req.getCustomtimeouts?.();
        const set = (v: string | undefined) => (v ? v : undefined);
        if (t && (t.getCreate() || t.getUpdate() || t.getDelete())) {
            timeouts.set(`${req.getType()}::${req.getName()}`, { create: set(t.getCreate()), update: set(t.getUpdate()), delete: set(t.getDelete()) });
        }
        return register(req, callback);
    };
    let error: unknown;
    // A failing program rejects promises Pulumi's runtime does not await (the stack's
    // outputs, pending registrations); collect them here instead of crashing the process.
    const stray: unknown[] = [];
    const onStray = (e: unknown) => stray.push(e);
    process.on("unhandledRejection", onStray);
    let outputs: Record<string, unknown> | undefined;
    const secretOutputs: string[] = [];
    try {
        let raw: Record<string, unknown> = {};
        await pulumi.runtime.runInPulumiStack(async () => {
            // The program's own error is kept here rather than thrown into the stack, which
            // would reject promises Pulumi's runtime leaves unawaited outside the CLI.
            try {
                raw = (await program()) ?? {};
            } catch (e) {
                error = e;
            }
            return raw;
        });
        if (error !== undefined) throw error;
        outputs = {};
        for (const [k, v] of Object.entries(raw)) {
            if (pulumi.Output.isInstance(v)) {
                if (await (v as any).isSecret) secretOutputs.push(k);
                outputs[k] = await (v as any).promise(true);
            } else {
                outputs[k] = v;
            }
        }
        // Let every registration still in flight reach the mock monitor.
        await (pulumi.runtime as any).waitForRPCs?.();
    } catch (e) {
        error = e;
        await (pulumi.runtime as any).waitForRPCs?.().catch(() => undefined);
    }
    // Give rejected registrations one turn to surface, then stop listening.
    await new Promise((r) => setTimeout(r, error === undefined ? 0 : 50));
    process.off("unhandledRejection", onStray);
    if (error === undefined && stray.length > 0) error = stray[0];
    return { resources, outputs, secretOutputs, error };
}
