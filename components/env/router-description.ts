/**
 * How an env's router runs: the settings its nginx.conf is rendered from (which replicas, which
 * resolver, which cap), the router pods, and the capacity responder beside nginx (ROUTER.md). Pure.
 */
import { createHash } from "node:crypto";
import { podLabels } from "../config/names";
import type { ResolvedEnv } from "../config/types";
import { imagePullPolicy } from "../shared/images";
import { METRICS_PORTS } from "../shared/metrics-pods";
import { metricsHttpModule } from "../shared/metrics-http";
import { capacityResponderScript, RESPONDER_CONFIG_FILE, RESPONDER_SCRIPT_FILE, responderCommand, responderProbeCommand } from "./responder";
import {
    CAPACITY_RESPONDER_ADDRESS,
    ROUTER_HEALTH_PATH,
    renderResponderConfig,
    renderRouterConfig,
    resolveRouterSettings,
    routerCommand,
    statefulSetReplicaAddresses,
} from "./router";
import {
    DOCKER_RESOLVER,
    KUBERNETES_RESOLVER,
    ROUTER_AFFINITY_SECONDS,
    ROUTER_CONFIG_DIR,
    ROUTER_CONFIG_FILE,
    ROUTER_REPLICAS,
    ROUTER_RUN_DIR,
    ROUTER_UID,
    type CapacityResponderDescription,
    type EnvConfig,
    type EnvObjectNames,
    type EnvProbe,
    type EnvRouterDescription,
    type RouterSettings,
} from "./model";

/** What the router's nginx.conf is rendered from: every replica's address, the target's resolver, the cap k. */
export function routerSettingsOf(
    config: EnvConfig,
    env: ResolvedEnv,
    n: EnvObjectNames,
    namespace: string,
    k: number,
    containerNames: readonly string[],
): RouterSettings {
    const target = config.target.kind;
    const port = env.port;
    const replicaAddresses =
        target === "kubernetes"
            ? statefulSetReplicaAddresses({ statefulSet: n.replicas, headlessService: n.headless, namespace, replicas: env.replicas, port })
            : containerNames.map((c) => `${c}:${port}`);
    return {
        envName: env.name,
        replicas: replicaAddresses,
        sessionsPerReplica: k,
        listenPort: port,
        runDir: ROUTER_RUN_DIR,
        resolver: target === "kubernetes" ? KUBERNETES_RESOLVER : DOCKER_RESOLVER,
        capacityResponder: CAPACITY_RESPONDER_ADDRESS,
        demand: config.demand.envSessions,
    };
}

/** Seconds the responder's probe waits for its health answer (python's start comes on top). */
const RESPONDER_PROBE_TIMEOUT_SECONDS = 2;

/** The capacity responder beside nginx, in the env's own image; with metrics on, its counter on the router pod's metrics port. */
function responderDescription(env: ResolvedEnv, settings: RouterSettings, metricsOn: boolean): CapacityResponderDescription {
    const scriptFile = `${ROUTER_CONFIG_DIR}/${RESPONDER_SCRIPT_FILE}`;
    const configFile = `${ROUTER_CONFIG_DIR}/${RESPONDER_CONFIG_FILE}`;
    return {
        image: env.image,
        imagePullPolicy: imagePullPolicy(env.image),
        listen: CAPACITY_RESPONDER_ADDRESS,
        command: responderCommand({
            scriptPath: scriptFile,
            configPath: configFile,
            listen: CAPACITY_RESPONDER_ADDRESS,
            // observability: its CAPACITY_REACHED counter on the pod's address, the router pod's metrics port.
            ...(metricsOn ? { metricsListen: `0.0.0.0:${METRICS_PORTS.envRouter.port}` } : {}),
        }),
        scriptFile,
        scriptText: capacityResponderScript(),
        configFile,
        configText: renderResponderConfig(settings),
        modules: [metricsHttpModule()],
        cpu: "100m",
        memory: "64Mi",
        probes: {
            command: responderProbeCommand({ scriptPath: scriptFile, address: CAPACITY_RESPONDER_ADDRESS, timeoutSeconds: RESPONDER_PROBE_TIMEOUT_SECONDS }),
            // The kubelet's timeout is longer than the script's own, so a slow answer ends as the script's reason, not a kill.
            readiness: { periodSeconds: 10, timeoutSeconds: RESPONDER_PROBE_TIMEOUT_SECONDS + 3, failureThreshold: 3 },
            liveness: { periodSeconds: 20, timeoutSeconds: RESPONDER_PROBE_TIMEOUT_SECONDS + 3, failureThreshold: 3 },
        },
    };
}

/** sha256 over every file the router reads: any of them changed replaces the router (never reloaded in place). */
function configChecksum(configText: string, responder: CapacityResponderDescription): string {
    return [responder.configText, responder.scriptText, ...responder.modules.map((m) => m.text)]
        .reduce((h, text) => h.update(text), createHash("sha256").update(configText))
        .digest("hex");
}

/** The router of one deployed env: nginx with its rendered config, hardened, and the responder beside it. */
export function routerDescription(config: EnvConfig, env: ResolvedEnv, n: EnvObjectNames, settings: RouterSettings, metricsOn: boolean): EnvRouterDescription {
    const port = env.port;
    const configText = renderRouterConfig(settings);
    const responder = responderDescription(env, settings, metricsOn);
    const routerHealth = (periodSeconds: number, timeoutSeconds: number, failureThreshold: number): EnvProbe => ({
        path: ROUTER_HEALTH_PATH,
        port,
        periodSeconds,
        timeoutSeconds,
        failureThreshold,
    });
    return {
        name: n.router,
        service: n.routerService,
        image: config.images.nginx,
        imagePullPolicy: imagePullPolicy(config.images.nginx),
        port,
        replicas: ROUTER_REPLICAS,
        settings,
        configText,
        configChecksum: configChecksum(configText, responder),
        configDir: ROUTER_CONFIG_DIR,
        configFile: ROUTER_CONFIG_FILE,
        runDir: resolveRouterSettings(settings).runDir,
        command: routerCommand(settings, ROUTER_CONFIG_FILE),
        healthPath: ROUTER_HEALTH_PATH,
        probes: { readiness: routerHealth(5, 2, 2), liveness: routerHealth(10, 3, 3) },
        cpu: "500m",
        memory: "256Mi",
        security: {
            runAsUser: ROUTER_UID,
            runAsGroup: ROUTER_UID,
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
            dropCapabilities: ["ALL"],
            seccompProfile: "RuntimeDefault",
            runDirSizeLimit: "64Mi",
            terminationGraceSeconds: 30,
        },
        affinityTimeoutSeconds: ROUTER_AFFINITY_SECONDS,
        podLabels: podLabels("env-router", n.router),
        responder,
    };
}
