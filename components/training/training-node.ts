/**
 * agentrl:training:TrainingNode: vLLM and the trainer on one multi-GPU node, weight sync
 * kept private. Takes the resolved description (from `resolveTrainingNode`) and registers
 * the target's resources; the provider (Kubernetes or Docker) arrives through `opts`.
 */
import * as pulumi from "@pulumi/pulumi";
import type { ClaimRecords } from "../config/claims";
import type { EnvSecretKey, SecretName, TrainingDescription } from "./model";
import { buildDockerTraining } from "./docker";
import { buildKubernetesTraining } from "./kubernetes";

export interface TrainingNodeArgs {
    /** The resolved, target-neutral description of the run's training node. */
    readonly description: TrainingDescription;
    /** Hugging Face token (secret) for gated models and Hub pushes; required when training.hubRepoId is set. @default none (public models only) */
    readonly hfToken?: pulumi.Input<string>;
    /**
     * The ingress's rollout-key verifier admin key (secret; VllmIngress.rolloutAdminKey); the trainer gets it as
     * SANDBOX_ROLLOUT_ADMIN_KEY from a Secret of its namespace. Required when the description mints rollout keys. @default none
     */
    readonly rolloutAdminKey?: pulumi.Input<string>;
    /**
     * The stack secrets extraEnv entries reference (`{ secret: envSecret-<name> }`), by config key (secret
     * values); each referenced one is required. @default {}
     */
    readonly envSecrets?: Readonly<Record<string, pulumi.Input<string>>>;
    /** Docker only: the private training network (created by the Platform). Required on Docker. */
    readonly network?: pulumi.Input<string>;
    /** Kubernetes: the training namespace (the Platform's Namespace output, so the objects wait for it). @default description.namespace */
    readonly namespace?: pulumi.Input<string>;
    /** What the trainer waits for (the env servers, the sandbox pool and the ingress it uses as it starts). @default [] */
    readonly waitFor?: readonly pulumi.Resource[];
}

export class TrainingNode extends pulumi.ComponentResource {
    /** Kubernetes Job name / Docker trainer container name of this run. */
    public readonly jobName: pulumi.Output<string>;
    /** Where the trainer reaches vLLM: the same pod / network namespace. */
    public readonly internalUrl: pulumi.Output<string>;
    /** Black box only: host:port the ingress proxies to. */
    public readonly upstreamAddress: pulumi.Output<string> | undefined;
    /**
     * What serves vLLM to the ingress, for it to wait on: Kubernetes, the ClusterIP Service (not
     * awaited for endpoints: they appear only after the model loads); Docker, the vLLM container
     * (nginx resolves its name at start). Undefined without a separate vLLM.
     */
    public readonly upstream: pulumi.Resource | undefined;
    /** The run's trainer: the Kubernetes Job or the Docker trainer container. */
    public readonly trainer: pulumi.CustomResource;
    /**
     * Kubernetes: the stack-wide claims (model cache, checkpoints) as made, with the class the
     * cluster gave them; the Platform exports them so the next up can refuse what Kubernetes
     * cannot apply (a class change, a shrink). Docker: none (host directories).
     */
    public readonly claims: pulumi.Output<ClaimRecords>;
    /** Host GPU indices per role, e.g. { vllm: [0], trainer: [1] }. */
    public readonly gpuLayout: { readonly vllm: readonly number[]; readonly trainer: readonly number[] };

    constructor(name: string, args: TrainingNodeArgs, opts?: pulumi.ComponentResourceOptions) {
        super("agentrl:training:TrainingNode", name, {}, opts);
        const d = args.description;
        const provided: Partial<Record<SecretName, pulumi.Input<string>>> = {};
        if (args.hfToken !== undefined) provided.hfToken = pulumi.secret(args.hfToken);
        if (args.rolloutAdminKey !== undefined) provided.rolloutAdminKey = pulumi.secret(args.rolloutAdminKey);
        for (const [key, value] of Object.entries(args.envSecrets ?? {})) provided[key as EnvSecretKey] = pulumi.secret(value);
        const missing = d.requiredSecrets.filter((s) => provided[s] === undefined);
        if (missing.length > 0) {
            const why = (s: SecretName): string =>
                s === "hfToken"
                    ? "hfToken: training.hubRepoId pushes to the Hub: set the secret with `pulumi config set --secret hfToken`"
                    : s === "rolloutAdminKey"
                      ? "rolloutAdminKey: the trainer mints a key per rollout at the ingress's verifier: the Platform must pass the verifier's admin key (VllmIngress.rolloutAdminKey)"
                      : `${s}: an extraEnv entry references it: set the secret with \`pulumi config set --secret ${s}\``;
            throw new pulumi.RunError(`TrainingNode ${name}: missing secret(s):\n${missing.map((s) => `  - ${why(s)}`).join("\n")}`);
        }

        let jobName: pulumi.Output<string>;
        if (d.target === "kubernetes") {
            const { job, vllmService, claims } = buildKubernetesTraining(name, d, provided, this, args.waitFor ?? [], args.namespace);
            jobName = job.metadata.name;
            this.trainer = job;
            this.upstream = vllmService;
            this.claims = claims;
        } else {
            if (args.network === undefined)
                throw new pulumi.RunError(`TrainingNode ${name}: the docker target needs args.network (the private training network)`);
            const { trainer, vllm } = buildDockerTraining(name, d, args.network, provided, this, args.waitFor ?? []);
            jobName = trainer.name;
            this.trainer = trainer;
            this.upstream = vllm;
            this.claims = pulumi.output({});
        }

        this.jobName = jobName;
        this.internalUrl = pulumi.output(d.internalUrl);
        this.upstreamAddress = d.upstreamAddress !== undefined ? pulumi.output(d.upstreamAddress) : undefined;
        this.gpuLayout = d.gpuLayout;
        this.registerOutputs({
            jobName: this.jobName,
            internalUrl: this.internalUrl,
            upstreamAddress: this.upstreamAddress,
            gpuLayout: this.gpuLayout,
            claims: this.claims,
        });
    }
}
