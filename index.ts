// The stack program `pulumi up` runs: parse config, check it against what the stack's last up
// made, build the Platform, export outputs.
import { loadPlatformConfig, toRunError } from "./components/config";
import { checkAgainstPrevious, Platform, resolvePlatform, targetProvider } from "./components/platform";

export = async () => {
    const { config, secrets } = loadPlatformConfig();
    let plan: ReturnType<typeof resolvePlatform> | undefined;
    try {
        plan = resolvePlatform(config, { hfToken: secrets.hfToken !== undefined });
        await checkAgainstPrevious("agentrl", config, plan.names);
    } catch (e) {
        toRunError(e);
    }
    const platform = new Platform("agentrl", { plan, secrets }, { providers: [targetProvider("agentrl", config)] });
    return platform.outputs;
};
