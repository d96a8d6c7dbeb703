/** The ingress' cluster prerequisites: the Gateway API and its Gateway (exposure httproute), cert-manager and its issuer, the TLS Secret. */
import type { PlatformPlan } from "../../platform";
import { fail, type Finding, ok, warn } from "../report";
import { crdProblems } from "./addons";
import { CERT_MANAGER_CERTIFICATES_CRD, CERT_MANAGER_MANIFEST_URL, GATEWAY_CRDS } from "./needs";

export function checkGateway(plan: PlatformPlan, crds: readonly any[], gateway: any | undefined): Finding[] {
    const g = plan.config.ingress.gateway!;
    const ns = plan.names.namespaces.ingress;
    const crdIssues = crdProblems(crds, GATEWAY_CRDS, "v1");
    if (crdIssues.length > 0) {
        return [
            fail(
                "Gateway API",
                `${crdIssues.join("; ")} (ingress.exposure httproute)`,
                "install the Gateway API standard CRDs (v1.x, kubernetes-sigs/gateway-api releases: standard-install.yaml) and a Gateway controller, or use ingress.exposure cluster or loadbalancer",
            ),
        ];
    }
    const out = [ok("Gateway API", `${GATEWAY_CRDS.join(", ")} serve v1`)];
    const id = `${g.namespace}/${g.name}`;
    if (!gateway) {
        out.push(fail("Gateway", `no Gateway ${id} (ingress.gateway)`, "create it, or point ingress.gateway at an existing Gateway (kubectl get gateways -A)"));
        return out;
    }
    const listeners: any[] = gateway.spec?.listeners ?? [];
    const chosen = g.sectionName !== undefined ? listeners.filter((l) => l.name === g.sectionName) : listeners;
    if (g.sectionName !== undefined && chosen.length === 0) {
        out.push(
            fail(
                "Gateway",
                `Gateway ${id} has no listener ${g.sectionName} (listeners: ${listeners.map((l) => l.name).join(", ") || "none"})`,
                "set ingress.gateway.sectionName to one of its listeners",
            ),
        );
        return out;
    }
    const admits = chosen.map((l) => l.allowedRoutes?.namespaces?.from ?? "Same");
    if (admits.includes("All") || (admits.includes("Same") && g.namespace === ns)) {
        // fine
    } else if (admits.includes("Selector")) {
        out.push(
            warn(
                "Gateway",
                `Gateway ${id} admits routes from namespaces matching a label selector; whether ${ns} (which this stack creates) matches is not checked`,
                `make sure namespace ${ns} carries the labels the listener selects, or allow routes from All namespaces`,
            ),
        );
        return out;
    } else {
        out.push(
            fail(
                "Gateway",
                `Gateway ${id} admits routes only from its own namespace ${g.namespace}, not from ${ns} where the stack's HTTPRoute lives`,
                `set the listener's allowedRoutes.namespaces.from to All (or Selector matching ${ns})`,
            ),
        );
        return out;
    }
    const programmed = (gateway.status?.conditions ?? []).find((c: any) => c.type === "Programmed");
    out.push(
        programmed?.status === "True"
            ? ok("Gateway", `${id} is Programmed and admits routes from ${ns}`)
            : warn(
                  "Gateway",
                  `${id} admits routes from ${ns} but is not Programmed (${programmed ? `${programmed.reason}: ${programmed.message}` : "no status: is a Gateway controller running?"})`,
                  `see kubectl -n ${g.namespace} describe gateway ${g.name}`,
              ),
    );
    return out;
}

export function checkCertManager(plan: PlatformPlan, crds: readonly any[], issuer: any | undefined, namespaceExists: boolean): Finding[] {
    const i = plan.config.ingress.tls.issuer;
    const kindCrd = `${i?.kind === "Issuer" ? "issuers" : "clusterissuers"}.cert-manager.io`;
    const issues = crdProblems(crds, [CERT_MANAGER_CERTIFICATES_CRD, kindCrd], "v1");
    if (issues.length > 0) {
        return [
            fail(
                "cert-manager",
                `${issues.join("; ")} (ingress.tls.mode cert-manager)`,
                `install cert-manager (kubectl apply -f ${CERT_MANAGER_MANIFEST_URL}), or use ingress.tls.mode secret`,
            ),
        ];
    }
    const out = [ok("cert-manager", `${CERT_MANAGER_CERTIFICATES_CRD} and ${kindCrd} serve v1`)];
    if (!i) return out;
    const ns = plan.names.namespaces.ingress;
    const what = i.kind === "Issuer" ? `Issuer ${ns}/${i.name}` : `ClusterIssuer ${i.name}`;
    if (i.group !== "cert-manager.io") {
        out.push(
            warn(
                "Issuer",
                `${i.kind} ${i.name} of group ${i.group} (an external issuer) is not checked`,
                `check it yourself: kubectl get ${i.kind.toLowerCase()}s.${i.group} ${i.name}`,
            ),
        );
        return out;
    }
    if (!issuer) {
        if (i.kind === "Issuer" && !namespaceExists) {
            out.push(
                fail(
                    "Issuer",
                    `no ${what}: an Issuer must live in the ingress namespace ${ns}, which does not exist yet (this stack creates it), so the certificate cannot be issued on the first up`,
                    "use a ClusterIssuer (ingress.tls.issuer.kind ClusterIssuer)",
                ),
            );
        } else {
            out.push(
                fail(
                    "Issuer",
                    `no ${what} (ingress.tls.issuer): the certificate is never issued and the proxy pods hang in ContainerCreating`,
                    `create it, or set ingress.tls.issuer to an existing one (kubectl get ${i.kind === "Issuer" ? `issuers -n ${ns}` : "clusterissuers"})`,
                ),
            );
        }
        return out;
    }
    const ready = (issuer.status?.conditions ?? []).find((c: any) => c.type === "Ready");
    out.push(
        ready?.status === "True"
            ? ok("Issuer", `${what} is Ready`)
            : warn(
                  "Issuer",
                  `${what} exists but is not Ready (${ready ? `${ready.reason}: ${ready.message}` : "no status: is cert-manager running?"})`,
                  `see kubectl describe ${i.kind.toLowerCase()} ${i.name}${i.kind === "Issuer" ? ` -n ${ns}` : ""}`,
              ),
    );
    return out;
}

export function checkTlsSecret(plan: PlatformPlan, secret: { type: string; keys: readonly string[] } | undefined, namespaceExists: boolean): Finding {
    const check = "TLS Secret";
    const name = plan.config.ingress.tls.secretName!;
    const ns = plan.names.namespaces.ingress;
    const create = `kubectl -n ${ns} create secret tls ${name} --cert=<cert.pem> --key=<key.pem>`;
    if (!secret) {
        return namespaceExists
            ? fail(check, `no Secret ${ns}/${name} (ingress.tls.secretName): the proxy pods would hang in ContainerCreating`, create)
            : warn(
                  check,
                  `namespace ${ns} does not exist yet (this stack creates it), so Secret ${name} cannot be there before the first up; the proxy waits for it`,
                  `create it right after the namespace appears: ${create}; or let cert-manager issue it (ingress.tls.mode cert-manager)`,
              );
    }
    const missing = ["tls.crt", "tls.key"].filter((k) => !secret.keys.includes(k));
    if (missing.length > 0)
        return fail(check, `Secret ${ns}/${name} (type ${secret.type}) has no ${missing.join(", ")}`, `recreate it as a TLS Secret: ${create}`);
    return ok(check, `${ns}/${name} (type ${secret.type}) holds tls.crt and tls.key`);
}
