/**
 * Where the per-rollout key verifier runs (docs/design/rollout-keys.md, "Deployment"): its own
 * single-replica Deployment in the ingress namespace, with a Service every nginx replica asks.
 *
 * One process, because it holds the table of live keys: a revocation must reach every nginx replica,
 * and it does when they all ask the same process. A sidecar per nginx replica would hold a table per
 * replica (a key minted on one would be unknown to the others), and the trainer's pod cannot hold it
 * (a Job's regular sidecar keeps the Job from completing). Rendered on Kubernetes when the pool is
 * agent-sandbox (the only provider with a claim backend that mints and revokes); Docker pools have no
 * claim backend, hosted sandboxes (hf) no per-claim config. Pure; imports only the folder's model.
 */
import { takesRolloutKeys } from "../config/sandbox-providers";
import { dnsName, podLabels } from "../config/names";
import type { IngressConfig, IngressNames, IngressPeerPods } from "./model";

/** The verifier's listen ports (python/agent_rl_sandbox/rollout_keys.py DEFAULT_VERIFY_PORT / DEFAULT_ADMIN_PORT). */
export const VERIFIER_VERIFY_PORT = 7200;
export const VERIFIER_ADMIN_PORT = 7201;
/** Key of the admin key inside the verifier's Secret (and the file's name where it is mounted). */
export const VERIFIER_ADMIN_KEY_SECRET_KEY = "admin-key";
/**
 * Where the verifier's Secret is mounted read-only: the verifier reads its admin key from a file
 * (rollout_keys.py --admin-key-file), not an env var (checkov CKV_K8S_35: secrets as files, not env).
 */
export const VERIFIER_ADMIN_KEY_DIR = "/var/run/agent-rl/rollout-keys-admin";
/** Where the sandbox image keeps the verifier (python/Dockerfile, standard library only). */
export const VERIFIER_PATH = "/opt/agent-rl/rollout_keys.py";
/** Length of the generated admin key ([A-Za-z0-9], like the ingress keys; the verifier needs 16+). */
export const VERIFIER_ADMIN_KEY_LENGTH = 48;

const ADMIN_KEY_FILE = `${VERIFIER_ADMIN_KEY_DIR}/${VERIFIER_ADMIN_KEY_SECRET_KEY}`;
/**
 * Where the verifier keeps its table across restarts of its container (rollout_keys.py --state-file): an emptyDir,
 * which outlives a container restart (an OOM kill, a failed liveness probe) but not the pod. Digests, never keys.
 */
export const VERIFIER_STATE_DIR = "/var/run/agent-rl/rollout-keys-state";
const STATE_FILE = `${VERIFIER_STATE_DIR}/table.json`;

/** The verifier as rendered: image, command, ports, who reaches it, names. */
export interface RolloutKeyVerifier {
    /** The pool's sandbox image (python/Dockerfile puts rollout_keys.py at VERIFIER_PATH; the config requires it for agent-sandbox). */
    readonly image: string;
    /** The full command line (the admin key comes from a file, never a flag). */
    readonly command: readonly string[];
    readonly verifyPort: number;
    readonly adminPort: number;
    /** The admin key's file: the verifier's Secret mounted read-only at VERIFIER_ADMIN_KEY_DIR. */
    readonly adminKeyFile: string;
    /** host:port nginx asks (the Service's cluster DNS name): ProxySettings.rolloutKeyVerifier. */
    readonly verifyAddress: string;
    /** The admin URL the trainer mints and revokes at (SANDBOX_ROLLOUT_KEYS_URL). */
    readonly adminUrl: string;
    readonly podLabels: Readonly<Record<string, string>>;
    /** The trainer's pods: the only peer admitted on the admin port. */
    readonly trainer: IngressPeerPods;
    /** uid/gid of the sandbox image's user (python/Dockerfile USER 65532). */
    readonly runAsUser: number;
    readonly resources: {
        readonly requests: { readonly cpu: string; readonly memory: string };
        readonly limits: { readonly cpu: string; readonly memory: string };
    };
    readonly names: { readonly deployment: string; readonly service: string; readonly secret: string; readonly networkPolicy: string };
}

/** Whether the stack renders the verifier: Kubernetes with a pool whose forwarders take per-rollout keys (config/sandbox-providers.ts). */
export function rolloutKeysApply(config: IngressConfig): boolean {
    return config.target.kind === "kubernetes" && config.sandboxes !== undefined && takesRolloutKeys({ sandboxes: config.sandboxes });
}

/** The verifier of a stack where it applies, else undefined. */
export function rolloutKeyVerifier(config: IngressConfig, names: IngressNames): RolloutKeyVerifier | undefined {
    if (!rolloutKeysApply(config)) return undefined;
    const deployment = dnsName([names.ingress.deployment, "rollout-keys"]);
    const host = `${deployment}.${names.namespaces.ingress}.svc.cluster.local`;
    return {
        image: config.sandboxes?.image ?? "",
        command: [
            "python3",
            "-I",
            VERIFIER_PATH,
            "--verify-host",
            "0.0.0.0",
            "--verify-port",
            String(VERIFIER_VERIFY_PORT),
            // The trainer is another pod: the admin listener takes the pod IP, guarded by the admin key and the NetworkPolicy.
            "--admin-host",
            "0.0.0.0",
            "--admin-port",
            String(VERIFIER_ADMIN_PORT),
            "--admin-key-file",
            ADMIN_KEY_FILE,
            // A restarted verifier keeps the live rollouts (issue 56): a forwarder takes its key once, so none could be re-minted.
            "--state-file",
            STATE_FILE,
        ],
        verifyPort: VERIFIER_VERIFY_PORT,
        adminPort: VERIFIER_ADMIN_PORT,
        adminKeyFile: ADMIN_KEY_FILE,
        verifyAddress: `${host}:${VERIFIER_VERIFY_PORT}`,
        adminUrl: `http://${host}:${VERIFIER_ADMIN_PORT}`,
        podLabels: podLabels("rollout-keys", deployment),
        trainer: { namespace: names.namespaces.training, podLabels: podLabels("trainer", names.training.job), port: VERIFIER_ADMIN_PORT },
        runAsUser: 65532,
        // A table of at most 4096 hashes and two thread-per-request listeners: small.
        resources: { requests: { cpu: "50m", memory: "64Mi" }, limits: { cpu: "500m", memory: "128Mi" } },
        names: { deployment, service: deployment, secret: dnsName([deployment, "admin"]), networkPolicy: deployment },
    };
}
