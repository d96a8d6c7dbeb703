/**
 * The cluster stack's preflight: what `pulumi up` of a cluster stack (agent-rl-infra:cluster)
 * needs from the cluster, and what its run stacks will need that it does not install. The API
 * server answers at a version the stack needs; agent-sandbox is installed by the stack
 * (agentSandbox.install: its CRDs should not be there from elsewhere) or must be there already;
 * the certIssuer it names exists; JobSet and Kueue, unless this stack installs them (jobSet.install,
 * kueue.install), are reported for the run stacks that need them (training.nodes > 1, target.kueueQueue).
 */
import type { ClusterConfig } from "../../config";
import { fail, type Finding, ok, warn } from "../report";
import { checkJobSet, checkSandboxController, checkSandboxCrds, crdProblems, KUEUE_INSTALL, preV1SandboxMarks, sandboxMigrationFix } from "./addons";
import { checkConnection, checkVersion } from "./connection";
import type { ConnectionFacts } from "./facts";
import {
    CERT_MANAGER_CERTIFICATES_CRD,
    CERT_MANAGER_MANIFEST_URL,
    JOBSET_CRD,
    JOBSET_RELEASE,
    KUEUE_LOCALQUEUE_CRD,
    KUEUE_RELEASE,
    SANDBOX_CONTROLLER_LABEL,
    sandboxCrdExpectations,
} from "./needs";
import { connect, type KubernetesReadOptions } from "./read";
import type { Read } from "../report";

export interface ClusterStackFacts extends ConnectionFacts {
    /** The CRDs of clusterStackCrds that exist. */
    readonly crds: Read<readonly any[]>;
    /** Deployments labelled as the agent-sandbox controller (read when the stack does not install it). */
    readonly sandboxControllers: Read<readonly any[]>;
    /** The certIssuer's ClusterIssuer (undefined: not found, or not read). */
    readonly issuer?: Read<any | undefined>;
}

/** The CRDs the checks read: agent-sandbox's, JobSet's, Kueue's, and cert-manager's with a certIssuer. */
export function clusterStackCrds(config: ClusterConfig): string[] {
    const issuer = config.certIssuer;
    return [
        ...sandboxCrdExpectations(undefined).map((e) => e.name),
        JOBSET_CRD,
        KUEUE_LOCALQUEUE_CRD,
        ...(issuer ? [CERT_MANAGER_CERTIFICATES_CRD, `${issuer.kind === "Issuer" ? "issuers" : "clusterissuers"}.cert-manager.io`] : []),
    ];
}

const unreadable = (check: string, r: { error: string }) =>
    warn(check, `could not read it: ${r.error.split("\n")[0]} (unchecked)`, "run it again with credentials that may read it");

/** Every cluster-stack finding; only the connection when the API server did not answer. */
export function checkClusterStack(config: ClusterConfig, f: ClusterStackFacts, timeoutSeconds = 10): Finding[] {
    const conn = checkConnection(f, timeoutSeconds);
    if (!f.version.ok) return [conn];
    const out: Finding[] = [conn, checkVersion(f.version.value)];
    if (!f.crds.ok) return [...out, unreadable("CRDs", f.crds)];
    const crds = f.crds.value;
    const sandboxCrds = sandboxCrdExpectations(undefined).map((e) => e.name);
    const present = sandboxCrds.filter((n) => crds.some((c) => c.metadata?.name === n));
    // Objects stored as a version v1.0 dropped: the API server refuses the v1.0 CRDs this stack applies.
    const storedOld = crds.filter((c) => sandboxCrds.includes(c.metadata?.name) && preV1SandboxMarks(c).some((m) => m.includes(" has objects stored as ")));
    if (config.agentSandbox.install && storedOld.length > 0) {
        out.push(
            fail(
                "agent-sandbox",
                `an agent-sandbox release before v1.0 is installed: ${storedOld.flatMap(preV1SandboxMarks).join("; ")}`,
                sandboxMigrationFix(true),
            ),
        );
    } else if (config.agentSandbox.install) {
        out.push(
            present.length === 0
                ? ok("agent-sandbox", "not installed yet: this stack installs it (agentSandbox.install)")
                : warn(
                      "agent-sandbox",
                      `${present.join(", ")} already exist: agent-sandbox is installed from elsewhere, and this stack (agentSandbox.install) would take it over (and remove it on destroy)`,
                      "set agentSandbox.install false to use the installed one, or remove it first",
                  ),
        );
    } else {
        out.push(checkSandboxCrds(undefined, crds));
        out.push(f.sandboxControllers.ok ? checkSandboxController(f.sandboxControllers.value) : unreadable("agent-sandbox controller", f.sandboxControllers));
    }
    const jobSet = checkJobSet(crds);
    out.push(
        config.jobSet.install
            ? ok("JobSet", `this stack installs JobSet ${JOBSET_RELEASE} (jobSet.install, ${config.jobSet.manifest})`)
            : jobSet.status === "ok"
              ? jobSet
              : warn(
                    "JobSet",
                    `${jobSet.found.replace(/: training\.nodes > 1 runs the trainer as a JobSet$/, "")}: run stacks with training.nodes > 1 need it (this stack installs it with jobSet.install: true)`,
                    jobSet.fix,
                ),
    );
    out.push(
        config.kueue.install
            ? ok("Kueue", `this stack installs Kueue ${KUEUE_RELEASE} (kueue.install, ${config.kueue.manifest})`)
            : crds.some((c) => c.metadata?.name === KUEUE_LOCALQUEUE_CRD)
              ? ok("Kueue", `${KUEUE_LOCALQUEUE_CRD} exists`)
              : warn(
                    "Kueue",
                    `Kueue is not installed (${KUEUE_LOCALQUEUE_CRD} missing): run stacks with target.kueueQueue need it (this stack installs it with kueue.install: true)`,
                    `${KUEUE_INSTALL}, if runs are to queue; otherwise nothing to do`,
                ),
    );
    const i = config.certIssuer;
    if (i) {
        const kindCrd = `${i.kind === "Issuer" ? "issuers" : "clusterissuers"}.cert-manager.io`;
        const issues = crdProblems(crds, [CERT_MANAGER_CERTIFICATES_CRD, kindCrd], "v1");
        if (issues.length > 0)
            out.push(
                fail(
                    "cert-manager",
                    `${issues.join("; ")} (certIssuer)`,
                    `install cert-manager (kubectl apply -f ${CERT_MANAGER_MANIFEST_URL}), or remove certIssuer`,
                ),
            );
        else if (i.kind === "Issuer" || i.group !== "cert-manager.io")
            out.push(
                warn(
                    "Issuer",
                    `${i.kind} ${i.name} (group ${i.group}) is not checked here: an Issuer lives in each run's ingress namespace`,
                    "check it where the runs' ingress lives",
                ),
            );
        else if (f.issuer && !f.issuer.ok) out.push(unreadable("Issuer", f.issuer));
        else if (!f.issuer?.value)
            out.push(
                fail(
                    "Issuer",
                    `no ClusterIssuer ${i.name} (certIssuer): run stacks' certificates would never be issued`,
                    "create it, or name an existing one (kubectl get clusterissuers)",
                ),
            );
        else out.push(ok("Issuer", `ClusterIssuer ${i.name} exists`));
    }
    return out;
}

/** Reads what `checkClusterStack` needs, with the cluster stack's kubeconfig and context. */
export async function readClusterStack(config: ClusterConfig, opts: KubernetesReadOptions = {}): Promise<ClusterStackFacts> {
    const { conn, json, items, named, one } = await connect(config.target, opts);
    const nothing = { ok: false as const, error: "not read: the API server did not answer" };
    if (!conn.version.ok) return { ...conn, crds: nothing, sandboxControllers: nothing };
    const i = config.certIssuer;
    const [crds, sandboxControllers, issuer] = await Promise.all([
        named("customresourcedefinitions.apiextensions.k8s.io", clusterStackCrds(config)),
        config.agentSandbox.install
            ? Promise.resolve({ ok: true as const, value: [] as any[] })
            : json(["get", "deployments.apps", "-A", "-l", SANDBOX_CONTROLLER_LABEL], items),
        i && i.kind === "ClusterIssuer" && i.group === "cert-manager.io" ? one(["clusterissuers.cert-manager.io", i.name]) : Promise.resolve(undefined),
    ]);
    // No cert-manager: `get clusterissuers` fails with an unknown kind; that is "not found" (the CRD check says why).
    const issuerRead = issuer && !issuer.ok && /doesn't have a resource type/i.test(issuer.error) ? { ok: true as const, value: undefined } : issuer;
    return { ...conn, crds, sandboxControllers, ...(issuerRead ? { issuer: issuerRead } : {}) };
}
