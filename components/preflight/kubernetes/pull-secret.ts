/**
 * The pull Secret (with registryAuth): the stack creates a kubernetes.io/dockerconfigjson Secret
 * names.pullSecret in every namespace it makes. One of that name that is there already and was not
 * made by this project stops the `up`: @pulumi/kubernetes (4.29 and later) refuses to create an
 * object that exists (its `upsertExistingObjects` is off), and a Secret's type cannot be changed.
 */
import { namespaceRoles, type PlatformPlan } from "../../platform";
import { fail, type Finding, ok } from "../report";
import type { PullSecretFacts } from "./facts";

/** The Secret type the stack creates (Kubernetes core/v1 SecretTypeDockerConfigJson). */
export const DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson";
/** The label every object the stack makes carries. */
export const PART_OF = "agent-rl-infra";

/**
 * What the reader asks the API server for of an existing pull Secret (kubectl `-o jsonpath=`): its
 * type and part-of label, tab-separated; nothing of its data leaves the API server.
 */
export const PULL_SECRET_FIELDS = String.raw`{.type}{"\t"}{.metadata.labels.app\.kubernetes\.io/part-of}`;

/** PULL_SECRET_FIELDS' output as facts; undefined for no output (`--ignore-not-found`: no such Secret). */
export function parsePullSecretFields(text: string): PullSecretFacts | undefined {
    if (text.trim() === "") return undefined;
    const [type = "", partOf = ""] = text.split("\t");
    return { type: type.trim(), partOf: partOf.trim() };
}

/** The namespaces the pull Secret goes into: every namespace the stack makes. */
export function pullSecretNamespaces(plan: PlatformPlan): string[] {
    return plan.config.target.kind === "kubernetes" ? namespaceRoles(plan.config).map((r) => plan.names.namespaces[r]) : [];
}

/** The pull Secret against what the namespaces already hold; undefined without registryAuth (no Secret is made). */
export function checkPullSecret(plan: PlatformPlan, found: Readonly<Record<string, PullSecretFacts | undefined>>): Finding | undefined {
    if (plan.registryAuth === undefined) return undefined;
    const check = "Pull Secret";
    const name = plan.names.pullSecret;
    const namespaces = pullSecretNamespaces(plan);
    const foreign: string[] = [];
    const ours: string[] = [];
    for (const ns of namespaces) {
        const s = found[ns];
        if (s === undefined) continue;
        const why = [
            ...(s.type !== DOCKER_CONFIG_JSON ? [`type ${s.type || "(none)"}, not ${DOCKER_CONFIG_JSON}, and a Secret's type cannot change`] : []),
            ...(s.partOf !== PART_OF ? [s.partOf === "" ? `no app.kubernetes.io/part-of label` : `app.kubernetes.io/part-of=${s.partOf}`] : []),
        ];
        if (why.length > 0) foreign.push(`${ns}/${name} (${why.join("; ")})`);
        else ours.push(ns);
    }
    if (foreign.length > 0)
        return fail(
            check,
            `a Secret the stack did not make already holds the pull Secret's name: ${foreign.join(", ")}; up cannot create it there (the Kubernetes provider refuses to create an object that exists)`,
            `if nothing else uses it, delete it (${foreign.map((f) => `kubectl -n ${f.split("/")[0]} delete secret ${name}`).join("; ")}); otherwise run the stack under another target.namespacePrefix`,
        );
    const absent = namespaces.filter((ns) => !ours.includes(ns));
    return ok(
        check,
        [
            absent.length > 0 ? `no Secret ${name} in ${absent.join(", ")} yet: up creates it (${DOCKER_CONFIG_JSON}, from registryAuth)` : "",
            ours.length > 0 ? `${ours.map((ns) => `${ns}/${name}`).join(", ")} made by this project (an earlier up): up updates it` : "",
        ]
            .filter(Boolean)
            .join("; "),
    );
}
