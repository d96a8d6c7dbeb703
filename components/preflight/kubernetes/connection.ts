/** The first Kubernetes checks: the API server answers with the stack's context, at a version the stack needs. */
import { fail, type Finding, firstLine, ok, warn } from "../report";
import type { ConnectionFacts } from "./facts";

/** Kubernetes >= 1.30: ValidatingAdmissionPolicy v1 (the sandbox claim policy) is GA there; native sidecars (1.29) are on. */
export const MIN_KUBERNETES = { major: 1, minor: 30 } as const;

/** The API server answers with the stack's context: the first check; nothing else is read when it fails. */
export function checkConnection(f: ConnectionFacts, timeoutSeconds: number): Finding {
    const check = "API server";
    const at = `${f.server ?? "the API server"} (context ${f.context || "(none)"}, kubeconfig ${f.kubeconfig})`;
    if (f.version.ok) return ok(check, `${at} answers: ${f.version.value.gitVersion}`);
    const e = f.version.error;
    if (/^cannot run .*not installed/.test(e))
        return fail(check, e, "install kubectl (any release within one minor version of the cluster), or set KUBECTL to its path");
    if (f.kubeconfigMissing === true)
        return fail(
            check,
            `no kubeconfig: ${f.kubeconfig} does not exist, so kubectl knows no cluster`,
            "get credentials for the cluster (your cloud's get-credentials command writes ~/.kube/config), or set target.kubeconfig (or KUBECONFIG) to the file that has them",
        );
    if (f.context === "") {
        return fail(
            check,
            `kubeconfig ${f.kubeconfig} has no current context and the stack names none`,
            `set target.context to one of: ${f.contexts.join(", ") || "(the kubeconfig has no contexts)"}`,
        );
    }
    if (/context was not found|no context exists|context .* does not exist/i.test(e) || (f.contexts.length > 0 && !f.contexts.includes(f.context))) {
        return fail(
            check,
            `kubeconfig ${f.kubeconfig} has no context '${f.context}'`,
            `set target.context to one of: ${f.contexts.join(", ") || "(none: the file has no contexts)"}; or point target.kubeconfig at the file that has '${f.context}'`,
        );
    }
    if (/no such file|cannot find|does not exist/i.test(e)) {
        return fail(
            check,
            `cannot read kubeconfig ${f.kubeconfig}: ${firstLine(e)}`,
            "set target.kubeconfig to an existing kubeconfig file (or unset it for kubectl's default)",
        );
    }
    if (/unauthorized|must be logged in|forbidden/i.test(e)) {
        return fail(
            check,
            `${at} refused the credentials: ${firstLine(e)}`,
            `refresh the credentials of context ${f.context} (your cloud's get-credentials command), then: kubectl --context ${f.context} version`,
        );
    }
    return fail(
        check,
        `${at} did not answer within ${timeoutSeconds} s: ${firstLine(e)}`,
        `check that the cluster is up and reachable from here (VPN, firewall, API server address), then: kubectl --context ${f.context} version`,
    );
}

export function checkVersion(version: { gitVersion: string; major: string; minor: string }): Finding {
    const check = "Kubernetes version";
    const major = Number.parseInt(version.major, 10);
    const minor = Number.parseInt(version.minor, 10);
    if (!Number.isFinite(major) || !Number.isFinite(minor))
        return warn(
            check,
            `the server reports version ${JSON.stringify(version)}, which is not major.minor`,
            `check that it is ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor} or newer`,
        );
    const good = major > MIN_KUBERNETES.major || (major === MIN_KUBERNETES.major && minor >= MIN_KUBERNETES.minor);
    return good
        ? ok(check, `${version.gitVersion} (>= ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor})`)
        : fail(
              check,
              `${version.gitVersion}, older than ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor}`,
              `upgrade the cluster to ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor} or newer (the sandbox claim policy is a ValidatingAdmissionPolicy v1, GA in 1.30; the vLLM sidecar is a native sidecar, on since 1.29)`,
          );
}
