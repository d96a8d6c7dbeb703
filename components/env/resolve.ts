/**
 * The EnvSpace's one resolve step: pure, no Pulumi. Every port, env var, probe, resource,
 * replica address, router setting, the rendered router config and the capacity numbers of one
 * OpenEnv environment are decided here, once, for both targets; `kubernetes.ts` and
 * `docker.ts` only translate this description. Each decision lives in its own module
 * (capacity.ts, replica-description.ts, router-description.ts, nginx-image.ts); this file lists them.
 */
import { dnsEgressFor } from "../config/dns";
import { ConfigError } from "../config/errors";
import { dnsName, podLabels } from "../config/names";
import type { ResolvedEnv } from "../config/types";
import type { MetricsLinks } from "../shared/metrics-pods";
import { envMetrics } from "./metrics";
import { validateRouterSettings } from "./router";
import { capacityOf, sessionProblems, sessionsPerReplicaOf } from "./capacity";
import { nginxImageProblems } from "./nginx-image";
import { replicaContainerNames, replicaSecurity, replicasDescription, replicaWarnings } from "./replica-description";
import { routerDescription, routerSettingsOf } from "./router-description";
import type { DeployedEnvDescription, EnvConfig, EnvDescription, EnvNames, EnvObjectNames, ExternalEnvDescription, RouterSettings, TrainerPods } from "./model";

/** `http://h:8000` -> `ws://h:8000/ws`; `https` -> `wss`. */
export function wsUrlOf(url: string, wsPath: string): string {
    return `${url.replace(/^http/, "ws").replace(/\/+$/, "")}${wsPath}`;
}

/** Resolves one env server of the config into its target-neutral description; throws ConfigError naming each field. */
export function resolveEnvSpace(config: EnvConfig, env: ResolvedEnv, names: EnvNames, metricsLinks?: MetricsLinks): EnvDescription {
    const n = envObjectNames(env, names);
    if (env.external) return externalEnv(config, env, n);
    const target = config.target.kind;
    const namespace = names.namespaces.envs;
    const k = sessionsPerReplicaOf(env);
    const containerNames = replicaContainerNames(target, env, n);
    const settings = routerSettingsOf(config, env, n, namespace, k, containerNames);
    const problems = deployedEnvProblems(config, env, n, settings, metricsLinks);
    if (problems.length > 0) throw new ConfigError(problems);
    const metricsOn = (config.observability?.enabled ?? false) && metricsLinks !== undefined;
    const security = replicaSecurity(env);
    return {
        kind: "deployed",
        name: env.name,
        target,
        dns: dnsEgressFor(config.target),
        catalog: env.catalog,
        url: n.url,
        wsUrl: wsUrlOf(n.url, env.wsPath),
        capacity: capacityOf(config, env, k),
        namespace,
        network: names.networks.training,
        replicaNetwork: dnsName([n.routerService, "net"]),
        replicas: replicasDescription(env, n, k, containerNames, security),
        router: routerDescription(config, env, n, settings, metricsOn),
        trainer: trainerPods(names),
        warnings: replicaWarnings(env, target, security),
        names: supportingNames(n),
        metrics: metricsOn ? metricsOf(env, n, namespace, k, metricsLinks) : undefined,
    };
}

/** The env's object names; platformNames must have run over the same config. */
function envObjectNames(env: ResolvedEnv, names: EnvNames): EnvObjectNames {
    const n = names.envs[env.name];
    if (n === undefined) throw new ConfigError([`envs.${env.name}: no names were computed for this env (platformNames must run over the same config)`]);
    return n;
}

/** An env served elsewhere: its URL and declared sessions, nothing deployed. */
function externalEnv(config: EnvConfig, env: ResolvedEnv, n: EnvObjectNames): ExternalEnvDescription {
    const sessions = env.external?.sessions ?? 0;
    return {
        kind: "external",
        name: env.name,
        target: config.target.kind,
        url: n.url,
        wsUrl: wsUrlOf(n.url, env.wsPath),
        sessions,
        capacity: capacityOf(config, env, sessions),
    };
}

/** Every problem of a deployed env, all at once: the session rule, the nginx image, the names, the router, the metrics links. */
function deployedEnvProblems(
    config: EnvConfig,
    env: ResolvedEnv,
    n: EnvObjectNames,
    settings: RouterSettings,
    metricsLinks: MetricsLinks | undefined,
): string[] {
    const f = `envs.${env.name}`;
    const problems = [...sessionProblems(config, env), ...nginxImageProblems(config.images.nginx)];
    if (config.target.kind === "kubernetes" && n.replicas.length > 52) {
        // The StatefulSet controller labels pods with <name>-<10-char hash>, a label value of at most 63.
        problems.push(`${f}: StatefulSet name '${n.replicas}' is ${n.replicas.length} characters; Kubernetes allows 52: shorten the env name`);
    }
    problems.push(...validateRouterSettings(settings).map((p) => `${f} router: ${p}`));
    if ((config.observability?.enabled ?? false) && metricsLinks === undefined)
        problems.push(
            `observability.enabled: env ${env.name} needs the scraper and the metrics programs: the Platform must pass them (resolveEnvSpace's metricsLinks)`,
        );
    return problems;
}

/** Names of the supporting Kubernetes objects. */
function supportingNames(n: EnvObjectNames): DeployedEnvDescription["names"] {
    return {
        routerConfig: dnsName([n.router, "config"]),
        replicaDisruptionBudget: n.replicas,
        routerDisruptionBudget: n.router,
        replicaNetworkPolicy: n.replicas,
        routerNetworkPolicy: n.router,
    };
}

/** The session counter beside each replica and the responder's port, for the scraper the Platform passed. */
function metricsOf(env: ResolvedEnv, n: EnvObjectNames, namespace: string, k: number, links: MetricsLinks | undefined): DeployedEnvDescription["metrics"] {
    if (links === undefined) return undefined;
    return envMetrics({
        links,
        env: env.name,
        image: env.image,
        port: env.port,
        sessionsPerReplica: k,
        statefulSet: n.replicas,
        namespace,
        replicaPodLabels: podLabels("env-replica", n.replicas),
        routerPodLabels: podLabels("env-router", n.router),
    });
}

/**
 * The trainer pods by role and project only: podLabels("trainer", job) also carries the Job name,
 * which holds the run id, so selecting on it would lock the next run out of a long-lived env.
 */
function trainerPods(names: EnvNames): TrainerPods {
    const all = podLabels("trainer", "any");
    return {
        namespace: names.namespaces.training,
        podLabels: { "app.kubernetes.io/name": all["app.kubernetes.io/name"]!, "app.kubernetes.io/part-of": all["app.kubernetes.io/part-of"]! },
    };
}
