/**
 * The preflight: every prerequisite a stack's live target must have, each with what was found
 * and the fix. `runPreflight(config)` is the one entry (the CLI's, scripts/preflight.ts, and the
 * program's opt-in step before any resource registers, preflightStep): it resolves the plan (the
 * same pure phase the program runs), reads the target, and returns the findings. One file per
 * group of checks: docker.ts, kubernetes/ (connection, nodes, checkpoints, addons, ingress, dns,
 * pull-secret, quota, and the reader), registry.ts (registryAuth against the images, both
 * targets), report.ts (findings and how they are shown).
 */
export { checkDocker, readDocker, type DockerFacts } from "./docker";
export { checkKubernetes, readKubernetes, kubernetesNeeds, stackRequests, type KubernetesFacts } from "./kubernetes";
export { checkRegistryCredentials, parseImage, pulledImages } from "./registry";
export { exitCodeOf, renderJson, renderTable, summarize, type Finding, type ReportHeader, type Status } from "./report";
export { runPreflight, runClusterPreflight, targetLabel, preflightStep, type PreflightOptions, type PreflightResult } from "./run";
