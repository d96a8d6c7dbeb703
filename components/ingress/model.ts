/**
 * The ingress folder's ground floor: what it reads of the config and the names, the container's
 * paths, ports and security settings (the same on both targets), and the shapes of the description
 * parts. Imports nothing from its folder.
 */
import type { PlatformNames } from "../config/names";
import type { PlatformConfig } from "../config/types";

// The listen ports are decided once, in names.ts, which also builds the sandbox URLs with them.
export { INGRESS_HTTP_PORT, INGRESS_HTTPS_PORT } from "../config/names";

/**
 * What the ingress reads of a stack's config: a narrow slice of PlatformConfig, fully defaulted
 * (`resolveDefaults` applies every default once), so the component can be used without the
 * Platform by building just these fields.
 */
export type IngressConfig = Pick<PlatformConfig, "target" | "ingress" | "images" | "training"> & {
    /** Metrics endpoints (observability.enabled). @default off */
    readonly observability?: Pick<PlatformConfig["observability"], "enabled">;
    /** The sandbox pool: with agent-sandbox on Kubernetes the ingress renders the per-rollout key verifier (verifier.ts). @default none */
    readonly sandboxes?: Pick<PlatformConfig["sandboxes"], "provider" | "image">;
};
/** The object names the ingress uses (from `platformNames`). */
export type IngressNames = Pick<PlatformNames, "ingress" | "namespaces" | "networks" | "training">;
/** Port a public host name is reached on (`https://<host>` in names.ts): the LoadBalancer / published Docker port. */
export const PUBLIC_HTTPS_PORT = 443;

/** Where the container finds its files; the same on both targets, so both run the very same nginx.conf. */
export const INGRESS_PATHS = {
    /** ConfigMap (Kubernetes) / read-only volume (Docker) holding nginx.conf. */
    configDir: "/etc/nginx/ingress",
    configFile: "/etc/nginx/ingress/nginx.conf",
    /** Secret (Kubernetes) / read-only volume (Docker) holding keys.conf, mounted as a directory (no subPath: a rotated Secret reaches the pod). */
    keysDir: "/etc/nginx/keys",
    /** Key of the file inside the keys Secret and the file name in keysDir. */
    keysFileName: "keys.conf",
    /** kubernetes.io/tls Secret (keys tls.crt / tls.key) / host files bind-mounted read-only. */
    tlsDir: "/etc/nginx/tls",
    /** The only writable directory (emptyDir / tmpfs): pid file and temp dirs. */
    runtimeDir: "/tmp/nginx",
} as const;

/** Key of the checksum annotation (Kubernetes pod template) / label (Docker) that rolls the proxy when config or keys change. */
export const CHECKSUM_ANNOTATION = "agentrl.dev/config-checksum";

/** How the proxy process runs, on both targets. */
export interface IngressSecurity {
    /** uid of the nginx user in the unprivileged nginx images (nginxinc/nginx-unprivileged: 101). */
    readonly runAsUser: number;
    /** Kubernetes: primary group and fsGroup, so the Secret/ConfigMap files (mode 0440) are readable by the group. */
    readonly runAsGroup: number;
    /**
     * Docker: the process group. Docker uploads land root-owned (the provider writes uid/gid 0 into the tar it
     * copies, terraform-provider-docker resource_docker_container_funcs.go), so the keys file is root:root 0440
     * and readable through gid 0, as the unprivileged nginx image expects (it runs under OpenShift's gid 0).
     */
    readonly dockerGroup: number;
    readonly readOnlyRootFilesystem: true;
    readonly allowPrivilegeEscalation: false;
    readonly dropCapabilities: readonly ["ALL"];
    readonly seccompProfile: "RuntimeDefault";
    /** Size of the runtimeDir emptyDir / tmpfs. */
    readonly runtimeSizeLimit: string;
    /** Seconds in-flight requests get on shutdown (the image's STOPSIGNAL SIGQUIT = nginx graceful stop). */
    readonly terminationGraceSeconds: number;
}

/** CPU/memory of one proxy replica (requests and limits), the same numbers on Docker. */
export interface IngressResources {
    readonly requests: { readonly cpu: string; readonly memory: string };
    readonly limits: { readonly cpu: string; readonly memory: string };
}

/** Where the certificate comes from and where TLS ends. */
export interface IngressTls {
    /** nginx itself terminates TLS on the listen port. */
    readonly proxyTerminates: boolean;
    /** `secret` (Kubernetes TLS Secret), `cert-manager` (a Certificate the stack requests), `files` (Docker host files), `none`. */
    readonly mode: "secret" | "cert-manager" | "files" | "none";
    /** Where TLS ends for clients: at the proxy, at the Gateway (exposure httproute), or nowhere (in-cluster plain HTTP). */
    readonly terminatedAt: "proxy" | "gateway" | "none";
    readonly secretName?: string;
    /** cert-manager: the Certificate to request (its Secret is `secretName`). */
    readonly certificate?: {
        readonly name: string;
        readonly issuer: { readonly name: string; readonly kind: "Issuer" | "ClusterIssuer"; readonly group: string };
        /** The proxy Service's in-cluster names, then the public host if any. */
        readonly dnsNames: readonly string[];
    };
    readonly certFile?: string;
    readonly keyFile?: string;
    readonly publiclyTrusted: boolean;
}

/** The pods a NetworkPolicy admits or targets. */
export interface IngressPeerPods {
    readonly namespace: string;
    readonly podLabels: Readonly<Record<string, string>>;
    readonly port: number;
}

/** How the proxy process runs (uid 101: the nginxinc/nginx-unprivileged image's nginx user). */
export const INGRESS_SECURITY: IngressSecurity = {
    runAsUser: 101,
    runAsGroup: 101,
    dockerGroup: 0,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    dropCapabilities: ["ALL"],
    seccompProfile: "RuntimeDefault",
    runtimeSizeLimit: "256Mi",
    terminationGraceSeconds: 60,
};

/** CPU/memory of one proxy replica (2 CPUs: the config's worker_processes, proxy-settings.ts). */
export const INGRESS_RESOURCES: IngressResources = { requests: { cpu: "500m", memory: "128Mi" }, limits: { cpu: "2", memory: "512Mi" } };
