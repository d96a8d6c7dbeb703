// The stack program `pulumi up` runs. A cluster stack (config agent-rl-infra:cluster) builds
// what every run on the cluster shares; a run stack (agent-rl-infra:platform) parses its config,
// applies its cluster stack's outputs, checks it against what its last up made, builds the
// Platform and exports its outputs.
import { ClusterBase } from "./components/cluster";
import * as pulumi from "@pulumi/pulumi";
import { ALLOW_EXAMPLE_IMAGES_ENV, ConfigError, exampleImageProblems, loadClusterConfig, loadPlatformConfig, toRunError } from "./components/config";
import { preflightStep } from "./components/preflight";
import {
    checkAgainstPrevious,
    checkClusterIdentity,
    clusterProvider,
    Platform,
    resolvePlatform,
    targetProvider,
    withClusterStack,
} from "./components/platform";

export = async () => {
    const cluster = loadClusterConfig();
    if (cluster !== undefined) {
        const base = new ClusterBase("agentrl", { config: cluster }, { providers: [clusterProvider("agentrl", cluster)] });
        return { ...base.outputs };
    }
    const { config: written, secrets } = loadPlatformConfig();
    let plan: ReturnType<typeof resolvePlatform> | undefined;
    let provider: ReturnType<typeof targetProvider> | undefined;
    try {
        const config = await withClusterStack("agentrl", written);
        plan = resolvePlatform(config, { hfToken: secrets.hfToken !== undefined, registryAuth: secrets.registryAuth?.registries });
        // A real up never deploys the docs' example registry (plan.md and previews only warn);
        // the engine tests' harness, whose simulated pods pull nothing, sets the variable.
        if (!pulumi.runtime.isDryRun() && process.env[ALLOW_EXAMPLE_IMAGES_ENV] !== "1") {
            const refused = exampleImageProblems(config);
            if (refused.length > 0) throw new ConfigError(refused);
        }
        await preflightStep(config, plan);
        await checkAgainstPrevious("agentrl", config, plan.names);
        // The provider registers (it creates nothing in the cluster) so the identity check reads with the run's own credentials.
        provider = targetProvider("agentrl", plan.config, secrets.registryAuth);
        await checkClusterIdentity("agentrl", config, provider);
    } catch (e) {
        toRunError(e);
    }
    const platform = new Platform("agentrl", { plan, secrets }, { providers: [provider] });
    return platform.outputs;
};
