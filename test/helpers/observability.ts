/**
 * Fixtures of the observability tests: stand-ins for the metrics programs (only their mounting and
 * the policies around them are under test where these are used; components/observability's own
 * tests run the real programs), and the stack's objects with observability on under Pulumi's mocks.
 */
import assert from "node:assert/strict";
import type { PlatformConfig } from "../../components/config";
import { Platform, resolvePlatform } from "../../components/platform";
import type { MetricsPrograms } from "../../components/shared/metrics-pods";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { parseWithTestImages } from "./config";
import { manifests } from "./manifests";

/** Stand-ins for the metrics programs, named as such. */
export const STAND_IN_PROGRAMS: MetricsPrograms = {
    vllmListener: { file: "vllm-metrics.conf", text: "# stand-in for vLLM's metrics-only nginx config\n" },
    ingressLog: { file: "ingress.mtail", text: "# stand-in for the ingress's mtail program\n" },
    sessionCounter: { file: "session_counter.py", text: "# stand-in for the session counter\n" },
};

/** A placeholder mtail image (never pulled). */
export const TEST_MTAIL_IMAGE = "registry.test/agent-rl/mtail:test";

/** What a stack writes to turn observability on (with the mtail image the ingress needs). */
export const OBSERVABILITY_ON = { observability: { enabled: true }, images: { mtail: TEST_MTAIL_IMAGE } } as const;

/** Every Kubernetes object the Platform registers for `config` (an update under the mocks), the metrics programs as given. */
export async function platformManifests(
    config: PlatformConfig,
    programs: MetricsPrograms | undefined = STAND_IN_PROGRAMS,
): Promise<Array<Record<string, any>>> {
    const run = await runUnderMocks(
        async () => {
            const platform = new Platform("agentrl", {
                plan: resolvePlatform(config, { hfToken: false }, { metricsPrograms: programs }),
                secrets: { ingressKeys: {} },
            });
            return { ...platform.outputs };
        },
        { stack: config.stack },
    );
    assert.equal(run.error, undefined, String(run.error));
    return manifests(run.resources);
}

/** The observability settings a Kubernetes black-box stack gets with observability on and every default (the rules' and dashboard's inputs). */
export function defaultObservabilitySettings(): PlatformConfig["observability"] {
    return parseWithTestImages({ recipe: "opencode-blackbox", runId: "run-001", target: { kind: "kubernetes", context: "test" }, ...OBSERVABILITY_ON }, "test")
        .observability;
}
