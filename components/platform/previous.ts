/**
 * What this stack's last successful `up` exported, read back before anything registers, for
 * the checks that compare a config with what already exists (claimChangeProblems). Read through
 * a StackReference to the stack itself: the engine hands back the outputs of the last
 * completed update (empty on the first up; `destroy` clears them).
 */
import * as pulumi from "@pulumi/pulumi";
import { claimChangeProblems, ConfigError, type ClaimRecords, type PlatformConfig, type PlatformNames } from "../config";

/** The stack output that records the claims (Platform.outputs.claims). */
export const CLAIMS_OUTPUT = "claims";

/** The claims the last `up` of this stack recorded; undefined when none (first up, after destroy). */
export async function previousClaims(name: string): Promise<ClaimRecords | undefined> {
    const self = new pulumi.StackReference(`${name}-previous`, { name: `${pulumi.getOrganization()}/${pulumi.getProject()}/${pulumi.getStack()}` });
    const details = await self.getOutputDetails(CLAIMS_OUTPUT);
    return (details.value ?? details.secretValue) as ClaimRecords | undefined;
}

/**
 * Throws a ConfigError naming every change of an existing claim that Kubernetes would refuse
 * half way (its class, a smaller size). Kubernetes stacks only: Docker's volumes are host
 * directories with neither.
 */
export async function checkAgainstPrevious(name: string, config: PlatformConfig, names: PlatformNames): Promise<void> {
    if (config.target.kind !== "kubernetes") return;
    const problems = claimChangeProblems(await previousClaims(name), config, names);
    if (problems.length > 0) throw new ConfigError(problems);
}
