/**
 * The agent-rl-infra policy pack: organisation rules checked on what `pulumi preview/up`
 * is about to send (resource policies) and on the whole stack (stack policies, which can
 * resolve a Service to the pods it selects, or a pod to the NetworkPolicies covering it).
 *
 * Every check is a pure function over plain objects (`check*`), so the project's tests call
 * them on the real program's recorded resources; the policy objects below only adapt the
 * SDK's `args` to them. No provider SDK is imported: resources are matched by type token,
 * so the pack needs nothing but @pulumi/policy.
 *
 * Props are what the SDK hands a policy: plain JSON, secrets unwrapped (@pulumi/policy
 * deserialize.ts), unknown values (preview) behind a proxy that throws UnknownValueError,
 * which the SDK turns into an advisory "can't run during preview" note.
 */
import type {
    EnforcementLevel,
    Policies,
    PolicyPackConfig,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
} from "@pulumi/policy";
import * as pulumi from "@pulumi/pulumi";

// ---------------------------------------------------------------------------------------
// Shared facts (the platform's own conventions; components/config/names.ts podLabels). The pack
// stays standalone (@pulumi/policy only), so these are copies: test/stack/policy-facts.test.ts holds them equal.

/** vLLM's HTTP port (components/training VLLM_PORT). */
export const VLLM_PORT = 8000;
/** NCCL weight-update group port of `trl vllm-serve` (trl GRPOConfig.vllm_group_port). */
export const TRL_GROUP_PORT = 51216;
/** Ports that must never be reachable from outside the training pod, except through the proxy. */
export const PRIVATE_PORTS: readonly number[] = [VLLM_PORT, TRL_GROUP_PORT];
/** The label key of `podLabels(role, ...)`. */
export const ROLE_LABEL = "app.kubernetes.io/name";
/** Pods of the authenticated vLLM proxy: the only public face of vLLM. */
export const PROXY_ROLE = "vllm-ingress";
/** Pods running the trainer and its vLLM sidecar. */
export const TRAINER_ROLE = "trainer";
/** Namespace label the Platform sets on every namespace (`agentrl.dev/role: sandboxes`). */
export const NAMESPACE_ROLE_LABEL = "agentrl.dev/role";
export const SANDBOX_NAMESPACE_ROLE = "sandboxes";

/** Pulumi type tokens the pack reads. */
export const T = {
    namespace: "kubernetes:core/v1:Namespace",
    service: "kubernetes:core/v1:Service",
    configMap: "kubernetes:core/v1:ConfigMap",
    pod: "kubernetes:core/v1:Pod",
    networkPolicy: "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    ingress: "kubernetes:networking.k8s.io/v1:Ingress",
    httpRoute: "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
    sandboxTemplate: "kubernetes:extensions.agents.x-k8s.io/v1beta1:SandboxTemplate",
    sandbox: "kubernetes:agents.x-k8s.io/v1beta1:Sandbox",
    dockerContainer: "docker:index/container:Container",
    dockerImage: "docker:index/remoteImage:RemoteImage",
} as const;

type Obj = Record<string, any>;

function isObj(v: unknown): v is Obj {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

function list(v: unknown): any[] {
    return Array.isArray(v) ? v : [];
}

/** `kind` of a Kubernetes type token (`kubernetes:apps/v1:Deployment` -> Deployment); undefined otherwise. */
export function kubernetesKind(type: string): string | undefined {
    const m = /^kubernetes:[^:]+:([A-Za-z]+)$/.exec(type);
    return m ? m[1] : undefined;
}

/** What a check reports: a message, and (stack checks) the resource it is about. */
export interface Violation {
    readonly message: string;
    readonly urn?: string;
}

/** A resource as the checks see it (the SDK's PolicyResource, reduced to what they read). */
export interface PlainResource {
    readonly type: string;
    readonly name: string;
    readonly urn: string;
    readonly props: Obj;
}

/** `<Kind> <namespace>/<name>` for messages. */
function describeObject(type: string, props: Obj, fallbackName?: string): string {
    const kind = kubernetesKind(type) ?? type;
    const meta = isObj(props.metadata) ? props.metadata : {};
    const name = meta.name ?? props.name ?? fallbackName ?? "(unnamed)";
    return meta.namespace ? `${kind} ${meta.namespace}/${name}` : `${kind} ${name}`;
}

// ---------------------------------------------------------------------------------------
// Pod specs inside any workload

export interface PodSpecAt {
    /** Field path of the pod spec inside the object, e.g. `spec.template.spec`. */
    readonly path: string;
    readonly spec: Obj;
    /** Labels of the pods it makes. */
    readonly labels: Readonly<Record<string, string>>;
}

/** The pod spec(s) a Kubernetes object carries: Pod, workloads, CronJob, JobSet, agent-sandbox templates. */
export function podSpecsOf(type: string, props: Obj): PodSpecAt[] {
    const kind = kubernetesKind(type);
    const spec = isObj(props.spec) ? props.spec : undefined;
    if (!kind || !spec) return [];
    const at = (path: string, podSpec: unknown, meta: unknown): PodSpecAt[] =>
        isObj(podSpec) ? [{ path, spec: podSpec, labels: isObj(meta) && isObj(meta.labels) ? meta.labels : {} }] : [];
    switch (kind) {
        case "Pod":
            return at("spec", spec, props.metadata);
        case "Deployment":
        case "StatefulSet":
        case "DaemonSet":
        case "ReplicaSet":
        case "Job":
        case "ReplicationController":
            return isObj(spec.template) ? at("spec.template.spec", spec.template.spec, spec.template.metadata) : [];
        case "CronJob": {
            const tpl = spec.jobTemplate?.spec?.template;
            return isObj(tpl) ? at("spec.jobTemplate.spec.template.spec", tpl.spec, tpl.metadata) : [];
        }
        case "SandboxTemplate":
        case "Sandbox":
            return isObj(spec.podTemplate) ? at("spec.podTemplate.spec", spec.podTemplate.spec, spec.podTemplate.metadata) : [];
        case "JobSet":
            // jobset.x-k8s.io: each replicated job embeds a Job template (the multi-node trainer).
            return list(spec.replicatedJobs).flatMap((rj, i) => {
                const tpl = isObj(rj) ? rj.template?.spec?.template : undefined;
                return isObj(tpl) ? at(`spec.replicatedJobs[${i}].template.spec.template.spec`, tpl.spec, tpl.metadata) : [];
            });
        default:
            return [];
    }
}

interface ContainerAt {
    readonly path: string;
    readonly container: Obj;
}

function containersOf(pod: PodSpecAt): ContainerAt[] {
    const out: ContainerAt[] = [];
    for (const field of ["initContainers", "containers"] as const) {
        list(pod.spec[field]).forEach((c, i) => {
            if (isObj(c)) out.push({ path: `${pod.path}.${field}[${i}]${c.name ? ` (${c.name})` : ""}`, container: c });
        });
    }
    return out;
}

// ---------------------------------------------------------------------------------------
// Label selectors

/** Whether a Kubernetes LabelSelector (matchLabels + matchExpressions) selects `labels`. An empty selector selects all. */
export function selectorMatches(selector: unknown, labels: Readonly<Record<string, string>>): boolean {
    if (!isObj(selector)) return false;
    const ml = isObj(selector.matchLabels) ? selector.matchLabels : {};
    for (const [k, v] of Object.entries(ml)) if (labels[k] !== v) return false;
    for (const e of list(selector.matchExpressions)) {
        if (!isObj(e)) continue;
        const has = Object.hasOwn(labels, e.key);
        const values = list(e.values);
        if (e.operator === "In" && !(has && values.includes(labels[e.key]))) return false;
        if (e.operator === "NotIn" && has && values.includes(labels[e.key])) return false;
        if (e.operator === "Exists" && !has) return false;
        if (e.operator === "DoesNotExist" && has) return false;
    }
    return true;
}

/** A Service's `spec.selector` (a plain map) as pod labels it requires. */
function serviceSelects(selector: unknown, labels: Readonly<Record<string, string>>): boolean {
    if (!isObj(selector) || Object.keys(selector).length === 0) return false;
    return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

// ---------------------------------------------------------------------------------------
// 1. vLLM and the trainer are reached only through the proxy

const EXTERNAL_SERVICE_TYPES = ["LoadBalancer", "NodePort"];

function privatePort(p: unknown): boolean {
    return typeof p === "number" && PRIVATE_PORTS.includes(p);
}

/** Whether a Service selector is the proxy's (selects pods labelled `app.kubernetes.io/name: vllm-ingress`). */
function selectsProxy(selector: unknown): boolean {
    return isObj(selector) && selector[ROLE_LABEL] === PROXY_ROLE;
}

const EXPOSE_FIX =
    "expose vLLM only through the VllmIngress proxy (ingress.exposure: loadbalancer or httproute puts the proxy, not vLLM, in front): keep this Service ClusterIP, or select the proxy pods (app.kubernetes.io/name: vllm-ingress)";

/** Resource check: external Services, Ingresses and HTTPRoutes never reach vLLM/trainer ports or pods directly. */
export function checkVllmNotExposed(type: string, props: Obj): string[] {
    const what = describeObject(type, props);
    const out: string[] = [];
    if (type === T.service) {
        const spec = isObj(props.spec) ? props.spec : {};
        const svcType = spec.type ?? "ClusterIP";
        if (!EXTERNAL_SERVICE_TYPES.includes(svcType) || selectsProxy(spec.selector)) return [];
        const sel = isObj(spec.selector) ? spec.selector : undefined;
        if (!sel || Object.keys(sel).length === 0) {
            out.push(`${what}: a ${svcType} Service without a selector can be pointed at any pod (vLLM included): ${EXPOSE_FIX}`);
        }
        if (sel && sel[ROLE_LABEL] === TRAINER_ROLE) {
            out.push(
                `${what}: a ${svcType} Service selects the trainer/vLLM pods (${ROLE_LABEL}: ${TRAINER_ROLE}), which puts vLLM's unauthenticated API and the weight-sync port on the network: ${EXPOSE_FIX}`,
            );
        }
        for (const p of list(spec.ports)) {
            const hits = [p?.port, p?.targetPort, p?.nodePort].filter(privatePort);
            if (hits.length > 0) out.push(`${what}: a ${svcType} Service exposes port ${hits[0]} (vLLM ${VLLM_PORT} / NCCL ${TRL_GROUP_PORT}): ${EXPOSE_FIX}`);
        }
        return out;
    }
    if (type === T.ingress) {
        for (const b of ingressBackends(props)) {
            if (privatePort(b.port))
                out.push(
                    `${what}: ${b.path} routes to Service ${b.service} port ${b.port} (vLLM ${VLLM_PORT} / NCCL ${TRL_GROUP_PORT}): route to the VllmIngress proxy Service instead`,
                );
        }
        return out;
    }
    if (type === T.httpRoute) {
        for (const b of httpRouteBackends(props)) {
            if (b.kind !== "Service")
                out.push(`${what}: ${b.path} is a ${b.kind}, not the VllmIngress proxy Service: point backendRefs at the proxy Service only`);
            if (privatePort(b.port))
                out.push(
                    `${what}: ${b.path} routes to port ${b.port} (vLLM ${VLLM_PORT} / NCCL ${TRL_GROUP_PORT}): point backendRefs at the VllmIngress proxy Service and its port`,
                );
        }
        return out;
    }
    if (type === T.dockerContainer) {
        for (const p of list(props.ports)) {
            if (privatePort(p?.internal) || privatePort(p?.external)) {
                out.push(
                    `Container ${props.name ?? "(unnamed)"}: publishes port ${p.internal} on the Docker host (vLLM ${VLLM_PORT} / NCCL ${TRL_GROUP_PORT}): publish only the VllmIngress proxy's port, keep vLLM on the private training network`,
                );
            }
        }
        if (props.networkMode === "host" && /vllm|trainer|train/.test(String(props.name ?? ""))) {
            out.push(`Container ${props.name}: networkMode host puts vLLM's port ${VLLM_PORT} on the host's interfaces: use the private training network`);
        }
    }
    return out;
}

interface Backend {
    readonly path: string;
    readonly service: string;
    readonly namespace?: string;
    readonly kind: string;
    readonly port?: number | string;
}

function ingressBackends(props: Obj): Backend[] {
    const spec = isObj(props.spec) ? props.spec : {};
    const out: Backend[] = [];
    const add = (path: string, b: unknown) => {
        if (!isObj(b)) return;
        if (isObj(b.service)) out.push({ path, service: String(b.service.name), kind: "Service", port: b.service.port?.number ?? b.service.port?.name });
        else if (isObj(b.resource)) out.push({ path, service: String(b.resource.name), kind: String(b.resource.kind) });
    };
    add("spec.defaultBackend", spec.defaultBackend);
    list(spec.rules).forEach((r, i) => {
        for (const [j, p] of list(r?.http?.paths).entries()) add(`spec.rules[${i}].http.paths[${j}].backend`, p?.backend);
    });
    return out;
}

function httpRouteBackends(props: Obj): Backend[] {
    const spec = isObj(props.spec) ? props.spec : {};
    const out: Backend[] = [];
    list(spec.rules).forEach((r, i) => {
        list(r?.backendRefs).forEach((b, j) => {
            if (!isObj(b)) return;
            // Gateway API defaults: group "" and kind Service.
            const kind = (b.group ?? "") === "" ? (b.kind ?? "Service") : `${b.group}/${b.kind}`;
            out.push({ path: `spec.rules[${i}].backendRefs[${j}]`, service: String(b.name), namespace: b.namespace, kind, port: b.port });
        });
    });
    return out;
}

/** Whether a Service selector picks the trainer role, or pods of a stack workload that run vLLM or are labelled trainer. */
function selectsTrainerOrVllm(resources: readonly PlainResource[], selector: unknown, namespace: string | undefined): boolean {
    if (isObj(selector) && selector[ROLE_LABEL] === TRAINER_ROLE) return true;
    return resources.some(
        (r) =>
            (namespace === undefined || r.props.metadata?.namespace === namespace) &&
            podSpecsOf(r.type, r.props).some(
                (p) =>
                    serviceSelects(selector, p.labels) && (p.labels[ROLE_LABEL] === TRAINER_ROLE || containersOf(p).some((c) => isVllmContainer(c.container))),
            ),
    );
}

/**
 * Stack check: every Ingress / HTTPRoute backend Service, resolved to the pods it selects,
 * is the proxy. An HTTPRoute backend must be a Service of this stack selecting the proxy pods.
 */
export function checkRoutesReachOnlyProxy(resources: readonly PlainResource[]): Violation[] {
    const services = resources.filter((r) => r.type === T.service);
    const find = (name: string, ns: string | undefined) =>
        services.find(
            (s) => s.props.metadata?.name === name && (ns === undefined || s.props.metadata?.namespace === undefined || s.props.metadata?.namespace === ns),
        );
    const out: Violation[] = [];
    for (const r of resources) {
        const isRoute = r.type === T.httpRoute;
        if (!isRoute && r.type !== T.ingress) continue;
        const ns = r.props.metadata?.namespace;
        const what = describeObject(r.type, r.props, r.name);
        for (const b of isRoute ? httpRouteBackends(r.props) : ingressBackends(r.props)) {
            if (b.kind !== "Service") continue;
            const svc = find(b.service, b.namespace ?? ns);
            if (!svc) {
                if (isRoute) {
                    out.push({
                        urn: r.urn,
                        message: `${what}: ${b.path} names Service ${b.namespace ?? ns ?? ""}/${b.service}, which this stack does not create, so it cannot be shown to be the VllmIngress proxy: point backendRefs at the proxy Service (app.kubernetes.io/name: vllm-ingress)`,
                    });
                }
                continue;
            }
            const sel = svc.props.spec?.selector;
            if (selectsProxy(sel)) continue;
            if (selectsTrainerOrVllm(resources, sel, svc.props.metadata?.namespace)) {
                out.push({
                    urn: r.urn,
                    message: `${what}: ${b.path} reaches Service ${b.service}, which selects the trainer/vLLM pods (${ROLE_LABEL}: ${TRAINER_ROLE}): route to the VllmIngress proxy Service instead`,
                });
            } else if (isRoute) {
                out.push({
                    urn: r.urn,
                    message: `${what}: ${b.path} reaches Service ${b.service}, which does not select the VllmIngress proxy pods (${ROLE_LABEL}: ${PROXY_ROLE}): the Gateway must forward only to the proxy`,
                });
            }
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------
// 2. Sandbox pods are hardened and egress-locked

/** Hardening problems of one sandbox pod spec (empty when hardened). */
export function sandboxPodProblems(what: string, pod: PodSpecAt): string[] {
    const s = pod.spec;
    const out: string[] = [];
    if (s.automountServiceAccountToken !== false) {
        out.push(
            `${what}: ${pod.path}.automountServiceAccountToken is ${JSON.stringify(s.automountServiceAccountToken)}: set it to false (sandboxes run untrusted code and must not hold an API token)`,
        );
    }
    const podNonRoot = s.securityContext?.runAsNonRoot === true;
    const isolated = typeof s.runtimeClassName === "string" && s.runtimeClassName !== "";
    for (const { path, container: c } of containersOf(pod)) {
        const nonRoot = c.securityContext?.runAsNonRoot ?? (podNonRoot ? true : undefined);
        if (nonRoot !== true && !isolated) {
            out.push(
                `${what}: ${path} may run as root: set securityContext.runAsNonRoot: true (pod or container), or run the sandbox under a sandboxing runtime (sandboxes.runtimeClassName, e.g. gvisor)`,
            );
        }
        const drop = list(c.securityContext?.capabilities?.drop);
        if (!drop.includes("ALL")) {
            out.push(`${what}: ${path} keeps Linux capabilities: set securityContext.capabilities.drop: [ALL]`);
        }
        const limits = isObj(c.resources?.limits) ? c.resources.limits : {};
        const missing = ["cpu", "memory"].filter((k) => limits[k] === undefined);
        if (missing.length > 0) {
            out.push(
                `${what}: ${path} has no ${missing.join("/")} limit: set resources.limits (sandboxes.cpu / sandboxes.memory), so one sandbox cannot starve the node`,
            );
        }
    }
    return out;
}

/** Resource check: SandboxTemplate / Sandbox pod templates are hardened. */
export function checkSandboxTemplateHardening(type: string, props: Obj): string[] {
    if (type !== T.sandboxTemplate && type !== T.sandbox) return [];
    const what = describeObject(type, props);
    const pods = podSpecsOf(type, props);
    if (pods.length === 0) return [`${what}: spec.podTemplate.spec is missing: a sandbox needs an explicit, hardened pod spec`];
    return pods.flatMap((p) => sandboxPodProblems(what, p));
}

/** Namespaces labelled `agentrl.dev/role: sandboxes`, by name. */
function sandboxNamespaces(resources: readonly PlainResource[]): Set<string> {
    const out = new Set<string>();
    for (const r of resources) {
        if (r.type !== T.namespace) continue;
        const m = r.props.metadata;
        if (isObj(m) && isObj(m.labels) && m.labels[NAMESPACE_ROLE_LABEL] === SANDBOX_NAMESPACE_ROLE && typeof m.name === "string") out.add(m.name);
    }
    return out;
}

interface SandboxPods {
    readonly resource: PlainResource;
    readonly namespace: string | undefined;
    readonly pod: PodSpecAt;
    /** Whether the object is an agent-sandbox template (checked by the resource policy already). */
    readonly template: boolean;
}

/** Every sandbox pod the stack makes: agent-sandbox templates anywhere, and any workload in a sandbox namespace. */
export function sandboxPodsOf(resources: readonly PlainResource[]): SandboxPods[] {
    const namespaces = sandboxNamespaces(resources);
    const out: SandboxPods[] = [];
    for (const r of resources) {
        const template = r.type === T.sandboxTemplate || r.type === T.sandbox;
        const ns = r.props.metadata?.namespace;
        if (!template && !(typeof ns === "string" && namespaces.has(ns))) continue;
        for (const pod of podSpecsOf(r.type, r.props)) out.push({ resource: r, namespace: ns, pod, template });
    }
    return out;
}

/** Stack check: workloads in a sandbox namespace are hardened like sandbox templates. */
export function checkSandboxNamespaceWorkloads(resources: readonly PlainResource[]): Violation[] {
    return sandboxPodsOf(resources)
        .filter((p) => !p.template)
        .flatMap((p) =>
            sandboxPodProblems(`${describeObject(p.resource.type, p.resource.props, p.resource.name)} (in sandbox namespace ${p.namespace})`, p.pod).map(
                (message) => ({ message, urn: p.resource.urn }),
            ),
        );
}

/** Stack check: every sandbox pod is selected by a NetworkPolicy with Egress in the same namespace. */
export function checkSandboxEgress(resources: readonly PlainResource[]): Violation[] {
    const policies = resources.filter((r) => r.type === T.networkPolicy);
    const out: Violation[] = [];
    for (const p of sandboxPodsOf(resources)) {
        const covered = policies.some((np) => {
            const spec = np.props.spec;
            if (!isObj(spec)) return false;
            if (np.props.metadata?.namespace !== p.namespace) return false;
            // policyTypes defaults to [Ingress] (+ Egress only when egress rules are present).
            const types = Array.isArray(spec.policyTypes) ? spec.policyTypes : Array.isArray(spec.egress) ? ["Ingress", "Egress"] : ["Ingress"];
            return types.includes("Egress") && selectorMatches(spec.podSelector, p.pod.labels);
        });
        if (!covered) {
            out.push({
                urn: p.resource.urn,
                message: `${describeObject(p.resource.type, p.resource.props, p.resource.name)}: its sandbox pods (labels ${JSON.stringify(p.pod.labels)}) are not selected by any NetworkPolicy with Egress in policyTypes in namespace ${p.namespace ?? "(default)"}, so untrusted code can reach anything: add an egress NetworkPolicy that selects them and allows only DNS and the VllmIngress proxy (the SandboxPool creates one)`,
            });
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------
// 3. GPUs are not overcommitted; vLLM gets time to load

/** Resource check: every GPU resource (name contains "gpu") has request == limit on every container. */
export function checkGpuRequestsEqualLimits(type: string, props: Obj): string[] {
    const what = describeObject(type, props);
    const out: string[] = [];
    for (const pod of podSpecsOf(type, props)) {
        for (const { path, container: c } of containersOf(pod)) {
            const req = isObj(c.resources?.requests) ? c.resources.requests : {};
            const lim = isObj(c.resources?.limits) ? c.resources.limits : {};
            for (const name of new Set([...Object.keys(req), ...Object.keys(lim)])) {
                if (!/gpu/i.test(name)) continue;
                if (lim[name] === undefined) {
                    out.push(
                        `${what}: ${path} requests ${req[name]} ${name} without a limit: GPUs cannot be overcommitted, set resources.limits.${name} equal to the request`,
                    );
                } else if (req[name] !== undefined && String(req[name]) !== String(lim[name])) {
                    out.push(
                        `${what}: ${path} requests ${req[name]} ${name} but limits it to ${lim[name]}: set the request equal to the limit (GPUs are not shared or overcommitted)`,
                    );
                }
            }
        }
    }
    return out;
}

/** The command line a container runs (command + args). */
function commandLine(c: Obj): string {
    return [...list(c.command), ...list(c.args)].map(String).join(" ").trim();
}

/** Whether a container runs a vLLM server: named `vllm`, or `vllm serve`, `trl vllm-serve`, `python -m vllm.entrypoints...`. */
export function isVllmContainer(c: Obj): boolean {
    const cmd = commandLine(c);
    // A shell script that starts vLLM counts too (the one-container supervisor: `sh -c '... vllm serve ...'`).
    const script = /^(\S*\/)?(sh|bash|dash)\s+-c\s/.test(cmd);
    return (
        c.name === "vllm" ||
        /^(\S*\/)?vllm\s+serve\b/.test(cmd) ||
        /^(\S*\/)?trl\s+vllm-serve\b/.test(cmd) ||
        /\bvllm\.entrypoints\b/.test(cmd) ||
        (script && /\b(vllm\s+serve|trl\s+vllm-serve)\b/.test(cmd))
    );
}

/** Resource check: every vLLM container has a startup probe (Kubernetes) / a health check with a start period (Docker). */
export function checkVllmStartupProbe(type: string, props: Obj): string[] {
    const what = describeObject(type, props);
    const out: string[] = [];
    for (const pod of podSpecsOf(type, props)) {
        for (const { path, container: c } of containersOf(pod)) {
            if (isVllmContainer(c) && !isObj(c.startupProbe)) {
                out.push(
                    `${what}: ${path} runs vLLM without a startupProbe: loading a model takes minutes and the liveness probe would kill it first; add a startupProbe on /health with periodSeconds x failureThreshold >= the load time (training.modelLoadSeconds)`,
                );
            }
        }
    }
    if (type === T.dockerContainer) {
        const c = { name: undefined, command: props.entrypoints, args: props.command };
        // Docker: `entrypoints` is the command, `command` the arguments.
        if (isVllmContainer(c) && !(isObj(props.healthcheck) && props.healthcheck.startPeriod)) {
            out.push(
                `Container ${props.name}: runs vLLM without a healthcheck start period: add healthcheck with startPeriod >= the model load time (training.modelLoadSeconds), so the trainer waits for a loaded model`,
            );
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------
// 4. No secret values in ConfigMaps or env literals

/** Env var / data key names that hold secrets: `*_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, and `HF_TOKEN`. */
export function isSecretName(name: string): boolean {
    return name === "HF_TOKEN" || /_(KEY|TOKEN|SECRET|PASSWORD)$/i.test(name);
}

/** A bearer token written out (not a placeholder such as `Bearer <key>` or `Bearer realm=`). */
const BEARER_LITERAL = /\bBearer\s+([A-Za-z0-9._~+/-]{16,}=*)/;

/** Resource check: Kubernetes env vars with secret names use secretKeyRef; ConfigMaps hold no secret. */
export function checkNoPlainSecrets(type: string, props: Obj): string[] {
    const what = describeObject(type, props);
    const out: string[] = [];
    for (const pod of podSpecsOf(type, props)) {
        for (const { path, container: c } of containersOf(pod)) {
            for (const e of list(c.env)) {
                if (!isObj(e) || typeof e.name !== "string" || !isSecretName(e.name)) continue;
                if (isObj(e.valueFrom?.secretKeyRef)) continue;
                const how = e.value !== undefined ? "a literal value" : isObj(e.valueFrom?.configMapKeyRef) ? "a ConfigMap" : "no Secret";
                out.push(
                    `${what}: ${path} env ${e.name} comes from ${how}: a secret must come from a Secret (valueFrom.secretKeyRef), set with pulumi config set --secret; a literal lands in the manifest, the state and kubectl describe`,
                );
            }
        }
    }
    if (type === T.configMap) {
        for (const field of ["data", "binaryData"]) {
            const data = isObj(props[field]) ? props[field] : {};
            for (const [k, v] of Object.entries(data)) {
                if (isSecretName(k))
                    out.push(
                        `${what}: ${field}.${k} looks like a secret (its name ends in _KEY/_TOKEN/_SECRET/_PASSWORD): move it to a Secret and reference it with secretKeyRef`,
                    );
                if (typeof v === "string" && BEARER_LITERAL.test(v))
                    out.push(
                        `${what}: ${field}.${k} contains a Bearer token literal: keep keys in a Secret (the ingress keys file is one), never in a ConfigMap`,
                    );
            }
        }
    }
    return out;
}

/** Env var names the platform fills only from secret config keys (config rejects them in extraEnv). */
export const PLATFORM_SECRET_ENV: readonly string[] = ["HF_TOKEN", "OPENCODE_UPSTREAM_API_KEY", "SANDBOX_ROLLOUT_ADMIN_KEY"];

/** A Pulumi secret as the engine serialises it, `{ [specialSigKey]: specialSecretSig, value }` (@pulumi/pulumi runtime/rpc.ts); visible to checks given raw inputs, e.g. the tests' mocks. */
function isSecretValue(v: unknown): boolean {
    return isObj(v) && v[pulumi.runtime.specialSigKey] === pulumi.runtime.specialSecretSig;
}

/**
 * Resource check (advisory only): Docker containers' `envs` ("NAME=value") with secret names.
 * Docker has no secretKeyRef: the value is always in the container's config. The policy SDK
 * hands policies plain props (secrets unwrapped), so it cannot tell a secret Output from a
 * literal; it accepts the names the platform fills from secret config keys, and flags others.
 */
export function checkDockerEnvSecrets(type: string, props: Obj, allowed: readonly string[] = PLATFORM_SECRET_ENV): string[] {
    if (type !== T.dockerContainer) return [];
    if (isSecretValue(props.envs)) return [];
    const out: string[] = [];
    for (const e of list(props.envs)) {
        if (isSecretValue(e) || typeof e !== "string") continue;
        const name = e.split("=", 1)[0];
        if (isSecretName(name) && !allowed.includes(name)) {
            out.push(
                `Container ${props.name ?? "(unnamed)"}: env ${name} looks like a secret passed as a plain value: pass it from a secret config key (pulumi config set --secret) as a secret Output; Docker keeps it in the container config either way, so prefer the platform's own secret keys`,
            );
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------
// 5. prod: every image pinned by digest

const DIGEST = /@sha256:[0-9a-f]{64}$/;

/** Whether an image reference is pinned by digest. */
export function isPinned(image: unknown): boolean {
    return typeof image === "string" && DIGEST.test(image);
}

const PIN_FIX =
    "pin it by digest (<image>@sha256:<64 hex digits>; docker buildx imagetools inspect <image> shows it) in the stack's images.* / envs.*.image / sandboxes.image";

/** Resource check: every container image (Kubernetes, sandbox templates, Docker) is pinned by digest. */
export function checkImagesPinned(type: string, props: Obj): string[] {
    const what = describeObject(type, props);
    const out: string[] = [];
    for (const pod of podSpecsOf(type, props)) {
        for (const { path, container: c } of containersOf(pod)) {
            if (!isPinned(c.image)) out.push(`${what}: ${path} image '${c.image}' is not pinned: ${PIN_FIX}`);
        }
    }
    if (type === T.dockerImage && !isPinned(props.name)) out.push(`RemoteImage ${props.name}: not pinned: ${PIN_FIX}`);
    if (type === T.dockerContainer && typeof props.image === "string" && !props.image.startsWith("sha256:") && !isPinned(props.image)) {
        out.push(`Container ${props.name}: image '${props.image}' is not pinned: ${PIN_FIX}`);
    }
    return out;
}

// ---------------------------------------------------------------------------------------
// The policies

function resourcePolicy(
    name: string,
    description: string,
    check: (type: string, props: Obj, args: ResourceValidationArgs) => string[],
    extra: Partial<ResourceValidationPolicy> = {},
): ResourceValidationPolicy {
    return {
        name,
        description,
        ...extra,
        validateResource: (args: ResourceValidationArgs, report: ReportViolation) => {
            for (const m of check(args.type, args.props, args)) report(m);
        },
    };
}

function stackPolicy(
    name: string,
    description: string,
    check: (resources: PlainResource[]) => Violation[],
    extra: Partial<StackValidationPolicy> = {},
): StackValidationPolicy {
    return {
        name,
        description,
        ...extra,
        validateStack: (args: StackValidationArgs, report: ReportViolation) => {
            for (const v of check(args.resources)) report(v.message, v.urn);
        },
    };
}

export const vllmNotExposed = resourcePolicy(
    "vllm-not-exposed",
    "No LoadBalancer/NodePort Service, Ingress, HTTPRoute or published Docker port reaches vLLM (8000) or the NCCL port (51216) or selects the trainer pods; only the VllmIngress proxy is public.",
    (type, props) => checkVllmNotExposed(type, props),
    { severity: "critical" },
);

export const routesReachOnlyProxy = stackPolicy(
    "routes-reach-only-proxy",
    "Every Ingress/HTTPRoute backend Service, resolved to the pods it selects, is the VllmIngress proxy; an HTTPRoute's backendRef must be the proxy Service.",
    checkRoutesReachOnlyProxy,
    { severity: "critical" },
);

export const sandboxPodHardening = resourcePolicy(
    "sandbox-pod-hardening",
    "SandboxTemplate pods: no service account token, non-root or a sandboxing runtimeClass, capabilities drop ALL, CPU and memory limits on every container.",
    (type, props) => checkSandboxTemplateHardening(type, props),
    { severity: "high" },
);

export const sandboxNamespaceHardening = stackPolicy(
    "sandbox-namespace-hardening",
    "Pods, Deployments, StatefulSets, Jobs in a namespace labelled agentrl.dev/role: sandboxes are hardened like sandbox templates.",
    checkSandboxNamespaceWorkloads,
    { severity: "high" },
);

export const sandboxEgressLocked = stackPolicy(
    "sandbox-egress-locked",
    "Every sandbox pod is selected by a NetworkPolicy with Egress in policyTypes in its namespace.",
    checkSandboxEgress,
    { severity: "high" },
);

export const gpuRequestsEqualLimits = resourcePolicy(
    "gpu-requests-equal-limits",
    "Every container and initContainer sets GPU requests (any resource name containing 'gpu') equal to limits.",
    (type, props) => checkGpuRequestsEqualLimits(type, props),
    { severity: "medium" },
);

export const vllmStartupProbe = resourcePolicy(
    "vllm-startup-probe",
    "Every vLLM container (name vllm, or vllm serve / trl vllm-serve / vllm.entrypoints) has a startupProbe (Docker: a healthcheck start period).",
    (type, props) => checkVllmStartupProbe(type, props),
    { severity: "medium" },
);

export const noPlainSecrets = resourcePolicy(
    "no-plain-secrets",
    "Env vars named *_KEY, *_TOKEN, *_SECRET, *_PASSWORD or HF_TOKEN come from secretKeyRef; ConfigMaps hold no such keys and no Bearer token literals.",
    (type, props) => checkNoPlainSecrets(type, props),
    { severity: "high" },
);

export const dockerEnvSecrets = resourcePolicy(
    "docker-env-secrets",
    "Docker containers pass secret-named env vars only for the platform's own secret keys (advisory: the policy SDK cannot see Pulumi's secret marking, and Docker has no secretKeyRef).",
    (type, props, args) => checkDockerEnvSecrets(type, props, args.getConfig<{ allowedSecretEnv?: string[] }>().allowedSecretEnv ?? PLATFORM_SECRET_ENV),
    {
        // Always advisory, also under config.prod.json (which sets it explicitly).
        enforcementLevel: "advisory",
        severity: "medium",
        configSchema: { properties: { allowedSecretEnv: { type: "array", items: { type: "string" }, default: [...PLATFORM_SECRET_ENV] } } },
    },
);

export const prodImagesPinned = resourcePolicy(
    "prod-images-pinned-by-digest",
    "prod: every image (containers, initContainers, SandboxTemplate pods, Docker RemoteImage name / Container image) is pinned by @sha256 digest.",
    (type, props) => checkImagesPinned(type, props),
    // Off unless a config turns it on: policy/config.prod.json does, for prod stacks.
    { enforcementLevel: "disabled", severity: "high" },
);

export const resourcePolicies: ResourceValidationPolicy[] = [
    vllmNotExposed,
    sandboxPodHardening,
    gpuRequestsEqualLimits,
    vllmStartupProbe,
    noPlainSecrets,
    dockerEnvSecrets,
    prodImagesPinned,
];
export const stackPolicies: StackValidationPolicy[] = [routesReachOnlyProxy, sandboxNamespaceHardening, sandboxEgressLocked];
export const policies: Policies = [...resourcePolicies, ...stackPolicies];

/** The pack's default enforcement level (index.ts): advisory, so dev and staging are warned, not blocked. */
export const PACK_ENFORCEMENT: EnforcementLevel = "advisory";

/**
 * The enforcement level the Pulumi CLI applies to a policy under a `--policy-pack-config`
 * file: the policy's own entry wins, then `all`, then the policy's level, then the pack's
 * (pulumi docs "Configuring policy packs").
 */
export function effectiveEnforcement(policy: { name: string; enforcementLevel?: EnforcementLevel }, config: PolicyPackConfig = {}): EnforcementLevel {
    const own = config[policy.name];
    const ownLevel = typeof own === "string" ? own : isObj(own) ? (own.enforcementLevel as EnforcementLevel | undefined) : undefined;
    const all = config.all;
    const allLevel = typeof all === "string" ? all : isObj(all) ? (all.enforcementLevel as EnforcementLevel | undefined) : undefined;
    return ownLevel ?? allLevel ?? policy.enforcementLevel ?? PACK_ENFORCEMENT;
}
