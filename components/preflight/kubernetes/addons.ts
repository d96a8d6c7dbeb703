/**
 * What the cluster must have installed: agent-sandbox's CRDs and controller (sandboxes.provider
 * agent-sandbox), JobSet (training.nodes > 1), Kueue (target.kueueQueue), a NetworkPolicy CNI.
 */
import { AGENT_SANDBOX_MANIFEST_URL } from "../../config";
import type { PlatformPlan } from "../../platform";
import { AGENT_SANDBOX_VERSION, SANDBOX_API_VERSION } from "../../sandbox";
import { fail, type Finding, ok, warn } from "../report";
import {
    JOBSET_CONTROLLER_LABEL,
    JOBSET_CRD,
    JOBSET_MANIFEST_URL,
    JOBSET_RELEASE,
    JOBSET_VERSION,
    type KubernetesNeeds,
    KUEUE_LOCALQUEUE_CRD,
    KUEUE_MANIFEST_URL,
    KUEUE_RELEASE,
    NON_POLICY_CNI_DAEMONSETS,
    POLICY_CNI_DAEMONSETS,
    SANDBOX_CONTROLLER_LABEL,
    sandboxCrdExpectations,
} from "./needs";

/** The served version's schema of a CRD, or undefined. */
function servedSchema(crd: any, version: string): any {
    const v = (crd?.spec?.versions ?? []).find((x: any) => x.name === version && x.served);
    return v;
}

/**
 * What marks an agent-sandbox v0.5.x install on a CRD (pure): it still serves a version other than
 * v1beta1 (v1alpha1, removed in v1.0.0), converts through the controller's webhook (v1.0.0 removed
 * it: `+kubebuilder:conversion:strategy=Webhook` is gone from extensions/api/v1beta1), or has
 * objects stored in another version (status.storedVersions, which a v1.0 CRD cannot be applied over).
 */
export function preV1SandboxMarks(crd: any): string[] {
    const name = crd?.metadata?.name ?? "?";
    const others = (crd?.spec?.versions ?? []).filter((v: any) => v.served && v.name !== SANDBOX_API_VERSION).map((v: any) => v.name);
    const stored = (crd?.status?.storedVersions ?? []).filter((v: string) => v !== SANDBOX_API_VERSION);
    const strategy = crd?.spec?.conversion?.strategy;
    return [
        ...(others.length > 0 ? [`${name} serves ${others.join(", ")}`] : []),
        ...(strategy === "Webhook" ? [`${name} converts through a webhook`] : []),
        ...(stored.length > 0 ? [`${name} has objects stored as ${stored.join(", ")}`] : []),
    ];
}

/** The steps from a v0.5.x install to this release (agent-sandbox docs/api-migration-guide.md at v1.0.1). */
export function sandboxMigrationFix(storedOld: boolean): string {
    const prune = storedOld
        ? "first migrate the stored objects to v1beta1 and prune v1alpha1 from each CRD's status.storedVersions (agent-sandbox v0.5.2 docs/api-migration-guide.md), then "
        : "";
    return (
        `agent-sandbox v0.5.x is not supported: ${prune}upgrade to ${AGENT_SANDBOX_VERSION}: \`pulumi up\` the cluster stack ` +
        `(agentSandbox.install; docs/guides/platform-teams.md, "Upgrading agent-sandbox from v0.5.x") or by hand ` +
        `(kubectl apply --server-side --force-conflicts -f ${AGENT_SANDBOX_MANIFEST_URL}, then delete the v0.5.x webhook Service, Secret, Role and RoleBinding in agent-sandbox-system)`
    );
}

export function checkSandboxCrds(plan: PlatformPlan | undefined, crds: readonly any[]): Finding {
    const check = "agent-sandbox CRDs";
    const expect = sandboxCrdExpectations(plan);
    const install = `kubectl apply --server-side -f ${AGENT_SANDBOX_MANIFEST_URL}`;
    const installed = expect.map((e) => crds.find((c) => c.metadata?.name === e.name)).filter((c) => c !== undefined);
    const marks = installed.flatMap(preV1SandboxMarks);
    if (marks.length > 0) {
        const storedOld = installed.some((c) => (c.status?.storedVersions ?? []).some((v: string) => v !== SANDBOX_API_VERSION));
        return fail(check, `an agent-sandbox release before v1.0 is installed: ${marks.join("; ")}`, sandboxMigrationFix(storedOld));
    }
    const problems: string[] = [];
    for (const e of expect) {
        const crd = crds.find((c) => c.metadata?.name === e.name);
        if (!crd) {
            problems.push(`${e.name} missing`);
            continue;
        }
        const v = servedSchema(crd, SANDBOX_API_VERSION);
        if (!v) {
            problems.push(`${e.name} does not serve ${SANDBOX_API_VERSION}`);
            continue;
        }
        const props = v.schema?.openAPIV3Schema?.properties ?? {};
        const spec = Object.keys(props.spec?.properties ?? {});
        const status = Object.keys(props.status?.properties ?? {});
        const missing = [
            ...e.spec.filter((k) => !spec.includes(k)).map((k) => `spec.${k}`),
            ...e.status.filter((k) => !status.includes(k)).map((k) => `status.${k}`),
        ];
        if (missing.length > 0) problems.push(`${e.name} ${SANDBOX_API_VERSION} has no ${missing.join(", ")}`);
        if (e.scale && !v.subresources?.scale) problems.push(`${e.name} ${SANDBOX_API_VERSION} has no scale subresource`);
    }
    if (problems.length === 0)
        return ok(check, `${expect.length} CRDs serve ${SANDBOX_API_VERSION} with the ${AGENT_SANDBOX_VERSION} fields the stack and the trainer use`);
    const missingAll = problems.length === expect.length && problems.every((p) => p.endsWith(" missing"));
    return fail(
        check,
        missingAll
            ? `agent-sandbox is not installed (${expect.map((e) => e.name).join(", ")} missing)`
            : `the schema does not match ${AGENT_SANDBOX_VERSION}: ${problems.join("; ")}`,
        `install agent-sandbox ${AGENT_SANDBOX_VERSION} with the cluster stack (agentSandbox.install) or by hand (${install})`,
    );
}

export function checkSandboxController(deployments: readonly any[]): Finding {
    const check = "agent-sandbox controller";
    const install = `kubectl apply --server-side -f ${AGENT_SANDBOX_MANIFEST_URL}`;
    if (deployments.length === 0) {
        return fail(
            check,
            `no Deployment labelled ${SANDBOX_CONTROLLER_LABEL} in any namespace: the warm pool would never fill`,
            `install agent-sandbox ${AGENT_SANDBOX_VERSION}: ${install}`,
        );
    }
    const available = deployments.filter((d) => (d.status?.availableReplicas ?? 0) >= 1);
    const id = (d: any) => `${d.metadata.namespace}/${d.metadata.name}`;
    if (available.length === 0) {
        const d = deployments[0];
        return fail(
            check,
            `${id(d)}: ${d.status?.availableReplicas ?? 0} of ${d.spec?.replicas ?? 1} replicas available`,
            `see why: kubectl -n ${d.metadata.namespace} describe deployment ${d.metadata.name}`,
        );
    }
    const d = available[0];
    const args: string[] = (d.spec?.template?.spec?.containers ?? []).flatMap((c: any) => [...(c.command ?? []), ...(c.args ?? [])]);
    if (!args.some((a) => a === "--extensions" || a === "--extensions=true")) {
        return fail(
            check,
            `${id(d)} runs without --extensions: SandboxTemplate, SandboxWarmPool and SandboxClaim are not reconciled`,
            `install the release manifest with extensions (${install})`,
        );
    }
    return ok(check, `${id(d)} available (${d.status.availableReplicas}/${d.spec?.replicas ?? 1}), with --extensions`);
}

export function crdProblems(crds: readonly any[], names: readonly string[], version: string): string[] {
    return names.flatMap((n) => {
        const crd = crds.find((c) => c.metadata?.name === n);
        if (!crd) return [`${n} missing`];
        return servedSchema(crd, version) ? [] : [`${n} does not serve ${version}`];
    });
}

/** training.nodes > 1: the trainer is a JobSet, whose CRD (and controller) the cluster must have. */
export function checkJobSet(crds: readonly any[]): Finding {
    const issues = crdProblems(crds, [JOBSET_CRD], JOBSET_VERSION);
    return issues.length > 0
        ? fail(
              "JobSet",
              `${issues.join("; ")}: training.nodes > 1 runs the trainer as a JobSet`,
              `install JobSet ${JOBSET_RELEASE} with the cluster stack (jobSet.install: true) or by hand (kubectl apply --server-side -f ${JOBSET_MANIFEST_URL}), or train on one node (training.nodes 1)`,
          )
        : ok("JobSet", `${JOBSET_CRD} serves ${JOBSET_VERSION}`);
}

/** training.nodes > 1: JobSet's controller (and its webhooks, which do the exclusive placement) must run. */
export function checkJobSetController(deployments: readonly any[]): Finding {
    const check = "JobSet controller";
    const install = `install JobSet ${JOBSET_RELEASE} with the cluster stack (jobSet.install: true) or by hand (kubectl apply --server-side -f ${JOBSET_MANIFEST_URL})`;
    if (deployments.length === 0)
        return fail(check, `no Deployment labelled ${JOBSET_CONTROLLER_LABEL} in any namespace: the trainer's JobSet would never get pods`, install);
    const available = deployments.find((d) => (d.status?.availableReplicas ?? 0) >= 1);
    if (!available) {
        const d = deployments[0];
        return fail(
            check,
            `${d.metadata.namespace}/${d.metadata.name}: ${d.status?.availableReplicas ?? 0} of ${d.spec?.replicas ?? 1} replicas available`,
            `see why: kubectl -n ${d.metadata.namespace} describe deployment ${d.metadata.name}`,
        );
    }
    return ok(
        check,
        `${available.metadata.namespace}/${available.metadata.name} available (${available.status.availableReplicas}/${available.spec?.replicas ?? 1})`,
    );
}

/**
 * How to install Kueue: the cluster stack's kueue.install, or its release manifest by hand. The manifest's
 * default configuration enables both integrations a queued run uses (kueue v0.17.0
 * config/components/manager/controller_manager_config.yaml: integrations.frameworks lists batch/job and jobset.x-k8s.io/jobset).
 */
export const KUEUE_INSTALL = `install Kueue ${KUEUE_RELEASE} with the cluster stack (kueue.install: true) or by hand (kubectl apply --server-side -f ${KUEUE_MANIFEST_URL}; its default configuration enables the batch/job and jobset.x-k8s.io/jobset integrations)`;
/** Where the queues a platform team makes are written out (a ResourceFlavor, a ClusterQueue with GPU quota, the LocalQueue). */
const KUEUE_QUEUES_GUIDE = 'docs/guides/multi-node.md, "Kueue: queued runs"';

/**
 * target.kueueQueue: the trainer is created suspended until Kueue admits it, so without Kueue or
 * without the LocalQueue it waits for ever. The LocalQueue lives in the training namespace, which the
 * stack creates: before the first up it cannot exist yet (a warning).
 */
export function checkKueue(kueue: NonNullable<KubernetesNeeds["kueue"]>, crds: readonly any[], localQueue: any | undefined, namespaceExists: boolean): Finding {
    const check = "Kueue LocalQueue";
    const where = `${kueue.namespace}/${kueue.queue}`;
    if (!crds.some((c) => c.metadata?.name === KUEUE_LOCALQUEUE_CRD))
        return fail(
            check,
            `Kueue is not installed (${KUEUE_LOCALQUEUE_CRD} missing): the trainer is created suspended (target.kueueQueue) and nothing would ever admit it`,
            `${KUEUE_INSTALL}, then create the queues (${KUEUE_QUEUES_GUIDE}); or remove target.kueueQueue`,
        );
    if (localQueue !== undefined) return ok(check, `LocalQueue ${where} exists`);
    const create = `create LocalQueue ${kueue.queue} in ${kueue.namespace} pointing at a ClusterQueue with GPU quota (${KUEUE_QUEUES_GUIDE}: a ResourceFlavor, the ClusterQueue, the LocalQueue)`;
    return namespaceExists
        ? fail(check, `no LocalQueue ${where} (target.kueueQueue): the suspended trainer would never be admitted`, create)
        : warn(
              check,
              `namespace ${kueue.namespace} does not exist yet (the stack creates it), so LocalQueue ${where} cannot either`,
              `${create} right after the first up (the trainer waits, suspended, until then)`,
          );
}

export function checkCni(daemonSets: readonly any[]): Finding {
    const check = "NetworkPolicy CNI";
    const known = daemonSets.filter((d) => POLICY_CNI_DAEMONSETS[d.metadata?.name] !== undefined);
    if (known.length > 0) {
        const d = known[0];
        return ok(
            check,
            `DaemonSet ${d.metadata.namespace}/${d.metadata.name} (${POLICY_CNI_DAEMONSETS[d.metadata.name]}) runs, so NetworkPolicy is likely enforced (a heuristic: by DaemonSet name)`,
        );
    }
    const flannel = daemonSets.find((d) => NON_POLICY_CNI_DAEMONSETS[d.metadata?.name] !== undefined);
    return warn(
        check,
        `${flannel ? `only ${NON_POLICY_CNI_DAEMONSETS[flannel.metadata.name]} (${flannel.metadata.namespace}/${flannel.metadata.name}), which does not enforce NetworkPolicy, and ` : ""}no DaemonSet of a NetworkPolicy-enforcing CNI (${Object.keys(POLICY_CNI_DAEMONSETS).join(", ")}); this is a heuristic, by DaemonSet name`,
        "if your CNI enforces NetworkPolicy under another name, ignore this; otherwise install one (Calico, Cilium): without it every isolation rule of the stack is silently ignored",
    );
}
