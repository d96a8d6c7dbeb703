export { Platform, POD_SECURITY, type PlatformArgs } from "./platform";
export { resolvePlatform, type PlatformPlan } from "./resolve";
export { checkAgainstPrevious, previousClaims, CLAIMS_OUTPUT } from "./previous";
export { targetProvider } from "./providers";
