/**
 * What the Harbor path takes from upstream, as data with its source: the harnesses openenv rates as
 * validated, and the directories a Harbor trial writes in its sandbox. Imports nothing (schema.ts,
 * harbor.ts and the sandbox pool read it).
 */

/**
 * The harnesses openenv 0.10.0 rates `status="validated"` in `openenv/harbor/seams.py` (`SEAMS`): an
 * end-to-end run passed its capture contract and the ATIF cross-check. `harbor.agent` takes these only.
 */
export const HARBOR_AGENTS = [
    "opencode",
    "pi",
    "claude-code",
    "codex",
    "gemini-cli",
    "terminus-2",
    "mini-swe-agent",
    "qwen-coder",
    "vibe",
    "openhands-sdk",
] as const;
export type HarborAgent = (typeof HARBOR_AGENTS)[number];

/** A directory a Harbor trial writes in its sandbox, which the pool's read-only root must offer writable. */
export interface HarborSandboxDir {
    /** The emptyDir's volume name in the SandboxTemplate. */
    readonly name: string;
    readonly path: string;
    readonly sizeLimit: string;
    /** What Harbor writes there (harbor 0.25.0). */
    readonly why: string;
}

/**
 * harbor 0.25.0 `harbor/models/trial/paths.py` `EnvironmentPaths` (`/logs` with `agent/`, `verifier/`,
 * `artifacts/`; `/tests`; `/solution`) and `harbor/agents/installed/base.py` `BaseInstalledAgent.setup()`
 * (`mkdir -p /installed-agent`, where installed agents put their run scripts and homes). An emptyDir
 * hides what the image holds at that path, so a task image keeps its pre-installed agent elsewhere.
 */
export const HARBOR_SANDBOX_DIRS: readonly HarborSandboxDir[] = [
    { name: "harbor-logs", path: "/logs", sizeLimit: "1Gi", why: "the agent's, the verifier's (reward.txt / reward.json) and the artifacts' logs" },
    { name: "harbor-tests", path: "/tests", sizeLimit: "1Gi", why: "the task's tests, copied in by the verifier after the agent ran" },
    { name: "harbor-solution", path: "/solution", sizeLimit: "1Gi", why: "the task's solution, copied in by the oracle agent" },
    { name: "harbor-installed-agent", path: "/installed-agent", sizeLimit: "2Gi", why: "the installed agents' run scripts and homes" },
];

/**
 * Most task images (warm pools) one run declares: each is a SandboxTemplate and a SandboxWarmPool of
 * its own, and each pool holds a whole burst warm, so the pods grow with the count.
 */
export const MAX_TASK_IMAGES = 32;

/** The trainer's env var naming one warm pool per task image (python/agent_rl_sandbox/harbor_checks.py TASK_POOLS_ENV). */
export const TASK_POOLS_ENV = "SANDBOX_TASK_POOLS";
/** The trainer's env var naming the Harbor agent (harbor.agent) the training program runs. */
export const HARBOR_AGENT_ENV = "HARBOR_AGENT";
/** The pod label telling a Harbor pool's sandboxes apart (its task image's key). */
export const HARBOR_TASK_LABEL = "agentrl.dev/harbor-task";
