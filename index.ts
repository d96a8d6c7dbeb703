// The stack program `pulumi up` runs: parse config, build the Platform, export outputs.
import { loadPlatformConfig, toRunError } from "./components/config";
import { Platform, resolvePlatform, targetProvider } from "./components/platform";

export = async () => {
    const { config, secrets } = loadPlatformConfig();
    let plan: ReturnType<typeof resolvePlatform> | undefined;
    try {
        plan = resolvePlatform(config, { hfToken: secrets.hfToken !== undefined });
    } catch (e) {
        toRunError(e);
    }
    const platform = new Platform("agentrl", { plan, secrets }, { providers: [targetProvider("agentrl", config)] });
    return platform.outputs;
};
