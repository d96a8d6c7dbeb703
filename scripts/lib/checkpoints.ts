/**
 * The way out of the checkpoint volume that needs no Hub: the commands that list its checkpoints
 * (complete or why not, by the same program the resume wrapper runs) and copy one out, and on
 * request remove an old run's directory. Kubernetes: a helper pod on the claim (the trainer image:
 * it has python and tar, which `kubectl cp` needs); Docker: the host directory itself.
 */
import type { PlatformPlan } from "../../components/platform";
import { CHECKPOINT_ROOT, shellQuote } from "../../components/training";
import { listCheckpointsCommand } from "../../components/training/checkpoint-select";

export interface CheckpointAccess {
    /** The helper pod (Kubernetes), as a manifest. */
    readonly pod?: Record<string, any>;
    /** The shell commands, in order, each with a comment line. */
    readonly script: string;
}

/** The helper pod's name: the stack's job prefix and a fixed role, so it never collides with a run's pod. */
function helperName(plan: PlatformPlan): string {
    return `${plan.names.prefix}-checkpoints`.slice(0, 63).replace(/-+$/, "");
}

/** The commands (and the helper pod) for a stack's checkpoint volume; `prune` mounts it writable and adds the removal. */
export function checkpointAccess(plan: PlatformPlan, opts: { prune?: string } = {}): CheckpointAccess {
    const d = plan.training;
    const v = d.checkpoints;
    if (v === undefined) throw new Error(`stack ${plan.config.stack}: training.checkpoints.enabled is false: there is no checkpoint volume`);
    const words = (argv: readonly string[]) => argv.map(shellQuote).join(" ");
    const list = words(listCheckpointsCommand(CHECKPOINT_ROOT));
    const run = "<runId>";
    if (plan.config.target.kind === "docker") {
        const host = plan.config.target.host;
        const dir = v.hostPath!;
        const remote = host.startsWith("ssh://") ? host.slice("ssh://".length) : undefined;
        const docker = `docker -H ${host}`;
        const lines = [
            `# list (the trainer image runs the listing over the host directory, read-only)`,
            `${docker} run --rm -v ${dir}:${CHECKPOINT_ROOT}:ro --entrypoint python ${d.trainer.image} ${words(listCheckpointsCommand(CHECKPOINT_ROOT).slice(1))}`,
            `# copy one out`,
            remote ? `scp -r ${remote}:${dir}/${run}/checkpoint-<step> ./` : `cp -a ${dir}/${run}/checkpoint-<step> ./`,
        ];
        if (opts.prune !== undefined) lines.push(`# remove run ${opts.prune}'s directory`, `${remote ? `ssh ${remote} ` : ""}rm -rf ${dir}/${opts.prune}`);
        return { script: `${lines.join("\n")}\n` };
    }
    const ns = d.namespace;
    const name = helperName(plan);
    const writable = opts.prune !== undefined;
    const pod = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: ns, labels: { "app.kubernetes.io/name": "checkpoints", "app.kubernetes.io/part-of": "agent-rl-infra" } },
        spec: {
            restartPolicy: "Never",
            // The claim is ReadWriteOnce on one node: while a run holds it, the helper waits for that node.
            activeDeadlineSeconds: 3600,
            automountServiceAccountToken: false,
            containers: [
                {
                    name: "checkpoints",
                    image: d.trainer.image,
                    command: ["sleep", "3600"],
                    securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
                    resources: { requests: { cpu: "100m", memory: "256Mi" }, limits: { cpu: "1", memory: "1Gi" } },
                    volumeMounts: [{ name: "checkpoints", mountPath: CHECKPOINT_ROOT, readOnly: !writable }],
                },
            ],
            volumes: [{ name: "checkpoints", persistentVolumeClaim: { claimName: v.name, readOnly: !writable } }],
        },
    };
    const k = `kubectl${plan.config.target.context ? ` --context ${plan.config.target.context}` : ""} -n ${ns}`;
    const lines = [
        `# 1. the helper pod on claim ${ns}/${v.name} (${writable ? "writable, for the removal" : "read-only"}; from npm run checkpoints -- ${plan.config.stack} --manifest)`,
        `npm run --silent checkpoints -- ${plan.config.stack} --manifest${writable ? ` --prune ${opts.prune}` : ""} | ${k} apply -f -`,
        `${k} wait --for=condition=Ready pod/${name} --timeout=600s`,
        `# 2. list: each checkpoint, complete (trainer_state.json and every shard) or why not`,
        `${k} exec ${name} -- ${list}`,
        `# 3. copy one out (kubectl cp needs tar in the image)`,
        `${k} cp ${name}:${CHECKPOINT_ROOT}/${run}/checkpoint-<step> ./${run}-checkpoint-<step>`,
    ];
    if (writable) lines.push(`# 4. remove run ${opts.prune}'s directory`, `${k} exec ${name} -- rm -rf ${CHECKPOINT_ROOT}/${opts.prune}`);
    lines.push(`# done: remove the helper`, `${k} delete pod ${name}`);
    return { pod, script: `${lines.join("\n")}\n` };
}
