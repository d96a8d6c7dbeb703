/**
 * Test harness: runs a program or a component under Pulumi's mocks, as an update and as a
 * preview, records every registered resource, and fails on any unexpected provider call.
 */
import { runUnderMocks, type MockRunOptions, type MockRunResult, type RecordedResource } from "../../scripts/lib/mockrun";
import { unwrapSecrets } from "./secrets";

export type { RecordedResource, MockRunResult };

/** Runs `build` twice (update, then preview) and returns both runs; throws if either errored. */
export async function runBoth(
    // biome-ignore lint/suspicious/noConfusingVoidType: a Pulumi program may return nothing (a callback that returns void)
    build: () => Promise<Record<string, unknown> | void> | Record<string, unknown> | void,
    opts: Partial<MockRunOptions> = {},
): Promise<{ update: MockRunResult; preview: MockRunResult }> {
    const program = async () => (await build()) ?? {};
    const update = await runUnderMocks(program, { stack: "test", ...opts, preview: false });
    if (update.error) throw update.error;
    const preview = await runUnderMocks(program, { stack: "test", ...opts, preview: true });
    if (preview.error) throw preview.error;
    return { update, preview };
}

/** Resources of one type token. */
export function ofType(resources: readonly RecordedResource[], type: string): RecordedResource[] {
    return resources.filter((r) => r.type === type);
}

/** The one resource of a type (fails if not exactly one). */
export function single(resources: readonly RecordedResource[], type: string): RecordedResource {
    const found = ofType(resources, type);
    if (found.length !== 1) throw new Error(`expected exactly one ${type}, found ${found.length}: ${found.map((r) => r.name).join(", ")}`);
    return found[0];
}

/** A docker.Container's env ("NAME=value" list, secrets unwrapped) as a map. */
export function dockerEnv(container: RecordedResource): Record<string, string> {
    const envs = unwrapSecrets(container.inputs.envs) as string[];
    return Object.fromEntries(envs.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
}
