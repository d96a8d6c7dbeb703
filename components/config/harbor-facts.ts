/**
 * What the Harbor path takes from upstream, as data with its source: the agents the trial code runs,
 * and the directories a Harbor trial writes in its sandbox. Imports nothing (schema.ts,
 * harbor.ts and the sandbox pool read it).
 */

/**
 * The Harbor agents the trial code runs: `python/agent_rl_sandbox/harbor_trial.py` `AGENTS` wires each
 * (its install step replaced by a check of the pool's image, its CLI's offline env), and its CLI refuses
 * any other name ("invalid choice") at each rollout, after the model has loaded. `harbor.agent` takes
 * these only. Each is one openenv 0.10.0 rates `status="validated"` (`openenv/harbor/seams.py` `SEAMS`).
 * `python/agent_rl_sandbox/harbor_checks.py` `HARBOR_AGENTS` is the same list (the trial code imports it;
 * test/sandbox/harbor-recipe.test.ts holds the two equal).
 */
export const HARBOR_AGENTS = ["opencode", "mini-swe-agent"] as const;
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
/**
 * Harbor sends usage telemetry unless this is "0" (harbor 0.25.0 and 0.26.0 `harbor/telemetry.py`:
 * `TELEMETRY_ENV`, `_DISABLED_VALUES`); the trainer's Harbor trials inherit the trainer's env.
 */
export const HARBOR_TELEMETRY_ENV = "HARBOR_TELEMETRY";
/** The pod label telling a Harbor pool's sandboxes apart (its task image's key). */
export const HARBOR_TASK_LABEL = "agentrl.dev/harbor-task";
