/**
 * Schema checks for the custom resources the project creates, with no cluster and no CRD
 * files: what the project relies on (apiVersion/kind, required fields, enums, known
 * fields, formats) is encoded here, from
 * - kubernetes-sigs/agent-sandbox v1.0.1 CRDs (served and stored v1beta1, the only version; the spec fields
 *   are those of v0.5.6, whose v1alpha1 and conversion webhook v1.0.0 removed):
 *   `extensions.agents.x-k8s.io` SandboxTemplate, SandboxWarmPool, SandboxClaim, and
 *   `agents.x-k8s.io` Sandbox;
 * - Gateway API v1 `gateway.networking.k8s.io/v1` HTTPRoute (standard channel).
 * - cert-manager v1.21.2 `cert-manager.io/v1` Certificate.
 * - JobSet v0.12.0 `jobset.x-k8s.io/v1alpha2` JobSet.
 * - the Prometheus Operator v0.95.2 `monitoring.coreos.com/v1` PodMonitor and PrometheusRule (the
 *   fields the project writes, from pkg/apis/monitoring v1/podmonitor_types.go, prometheusrule_types.go,
 *   prometheus_types.go's RelabelConfig and types.go's Duration pattern).
 * Structural CRD schemas prune unknown fields (and server-side apply with strict field
 * validation rejects them), so unknown fields are errors here too. Embedded core types
 * (a pod template's spec, NetworkPolicy rules, PVC templates) are checked strictly against
 * the Kubernetes 1.36 schema with `validateManifestStrict`.
 */
import { validateManifestStrict } from "./k8s-schema";

/** A small structural schema: enough of OpenAPI v3 for what the CRDs above declare. */
export type Schema =
    | {
          readonly type: "string";
          readonly enum?: readonly string[];
          readonly pattern?: RegExp;
          readonly format?: "date-time";
          readonly minLength?: number;
          readonly maxLength?: number;
      }
    | { readonly type: "integer"; readonly minimum?: number; readonly maximum?: number }
    | { readonly type: "boolean" }
    | { readonly type: "array"; readonly items: Schema; readonly maxItems?: number; readonly minItems?: number }
    | { readonly type: "object"; readonly properties: Readonly<Record<string, Schema>>; readonly required?: readonly string[] }
    /** A string map (labels, annotations). */
    | { readonly type: "map" }
    /** Validated by a function (embedded core types); returns problems relative to `at`. */
    | { readonly type: "custom"; readonly check: (value: unknown, at: string) => string[] };

const str = (extra: Omit<Extract<Schema, { type: "string" }>, "type"> = {}): Schema => ({ type: "string", ...extra });
const int = (extra: Omit<Extract<Schema, { type: "integer" }>, "type"> = {}): Schema => ({ type: "integer", ...extra });
const bool: Schema = { type: "boolean" };
const map: Schema = { type: "map" };
const arr = (items: Schema, extra: { maxItems?: number; minItems?: number } = {}): Schema => ({ type: "array", items, ...extra });
const obj = (properties: Record<string, Schema>, required: string[] = []): Schema => ({ type: "object", properties, required });

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** ObjectMeta fields a manifest may set (the rest are written by the API server). */
const objectMeta: Schema = obj({
    name: str({ pattern: DNS_SUBDOMAIN, maxLength: 253 }),
    generateName: str(),
    namespace: str({ pattern: DNS_LABEL, maxLength: 63 }),
    labels: map,
    annotations: map,
    finalizers: arr(str()),
    ownerReferences: arr({ type: "custom", check: () => [] }),
});

/** A core type embedded in a CRD, checked by wrapping it in an object the strict checker knows. */
function embedded(wrap: (v: unknown) => Record<string, unknown>, prefix: string): Schema {
    return {
        type: "custom",
        check: (v, at) =>
            validateManifestStrict(wrap(v)).map((p) => {
                const [path, ...rest] = p.split(": ");
                return `${at}${path.startsWith(prefix) ? path.slice(prefix.length) : path}: ${rest.join(": ")}`;
            }),
    };
}

const podSpec = embedded((spec) => ({ apiVersion: "v1", kind: "Pod", metadata: { name: "embedded" }, spec }), "/spec");
const podTemplate = obj({ metadata: obj({ labels: map, annotations: map }), spec: podSpec }, ["spec"]);
const pvcTemplate = obj(
    {
        metadata: obj({ name: str(), labels: map, annotations: map }),
        spec: embedded((spec) => ({ apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: { name: "embedded" }, spec }), "/spec"),
    },
    ["spec"],
);
const npRule = (dir: "ingress" | "egress"): Schema =>
    embedded(
        (rule) => ({ apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: { name: "embedded" }, spec: { podSelector: {}, [dir]: [rule] } }),
        `/spec/${dir}/0`,
    );

/** agent-sandbox v1.0.1, extensions.agents.x-k8s.io/v1beta1 SandboxTemplate. */
const sandboxTemplateSpec = obj(
    {
        podTemplate,
        networkPolicy: obj({ ingress: arr(npRule("ingress")), egress: arr(npRule("egress")) }),
        networkPolicyManagement: str({ enum: ["Managed", "Unmanaged"] }),
        envVarsInjectionPolicy: str({ enum: ["Allowed", "Overrides", "Disallowed"] }),
        volumeClaimTemplatesPolicy: str({ enum: ["Disallowed", "Allowed", "Overrides"] }),
        service: bool,
        volumeClaimTemplates: arr(pvcTemplate),
    },
    ["podTemplate"],
);

/** agent-sandbox v1.0.1, extensions.agents.x-k8s.io/v1beta1 SandboxWarmPool. */
const sandboxWarmPoolSpec = obj(
    {
        replicas: int({ minimum: 0, maximum: 2 ** 31 - 1 }),
        sandboxTemplateRef: obj({ name: str({ minLength: 1 }) }, ["name"]),
        updateStrategy: obj({ type: str({ enum: ["Recreate", "OnReplenish"] }) }),
    },
    ["sandboxTemplateRef"],
);

/** agent-sandbox v1.0.1, extensions.agents.x-k8s.io/v1beta1 SandboxClaim. */
const sandboxClaimSpec = obj(
    {
        warmPoolRef: obj({ name: str({ minLength: 1 }) }, ["name"]),
        lifecycle: obj({
            shutdownPolicy: str({ enum: ["Delete", "DeleteForeground", "Retain"] }),
            shutdownTime: str({ format: "date-time" }),
            ttlSecondsAfterFinished: int({ minimum: 0, maximum: 2 ** 31 - 1 }),
        }),
        additionalPodMetadata: obj({ labels: map, annotations: map }),
        env: arr(obj({ name: str(), value: str(), containerName: str() }, ["name", "value"])),
        volumeClaimTemplates: arr(pvcTemplate),
    },
    ["warmPoolRef"],
);

/** agent-sandbox v1.0.1, agents.x-k8s.io/v1beta1 Sandbox. */
const sandboxSpec = obj(
    {
        podTemplate,
        operatingMode: str({ enum: ["Running", "Suspended"] }),
        shutdownPolicy: str({ enum: ["Delete", "Retain"] }),
        shutdownTime: str({ format: "date-time" }),
        service: bool,
        volumeClaimTemplates: arr(pvcTemplate),
    },
    ["podTemplate"],
);

/** Gateway API v1 HTTPRoute (standard channel), what a route to a Service may set. */
const GW_NAME = str({ minLength: 1, maxLength: 253 });
const parentRef = obj(
    {
        group: str({ maxLength: 253 }),
        kind: str({ minLength: 1, maxLength: 63 }),
        namespace: str({ pattern: DNS_LABEL, maxLength: 63 }),
        name: GW_NAME,
        sectionName: str({ pattern: DNS_SUBDOMAIN, maxLength: 253 }),
        port: int({ minimum: 1, maximum: 65535 }),
    },
    ["name"],
);
const headerMatch = obj({ type: str({ enum: ["Exact", "RegularExpression"] }), name: str({ minLength: 1, maxLength: 256 }), value: str({ maxLength: 4096 }) }, [
    "name",
    "value",
]);
const routeMatch = obj({
    path: obj({ type: str({ enum: ["Exact", "PathPrefix", "RegularExpression"] }), value: str({ maxLength: 1024 }) }),
    headers: arr(headerMatch, { maxItems: 16 }),
    queryParams: arr(headerMatch, { maxItems: 16 }),
    method: str({ enum: ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"] }),
});
const routeFilter = obj(
    {
        type: str({ enum: ["RequestHeaderModifier", "ResponseHeaderModifier", "RequestMirror", "RequestRedirect", "URLRewrite", "ExtensionRef", "CORS"] }),
        requestHeaderModifier: { type: "custom", check: () => [] },
        responseHeaderModifier: { type: "custom", check: () => [] },
        requestMirror: { type: "custom", check: () => [] },
        requestRedirect: { type: "custom", check: () => [] },
        urlRewrite: { type: "custom", check: () => [] },
        extensionRef: { type: "custom", check: () => [] },
        cors: { type: "custom", check: () => [] },
    },
    ["type"],
);
const backendRef = obj(
    {
        group: str({ maxLength: 253 }),
        kind: str({ minLength: 1, maxLength: 63 }),
        name: GW_NAME,
        namespace: str({ pattern: DNS_LABEL, maxLength: 63 }),
        port: int({ minimum: 1, maximum: 65535 }),
        weight: int({ minimum: 0, maximum: 1000000 }),
        filters: arr(routeFilter, { maxItems: 16 }),
    },
    ["name"],
);
const httpRouteSpec = obj({
    parentRefs: arr(parentRef, { maxItems: 32 }),
    hostnames: arr(str({ minLength: 1, maxLength: 253, pattern: /^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/ }), {
        maxItems: 16,
    }),
    rules: arr(
        obj({
            name: str({ pattern: DNS_LABEL, maxLength: 253 }),
            matches: arr(routeMatch, { maxItems: 64 }),
            filters: arr(routeFilter, { maxItems: 16 }),
            backendRefs: arr(backendRef, { maxItems: 16 }),
            timeouts: obj({ request: str({ pattern: /^([0-9]{1,5}(h|m|s|ms)){1,4}$/ }), backendRequest: str({ pattern: /^([0-9]{1,5}(h|m|s|ms)){1,4}$/ }) }),
        }),
        { maxItems: 16 },
    ),
});

/** cert-manager v1.21.2 `cert-manager.io/v1` Certificate: the fields the ingress sets (deploy/crds/cert-manager.io_certificates.yaml). */
const KEY_USAGES = [
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];
const certificateSpec = obj(
    {
        secretName: str({ minLength: 1 }),
        dnsNames: arr(str()),
        commonName: str(),
        duration: str(),
        renewBefore: str(),
        issuerRef: obj({ name: str({ minLength: 1 }), kind: str(), group: str() }, ["name"]),
        privateKey: obj({
            algorithm: str({ enum: ["RSA", "ECDSA", "Ed25519"] }),
            size: int(),
            encoding: str({ enum: ["PKCS1", "PKCS8"] }),
            rotationPolicy: str({ enum: ["Never", "Always"] }),
        }),
        usages: arr(str({ enum: KEY_USAGES })),
    },
    ["issuerRef", "secretName"],
);

/** Rules the CRDs express in CEL (x-kubernetes-validations), re-stated. */
function httpRouteRules(spec: any): string[] {
    const out: string[] = [];
    (spec?.rules ?? []).forEach((r: any, i: number) => {
        (r?.matches ?? []).forEach((m: any, j: number) => {
            const p = m?.path;
            if (p && (p.type ?? "PathPrefix") !== "RegularExpression" && typeof p.value === "string" && !p.value.startsWith("/")) {
                out.push(`/spec/rules/${i}/matches/${j}/path/value: must be an absolute path (start with '/')`);
            }
        });
        (r?.backendRefs ?? []).forEach((b: any, j: number) => {
            // "Must have port for Service reference": (group == "" && kind == "Service") ? has(port) : true
            if ((b?.group ?? "") === "" && (b?.kind ?? "Service") === "Service" && b?.port === undefined) {
                out.push(`/spec/rules/${i}/backendRefs/${j}/port: required for a Service backend`);
            }
        });
    });
    return out;
}

/**
 * JobSet v0.12.0, jobset.x-k8s.io/v1alpha2 JobSet (served and stored; config/components/crd/bases/
 * jobset.x-k8s.io_jobsets.yaml in the sigs.k8s.io/jobset module). Each replicated job embeds a batch/v1
 * JobTemplateSpec, checked strictly as a Job.
 */
const RULE_NAME = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;
const jobTemplate = obj(
    {
        metadata: obj({ labels: map, annotations: map }),
        spec: embedded((spec) => ({ apiVersion: "batch/v1", kind: "Job", metadata: { name: "embedded" }, spec }), "/spec"),
    },
    ["spec"],
);
const jobSetSpec = obj({
    coordinator: obj({ replicatedJob: str(), jobIndex: int(), podIndex: int() }, ["replicatedJob"]),
    failurePolicy: obj({
        maxRestarts: int({ minimum: 0 }),
        restartStrategy: str({ enum: ["Recreate", "BlockingRecreate", "InPlaceRestart"] }),
        rules: arr(
            obj(
                {
                    name: str({ pattern: RULE_NAME }),
                    action: str({ enum: ["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts", "RestartJob", "RestartJobAndIgnoreMaxRestarts"] }),
                    onJobFailureReasons: arr(str()),
                    onJobFailureMessagePatterns: arr(str()),
                    targetReplicatedJobs: arr(str()),
                },
                ["name", "action"],
            ),
        ),
    }),
    managedBy: str({ maxLength: 63 }),
    network: obj({ enableDNSHostnames: bool, publishNotReadyAddresses: bool, subdomain: str({ pattern: DNS_LABEL, maxLength: 63 }) }),
    replicatedJobs: arr(
        obj(
            {
                name: str({ pattern: DNS_LABEL, maxLength: 63 }),
                groupName: str(),
                replicas: int({ minimum: 0 }),
                dependsOn: arr(obj({ name: str(), status: str({ enum: ["Ready", "Complete"] }) }, ["name", "status"])),
                template: jobTemplate,
            },
            ["name", "template"],
        ),
    ),
    startupPolicy: obj({ startupPolicyOrder: str({ enum: ["AnyOrder", "InOrder"] }) }, ["startupPolicyOrder"]),
    successPolicy: obj({ operator: str({ enum: ["All", "Any"] }), targetReplicatedJobs: arr(str()) }, ["operator"]),
    suspend: bool,
    ttlSecondsAfterFinished: int({ minimum: 0 }),
});

/** prometheus-operator v1 types.go: Duration (`+kubebuilder:validation:Pattern`). */
const PROM_DURATION = /^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$/;
const labelSelector = obj({
    matchLabels: map,
    matchExpressions: arr(obj({ key: str(), operator: str({ enum: ["In", "NotIn", "Exists", "DoesNotExist"] }), values: arr(str()) }, ["key", "operator"])),
});
const podMonitorSpec = obj(
    {
        jobLabel: str(),
        podTargetLabels: arr(str()),
        selector: labelSelector,
        namespaceSelector: obj({ any: bool, matchNames: arr(str()) }),
        podMetricsEndpoints: arr(
            obj({
                port: str(),
                portNumber: int({ minimum: 1, maximum: 65535 }),
                path: str(),
                scheme: str({ enum: ["http", "https", "HTTP", "HTTPS"] }),
                interval: str({ pattern: PROM_DURATION }),
                scrapeTimeout: str({ pattern: PROM_DURATION }),
                honorLabels: bool,
                // RelabelConfig (prometheus_types.go): the fields a relabeling may set.
                relabelings: arr(
                    obj({
                        sourceLabels: arr(str()),
                        separator: str(),
                        targetLabel: str(),
                        regex: str(),
                        modulus: int({ minimum: 0 }),
                        replacement: str(),
                        action: str(),
                    }),
                ),
            }),
        ),
        sampleLimit: int({ minimum: 0 }),
    },
    ["podMetricsEndpoints", "selector"],
);
const prometheusRuleSpec = obj({
    groups: arr(
        obj(
            {
                name: str({ minLength: 1 }),
                labels: map,
                interval: str({ pattern: PROM_DURATION }),
                limit: int(),
                rules: arr(
                    obj(
                        {
                            record: str(),
                            alert: str(),
                            // IntOrString in the CRD: the project writes PromQL text.
                            expr: str({ minLength: 1 }),
                            for: str({ pattern: PROM_DURATION }),
                            keep_firing_for: str({ pattern: PROM_DURATION }),
                            labels: map,
                            annotations: map,
                        },
                        ["expr"],
                    ),
                ),
            },
            ["name"],
        ),
    ),
});

interface CrdKind {
    readonly spec: Schema;
    readonly extra?: (spec: any) => string[];
}

/** apiVersion/kind -> what the project relies on. */
export const CRD_KINDS: Readonly<Record<string, CrdKind>> = {
    "extensions.agents.x-k8s.io/v1beta1/SandboxTemplate": { spec: sandboxTemplateSpec },
    "extensions.agents.x-k8s.io/v1beta1/SandboxWarmPool": { spec: sandboxWarmPoolSpec },
    "extensions.agents.x-k8s.io/v1beta1/SandboxClaim": { spec: sandboxClaimSpec },
    "agents.x-k8s.io/v1beta1/Sandbox": { spec: sandboxSpec },
    "gateway.networking.k8s.io/v1/HTTPRoute": { spec: httpRouteSpec, extra: httpRouteRules },
    "cert-manager.io/v1/Certificate": { spec: certificateSpec },
    "jobset.x-k8s.io/v1alpha2/JobSet": { spec: jobSetSpec },
    "monitoring.coreos.com/v1/PodMonitor": { spec: podMonitorSpec },
    "monitoring.coreos.com/v1/PrometheusRule": {
        spec: prometheusRuleSpec,
        // +kubebuilder:validation:OneOf=Record,Alert (prometheusrule_types.go).
        extra: (spec) =>
            (spec?.groups ?? []).flatMap((g: any, i: number) =>
                (g.rules ?? []).flatMap((r: any, j: number) =>
                    (r.alert === undefined) === (r.record === undefined) ? [`/spec/groups/${i}/rules/${j}: exactly one of alert and record`] : [],
                ),
            ),
    },
};

function typeName(v: unknown): string {
    return v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
}

/** Problems of `value` against `schema`, with JSON-pointer paths. */
export function validateAgainst(schema: Schema, value: unknown, at = ""): string[] {
    const here = at || "/";
    switch (schema.type) {
        case "string": {
            if (typeof value !== "string") return [`${here}: must be string, got ${typeName(value)}`];
            const out: string[] = [];
            if (schema.enum && !schema.enum.includes(value)) out.push(`${here}: must be one of ${schema.enum.join(", ")}, got ${JSON.stringify(value)}`);
            if (schema.pattern && !schema.pattern.test(value)) out.push(`${here}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
            if (schema.minLength !== undefined && value.length < schema.minLength) out.push(`${here}: shorter than ${schema.minLength}`);
            if (schema.maxLength !== undefined && value.length > schema.maxLength) out.push(`${here}: longer than ${schema.maxLength}`);
            if (schema.format === "date-time" && !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value))
                out.push(`${here}: must be an RFC 3339 date-time`);
            return out;
        }
        case "integer":
            if (typeof value !== "number" || !Number.isInteger(value)) return [`${here}: must be integer, got ${typeName(value)}`];
            if (schema.minimum !== undefined && value < schema.minimum) return [`${here}: must be >= ${schema.minimum}`];
            if (schema.maximum !== undefined && value > schema.maximum) return [`${here}: must be <= ${schema.maximum}`];
            return [];
        case "boolean":
            return typeof value === "boolean" ? [] : [`${here}: must be boolean, got ${typeName(value)}`];
        case "map":
            if (typeName(value) !== "object") return [`${here}: must be a map of strings, got ${typeName(value)}`];
            return Object.entries(value as Record<string, unknown>)
                .filter(([, v]) => typeof v !== "string")
                .map(([k]) => `${at}/${k}: must be string`);
        case "array": {
            if (!Array.isArray(value)) return [`${here}: must be array, got ${typeName(value)}`];
            const out: string[] = [];
            if (schema.maxItems !== undefined && value.length > schema.maxItems) out.push(`${here}: more than ${schema.maxItems} items`);
            if (schema.minItems !== undefined && value.length < schema.minItems) out.push(`${here}: fewer than ${schema.minItems} items`);
            value.forEach((v, i) => {
                out.push(...validateAgainst(schema.items, v, `${at}/${i}`));
            });
            return out;
        }
        case "object": {
            if (typeName(value) !== "object") return [`${here}: must be object, got ${typeName(value)}`];
            const o = value as Record<string, unknown>;
            const out: string[] = [];
            for (const r of schema.required ?? []) if (o[r] === undefined) out.push(`${at}/${r}: required`);
            for (const [k, v] of Object.entries(o)) {
                if (v === undefined) continue;
                const sub = schema.properties[k];
                if (!sub) out.push(`${at}/${k}: unknown field "${k}" (known: ${Object.keys(schema.properties).join(", ")})`);
                else out.push(...validateAgainst(sub, v, `${at}/${k}`));
            }
            return out;
        }
        case "custom":
            return schema.check(value, at);
    }
}

/** Whether this helper knows the object's apiVersion/kind. */
export function isKnownCustomResource(obj: { apiVersion?: unknown; kind?: unknown }): boolean {
    return `${obj.apiVersion}/${obj.kind}` in CRD_KINDS;
}

/** Every problem of one custom resource (empty when valid); unknown apiVersion/kind is a problem. */
export function validateCustomResource(manifest: unknown): string[] {
    if (!manifest || typeof manifest !== "object") return ["manifest is not an object"];
    const o = manifest as Record<string, unknown>;
    const key = `${o.apiVersion}/${o.kind}`;
    const kind = CRD_KINDS[key];
    if (!kind) {
        const known = Object.keys(CRD_KINDS).join(", ");
        return [`${key}: not a custom resource this project knows (known: ${known}); a wrong group or version (e.g. agent-sandbox's v1alpha1) is refused here`];
    }
    const top = obj({ apiVersion: str(), kind: str(), metadata: objectMeta, spec: kind.spec }, ["metadata", "spec"]);
    const problems = validateAgainst(top, o);
    if ((o.metadata as any)?.name === undefined) problems.push("/metadata/name: required");
    if (kind.extra) problems.push(...kind.extra(o.spec));
    return problems;
}

/** Any Kubernetes object the project creates: built-in kinds through `validateManifestStrict`, custom resources here. */
export function validateAnyManifest(obj: unknown): string[] {
    if (obj && typeof obj === "object" && isKnownCustomResource(obj as Record<string, unknown>)) return validateCustomResource(obj);
    const o = obj as { apiVersion?: string } | undefined;
    // A custom group this helper does not know: say so, rather than "no schema known".
    if (o && typeof o.apiVersion === "string" && /x-k8s\.io|gateway\.networking|cert-manager\.io/.test(o.apiVersion)) return validateCustomResource(obj);
    return validateManifestStrict(obj);
}
