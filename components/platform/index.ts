export { Platform, POD_SECURITY, type PlatformArgs } from "./platform";
export { resolvePlatform, type PlatformPlan } from "./resolve";
export { targetProvider } from "./providers";
