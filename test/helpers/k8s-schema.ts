/**
 * Strict Kubernetes schema check for manifests the programs send, with no cluster:
 * kubernetes-models (Kubernetes 1.36 OpenAPI) validates types and required fields, and
 * because its validators accept unknown fields (the OpenAPI schemas allow them), the
 * object is also walked against the models' TypeScript interfaces with the TypeScript
 * checker: every key must be a declared property (maps such as labels excepted), so a
 * typo such as `startupprobe` is an error, as with `kubectl apply --validate=strict`.
 */
import * as path from "node:path";
import * as ts from "typescript";

/** Built-in kinds this helper knows: apiVersion/kind -> kubernetes-models module path and interface. */
const KINDS: Record<string, { module: string; iface: string }> = {};
function kind(apiVersion: string, k: string): void {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
    const module = group === "" ? `kubernetes-models/${version}/${k}` : `kubernetes-models/${group}/${version}/${k}`;
    KINDS[`${apiVersion}/${k}`] = { module, iface: `I${k}` };
}
for (const k of ["Namespace", "Service", "ServiceAccount", "Secret", "ConfigMap", "PersistentVolumeClaim", "Pod", "ResourceQuota", "LimitRange"]) kind("v1", k);
for (const k of ["Deployment", "StatefulSet", "DaemonSet"]) kind("apps/v1", k);
for (const k of ["Job", "CronJob"]) kind("batch/v1", k);
for (const k of ["NetworkPolicy", "Ingress"]) kind("networking.k8s.io/v1", k);
for (const k of ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]) kind("rbac.authorization.k8s.io/v1", k);
kind("policy/v1", "PodDisruptionBudget");
for (const k of ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]) kind("admissionregistration.k8s.io/v1", k);
kind("autoscaling/v2", "HorizontalPodAutoscaler");
kind("scheduling.k8s.io/v1", "PriorityClass");
kind("node.k8s.io/v1", "RuntimeClass");

type ModelClass = new (data: unknown) => { validate(): void };
const models = new Map<string, ModelClass>();

/**
 * Loads the kubernetes-models classes of every known kind. kubernetes-models is ESM-only
 * (its exports have only an "import" condition), so it is loaded with a dynamic import
 * once, and `validateManifestStrict` stays synchronous.
 */
export async function loadManifestSchemas(): Promise<void> {
    await Promise.all(
        Object.entries(KINDS).map(async ([key, v]) => {
            const mod = (await import(v.module)) as Record<string, ModelClass>;
            models.set(key, mod[key.split("/").pop()!]);
        }),
    );
    typeTable();
}

let cached: { checker: ts.TypeChecker; types: Map<string, ts.Type> } | undefined;

/** One TypeScript program over every known kind's interface, built once per process. */
function typeTable(): { checker: ts.TypeChecker; types: Map<string, ts.Type> } {
    if (cached) return cached;
    const root = path.resolve(__dirname, "../..");
    const virtual = path.join(root, "test/helpers/__k8s_kinds__.ts");
    const entries = Object.entries(KINDS);
    const text = entries.map(([, v], i) => `import type { ${v.iface} as K${i} } from "${v.module}";\nexport type T${i} = K${i};`).join("\n");
    const options: ts.CompilerOptions = {
        strict: true,
        noEmit: true,
        module: ts.ModuleKind.CommonJS,
        moduleResolution: ts.ModuleResolutionKind.Node10,
        skipLibCheck: true,
        types: [],
        baseUrl: root,
    };
    const host = ts.createCompilerHost(options);
    const readFile = host.readFile.bind(host);
    const fileExists = host.fileExists.bind(host);
    const getSourceFile = host.getSourceFile.bind(host);
    host.fileExists = (f) => f === virtual || fileExists(f);
    host.readFile = (f) => (f === virtual ? text : readFile(f));
    host.getSourceFile = (f, lang, onError, create) => (f === virtual ? ts.createSourceFile(f, text, lang) : getSourceFile(f, lang, onError, create));
    const program = ts.createProgram([virtual], options, host);
    const checker = program.getTypeChecker();
    const sf = program.getSourceFile(virtual)!;
    const types = new Map<string, ts.Type>();
    const moduleSymbol = checker.getSymbolAtLocation(sf)!;
    const exports = checker.getExportsOfModule(moduleSymbol);
    entries.forEach(([key], i) => {
        const sym = exports.find((e) => e.name === `T${i}`)!;
        types.set(key, checker.getDeclaredTypeOfSymbol(sym));
    });
    cached = { checker, types };
    return cached;
}

function isObjectLike(t: ts.Type): boolean {
    return (t.flags & ts.TypeFlags.Object) !== 0 || (t.flags & ts.TypeFlags.Intersection) !== 0;
}

/** Unknown keys of `value` against `type`, with JSON-pointer-like paths. */
function unknownFields(checker: ts.TypeChecker, value: unknown, type: ts.Type, at: string, out: string[]): void {
    if (value === null || value === undefined || typeof value !== "object") return;
    if (type.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return;
    if (type.isUnion()) {
        const objects = type.types.filter(isObjectLike);
        if (objects.length === 0) return;
        // Arrays vs objects: pick the member that fits the value's shape.
        const fit = objects.find((m) => checker.isArrayType(m) === Array.isArray(value)) ?? objects[0];
        unknownFields(checker, value, fit, at, out);
        return;
    }
    if (Array.isArray(value)) {
        if (!checker.isArrayType(type)) {
            out.push(`${at}: a list where the schema expects ${checker.typeToString(type)}`);
            return;
        }
        const el = checker.getTypeArguments(type as ts.TypeReference)[0];
        value.forEach((v, i) => {
            unknownFields(checker, v, el, `${at}/${i}`, out);
        });
        return;
    }
    const props = checker.getPropertiesOfType(type);
    const index = checker.getIndexTypeOfType(type, ts.IndexKind.String);
    for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
        const prop = props.find((p) => p.name === key);
        if (prop) {
            unknownFields(checker, v, checker.getNonNullableType(checker.getTypeOfSymbol(prop)), `${at}/${key}`, out);
        } else if (index) {
            unknownFields(checker, v, index, `${at}/${key}`, out);
        } else {
            out.push(`${at}/${key}: unknown field "${key}" (known: ${props.map((p) => p.name).join(", ")})`);
        }
    }
}

/**
 * Every schema problem of one manifest (empty when valid): kubernetes-models' validation,
 * plus unknown fields anywhere in the object. Kinds not listed above are reported as such.
 */
export function validateManifestStrict(obj: unknown): string[] {
    if (!obj || typeof obj !== "object") return ["manifest is not an object"];
    const m = obj as { apiVersion?: string; kind?: string };
    const key = `${m.apiVersion}/${m.kind}`;
    const entry = KINDS[key];
    if (!entry) return [`${key}: no schema known to validateManifestStrict (add the kind to test/helpers/k8s-schema.ts)`];
    const Model = models.get(key);
    if (!Model) throw new Error("call `await loadManifestSchemas()` once before validateManifestStrict (kubernetes-models is ESM-only)");
    const problems: string[] = [];
    try {
        new Model(obj).validate();
    } catch (e) {
        const errors = (e as { errors?: Array<{ instancePath?: string; message?: string; params?: unknown }> }).errors;
        if (errors && errors.length > 0)
            for (const er of errors) problems.push(`${er.instancePath || "/"}: ${er.message ?? "invalid"} ${JSON.stringify(er.params ?? {})}`);
        else problems.push(String((e as Error).message ?? e));
    }
    const { checker, types } = typeTable();
    unknownFields(checker, obj, types.get(key)!, "", problems);
    return problems;
}
