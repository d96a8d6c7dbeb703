/**
 * agentrl:ingress:VllmIngress: the one authenticated face of vLLM. An nginx reverse proxy
 * that allow-lists the OpenAI routes sandboxes need and checks a Bearer key per client,
 * because vLLM's own --api-key leaves /pause, /update_weights, /collective_rpc, /metrics ...
 * open (vllm docs/usage/security.md). The description (`resolveVllmIngress`) decides
 * everything; this component makes or takes the keys and registers the target's resources.
 */
import { createHmac } from "node:crypto";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import type { IngressDescription } from "./resolve";
import { registerDockerIngress } from "./docker";
import { registerKubernetesIngress } from "./kubernetes";
import { renderKeysFile } from "./nginx";
import { VERIFIER_ADMIN_KEY_LENGTH } from "./verifier";

export interface VllmIngressArgs {
    /** The resolved ingress (from `resolveVllmIngress(config, names)`). */
    readonly description: IngressDescription;
    /** Operator-supplied keys by key name (`PlatformSecrets.ingressKeys`); every other name gets a generated key. @default {} */
    readonly suppliedKeys?: Readonly<Record<string, pulumi.Input<string>>>;
    /** Kubernetes: the ingress namespace (the Platform's Namespace output, so objects wait for it). @default description.names.namespace */
    readonly namespace?: pulumi.Input<string>;
    /** Docker: the private training network (required) and the internal sandbox network (when sandboxes run on Docker). */
    readonly networks?: { readonly training: pulumi.Input<string> };
    /**
     * Resolves to what serves vLLM once it is registered (the TrainingNode's `upstream`: the vLLM
     * Service on Kubernetes, the vLLM container on Docker): nginx resolves the upstream name at
     * start and exits if it cannot, so the proxy waits for it. A promise, because the
     * TrainingNode is built after this component (it needs the sandbox key). @default no wait
     */
    readonly upstreamReady?: Promise<pulumi.Resource | undefined>;
}

/** What a stack that still sets the shared sandbox key is told: it is not rendered, and how to drop it. */
export function retiredSandboxKeyMessage(name: string): string {
    return `ingressKey-${name}: the sandboxes take per-rollout keys on this stack (agent-sandbox on Kubernetes), so this shared sandbox key (ingress.sandboxKey) is not rendered and nginx refuses it: remove it with pulumi config rm ingressKey-${name}`;
}

/** Length of a generated key: 48 of [A-Za-z0-9] (about 285 bits), safe in a URL, a header and the nginx map. */
export const GENERATED_KEY_LENGTH = 48;

/**
 * HMAC-SHA256 of config and keys under a secret salt. A plain hash of a short supplied key
 * could be brute-forced from the (non-secret) pod annotation; without the salt it cannot, so
 * the checksum may stay a plain value and the Deployment is not marked secret as a whole.
 */
export function configChecksum(salt: string, configText: string, keysText: string): string {
    return createHmac("sha256", salt).update(configText).update("\0").update(keysText).digest("hex");
}

export class VllmIngress extends pulumi.ComponentResource {
    /** URL the sandboxes use (names.ingress.sandboxUrl). */
    public readonly sandboxUrl: pulumi.Output<string>;
    /** Every key by name, secret (supplied or generated). */
    public readonly keys: Record<string, pulumi.Output<string>>;
    /** The shared key the sandboxes use (config.ingress.sandboxKey), secret; absent where they take per-rollout keys. */
    public readonly sandboxKey?: pulumi.Output<string>;
    /** The proxy Service (Kubernetes) / container name (Docker), the in-cluster / in-network host name. */
    public readonly serviceName: pulumi.Output<string>;
    /** nginx's listen port (8443 with TLS at the proxy, else 8080). */
    public readonly port: number;
    /** Namespace of the proxy (Kubernetes) / the network sandboxes reach it on (Docker). */
    public readonly namespace: pulumi.Output<string>;
    /** The proxy pods as a NetworkPolicy peer (namespace, pod labels, container port), for the SandboxPool. */
    public readonly peer: { readonly namespace: string; readonly podLabels: Readonly<Record<string, string>>; readonly port: number };
    /** The rollout key verifier's admin key (secret), where the verifier is rendered (agent-sandbox pools on Kubernetes). */
    public readonly rolloutAdminKey?: pulumi.Output<string>;

    constructor(name: string, args: VllmIngressArgs, opts?: pulumi.ComponentResourceOptions) {
        super("agentrl:ingress:VllmIngress", name, {}, opts);
        const d = args.description;
        const child = { parent: this };
        const supplied = args.suppliedKeys ?? {};
        // A shared sandbox key set before per-rollout keys: not rendered anywhere (nginx refuses it), said once.
        const retired = d.retiredSandboxKey;
        if (retired !== undefined && supplied[retired] !== undefined) pulumi.log.warn(retiredSandboxKeyMessage(retired), this);
        const unknown = Object.keys(supplied).filter((k) => !d.keyNames.includes(k) && k !== retired);
        if (unknown.length > 0) {
            throw new pulumi.RunError(
                `VllmIngress ${name}: supplied key(s) ${unknown.map((k) => `'${k}'`).join(", ")} not in ingress.keys (${d.keyNames.join(", ")}): add the name to ingress.keys or remove the secret config ingressKey-<name>`,
            );
        }

        const keys: Record<string, pulumi.Output<string>> = {};
        for (const keyName of d.keyNames) {
            const given = supplied[keyName];
            keys[keyName] =
                given !== undefined
                    ? pulumi.secret(given)
                    : pulumi.secret(new random.RandomPassword(`${name}-key-${keyName}`, { length: GENERATED_KEY_LENGTH, special: false }, child).result);
        }
        // renderKeysFile validates every key and never echoes one in its errors.
        const keysText = pulumi.secret(
            pulumi
                .all(d.keyNames.map((keyName) => keys[keyName]!))
                .apply((values) => renderKeysFile(d.keyNames.map((keyName, idx) => ({ name: keyName, key: values[idx]! })))),
        );
        const salt = new random.RandomPassword(`${name}-checksum-salt`, { length: 32, special: false }, child);
        const checksum = pulumi.unsecret(pulumi.all([salt.result, keysText]).apply(([s, k]) => configChecksum(s, d.configText, k)));

        // agent-sandbox pools: the verifier's admin key, generated and kept as a Pulumi secret (never in a plan).
        const rolloutAdminKey = d.rolloutKeys
            ? pulumi.secret(new random.RandomPassword(`${name}-rollout-keys-admin-key`, { length: VERIFIER_ADMIN_KEY_LENGTH, special: false }, child).result)
            : undefined;
        if (d.target === "kubernetes") {
            const namespace = args.namespace ?? d.names.namespace;
            const { service } = registerKubernetesIngress(
                name,
                { description: d, namespace, keysText, checksum, upstreamReady: args.upstreamReady, rolloutAdminKey },
                this,
            );
            this.serviceName = service.metadata.name;
            this.namespace = service.metadata.namespace;
        } else {
            if (args.networks === undefined)
                throw new pulumi.RunError(`VllmIngress ${name}: the docker target needs args.networks.training (vLLM's private network)`);
            const { container } = registerDockerIngress(
                name,
                { description: d, networks: args.networks, keysText, checksum, upstreamReady: args.upstreamReady },
                this,
            );
            this.serviceName = container.name;
            this.namespace = pulumi.output(args.networks.training);
        }

        this.sandboxUrl = pulumi.output(d.urls.sandbox);
        this.keys = keys;
        this.sandboxKey = d.sandboxKeyName !== undefined ? keys[d.sandboxKeyName] : undefined;
        this.port = d.port;
        this.peer = d.peer;
        this.rolloutAdminKey = rolloutAdminKey;
        this.registerOutputs({
            sandboxUrl: this.sandboxUrl,
            keys: this.keys,
            ...(this.sandboxKey !== undefined ? { sandboxKey: this.sandboxKey } : {}),
            serviceName: this.serviceName,
            port: this.port,
            namespace: this.namespace,
        });
    }
}
