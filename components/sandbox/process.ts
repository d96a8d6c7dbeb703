/**
 * How a sandbox's agent process runs: a non-root uid on a read-only root
 * with three writable emptyDirs, and the env that points its caches at HOME and its
 * upstream at the forwarder. Pure.
 */
import { SANDBOX_HOME, SANDBOX_URL_ENV, type SandboxConfig, type SandboxSecurity } from "./model";

/** Working directory of every sandbox, writable. */
const WORKING_DIR = "/workspace";

/** Non-root, read-only root, every capability dropped; HOME, /workspace and /tmp writable. */
export function sandboxSecurity(s: SandboxConfig["sandboxes"]): SandboxSecurity {
    const home = SANDBOX_HOME;
    return {
        runAsUser: s.runAsUser,
        runAsGroup: s.runAsUser,
        fsGroup: s.runAsUser,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        dropCapabilities: ["ALL"],
        seccompProfile: "RuntimeDefault",
        home,
        workingDir: WORKING_DIR,
        writablePaths: [
            { name: "home", path: home, sizeLimit: "2Gi" },
            { name: "workspace", path: WORKING_DIR, sizeLimit: "4Gi" },
            { name: "tmp", path: "/tmp", sizeLimit: "1Gi" },
        ],
        terminationGraceSeconds: 5,
    };
}

/** Non-secret env of the agent's container: HOME and its caches, and where its upstream is. */
export function sandboxAgentEnv(agentUpstream: string): Record<string, string> {
    const home = SANDBOX_HOME;
    return {
        HOME: home,
        // Caches and user installs land under HOME, the only writable place besides /tmp and /workspace.
        XDG_CACHE_HOME: `${home}/.cache`,
        XDG_CONFIG_HOME: `${home}/.config`,
        XDG_DATA_HOME: `${home}/.local/share`,
        PYTHONUSERBASE: `${home}/.local`,
        [SANDBOX_URL_ENV]: agentUpstream,
    };
}
