/**
 * plan.md: what will run where, the capacity checks with their numbers, and a Mermaid
 * diagram of the topology. Built from the resolved plan (the same data the program used)
 * and the resources the program registered.
 */
import { type CheckpointNeed, checkpointNeed, describeNeed, programCheckpoints, withHubPush } from "../../components/config/checkpoints";
import { grpoBatchRuleApplies } from "../../components/config/program-rules";
import { type CatalogName, ENV_CATALOG, OPENENV_UPSTREAM } from "../../components/config/catalog";
import { programFacts } from "../../components/config/programs";
import { formatClaimRate } from "../../components/config/pool-size";
import { vllmServerSettings } from "../../components/config/vllm-settings";
import { dnsEgressFor } from "../../components/config/dns";
import type { DnsEgress } from "../../components/shared/kubernetes";
import { dockerProviderAddresses, ENV_SECRET_PREFIX, setSecretCommand, type PlatformConfig } from "../../components/config";
import { quantityValue } from "../../components/shared/quantity";
import { CHECKPOINT_ROOT } from "../../components/training";
import type { DeployedEnvDescription } from "../../components/env";
import { dockerHostNeeds, dockerMetricsAddress, formatMiB, namespaceRoles, type PlatformPlan } from "../../components/platform";
import type { RecordedResource } from "./mockrun";
import { gpuMemorySection } from "./plan-gpu-memory";
import { gpuHeadline, gpuTimeHeadline } from "./plan-headline";
import { podResourcesSection } from "./plan-pod-resources";

/** What the policy pack enforces and where (docs/design/security-model.md "The policy pack"): only when the command names it. */
export const POLICY_PACK_NOTE =
    "The policy pack (policy/) blocks a violation only when the command names it: `pulumi up --policy-pack policy --policy-pack-config policy/config.prod.json`; nothing in the stack checks that it ran.";

function table(header: string[], rows: Array<Array<string | number>>): string {
    const line = (cells: Array<string | number>) => `| ${cells.map((c) => String(c).replace(/\|/g, "\\|")).join(" | ")} |`;
    return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/** Mermaid node ids must be plain words. */
function id(s: string): string {
    return s.replace(/[^A-Za-z0-9_]/g, "_");
}

export function renderMermaid(plan: PlatformPlan): string {
    const { config: c, names } = plan;
    const lines = ["flowchart LR"];
    const t = c.training;
    const node = c.target.kind === "kubernetes" ? `namespace ${names.namespaces.training}` : `network ${names.networks.training}`;
    const multi = plan.training.multiNode;
    lines.push(`  subgraph training["${multi ? `training, ${multi.nodes + 1} GPU nodes` : "training node"}: ${node}"]`);
    if (multi) {
        lines.push(
            `    vllm["${t.layout === "blackbox" ? "vllm serve" : "vllm serve (trainer image)"} :8000<br/>own node, ${t.vllmGpus} GPU (TP ${t.vllmGpus})"]`,
        );
        lines.push(`    trainer["trainer JobSet<br/>${multi.nodes} nodes x ${t.trainerGpus} GPU, ${multi.nodes * t.numProcesses} proc"]`);
        lines.push(`    trainer -->|"Service :8000, NCCL weight sync"| vllm`);
    } else if (t.layout === "whitebox-colocate") {
        lines.push(`    trainer["trainer + vLLM colocated<br/>${t.trainerGpus} GPU"]`);
    } else {
        lines.push(`    vllm["${t.layout === "blackbox" ? "vllm serve" : "vllm serve (trainer image)"} :8000<br/>${t.vllmGpus} GPU"]`);
        lines.push(`    trainer["trainer<br/>${t.trainerGpus} GPU, ${t.numProcesses} proc"]`);
        lines.push(`    trainer -->|"localhost:8000, NCCL weight sync"| vllm`);
    }
    lines.push("  end");
    for (const e of c.envs) {
        const envId = id(`env_${e.name}`);
        if (e.external) {
            lines.push(`  ${envId}["env ${e.name} (external)<br/>${e.external.sessions} sessions"]`);
        } else {
            lines.push(`  ${envId}_router["env ${e.name} router<br/>least_conn, max_conns ${e.sessionsPerReplica}"]`);
            lines.push(`  ${envId}["${e.replicas} x ${e.catalog} replica<br/>${e.sessionsPerReplica} session(s) each"]`);
            lines.push(`  ${envId}_router --> ${envId}`);
            lines.push(`  trainer -->|"ws /ws"| ${envId}_router`);
        }
        if (e.external) lines.push(`  trainer -->|"ws /ws"| ${envId}`);
    }
    if (c.ingress.enabled) {
        lines.push(`  ingress["vLLM ingress (nginx)<br/>bearer keys, allow-list"]`);
        lines.push(`  ingress -->|"/v1/chat/completions, /v1/models"| vllm`);
    }
    if (plan.sandboxes !== undefined) {
        const pools = harborPools(plan.sandboxes).length;
        const size = pools > 0 ? `${pools} pools of ${c.sandboxes.poolSize} (one per task image)` : `pool ${c.sandboxes.poolSize}`;
        lines.push(`  sandboxes["${c.sandboxes.provider} sandboxes<br/>${size}, ${c.training.maxInflight} in flight"]`);
        lines.push(`  trainer -->|"claims / creates"| sandboxes`);
        lines.push(`  sandboxes -->|"Bearer key"| ingress`);
    }
    return lines.join("\n");
}

/** Where a deployed env runs on Docker: its own network, the router also on the training network. */
function dockerEnvWhere(plan: PlatformPlan, envName: string): string {
    const d = plan.envs.find((e) => e.name === envName);
    return d?.kind === "deployed" ? `${d.replicaNetwork} (router also on ${d.network})` : plan.names.networks.training;
}

/** The plan row saying how long a client gone without closing (half-open) holds an env slot. */
function envKeepaliveRow(env: DeployedEnvDescription, catalog: string): Array<string | number> {
    const r = env.replicas;
    const app = catalog in ENV_CATALOG ? `${OPENENV_UPSTREAM.repo} ${ENV_CATALOG[catalog as CatalogName].upstream.app}` : "its app";
    const reaper =
        r.idleReaper.kind === "none"
            ? `the image has no idle reaper (${app} sets no session_timeout)`
            : r.idleReaper.kind === "env"
              ? `or its idle reaper (${r.idleReaper.envVar}) when shorter`
              : "custom image: only if it runs the uvicorn CLI or reads UVICORN_WS_PING_*";
    return [
        `env \`${env.name}\` half-open sessions`,
        `server ping every ${r.wsPing.intervalSeconds} s, peer dropped ${r.wsPing.timeoutSeconds} s after an unanswered ping (envs.${env.name}.wsPing)`,
        r.halfOpenSlotSeconds,
        `a client gone without closing frees its slot within this many seconds: ${reaper}`,
    ];
}

/** The trainer's program: what runs, where its command line was read, the command itself. */
function trainerProgramSection(plan: PlatformPlan): string[] {
    const t = plan.config.training;
    const p = programFacts(t.program);
    const trainer = plan.training.trainer;
    const command = [...(trainer.command ?? []), ...trainer.args].map((w) => (/^[A-Za-z0-9_./:=,@%+$()-]+$/.test(w) ? w : `'${w}'`)).join(" ");
    const rows: string[][] =
        p === undefined
            ? [["program (training.program)", `custom: your script, given the TrlParser flag contract (docs/reference/training-node.md "The trainer program")`]]
            : [
                  ["program (training.program)", `${t.program}: ${p.description}`],
                  ["source", `${p.source.repo} ${p.source.path} @ ${p.source.revision}`],
                  [
                      "flags read from",
                      p.readFrom === "source" ? "the program's source" : "published command lines only (command line checked against published examples only)",
                  ],
                  ["in the image", p.file],
              ];
    rows.push([
        "args check at pod start (training.argsCheck)",
        t.argsCheck ? "on: the program's own parser runs over the command line before the model loads" : "off",
    ]);
    return ["## Trainer program", "", table(["setting", "value"], rows), "", "```", command, "```", ""];
}

/** The Harbor path's warm pools, one per task image (none off the Harbor path). */
function harborPools(sb: PlatformPlan["sandboxes"]): NonNullable<PlatformPlan["sandboxes"]>["pools"] {
    return sb?.pools.filter((p) => p.taskKey !== undefined) ?? [];
}

/** Warm sandboxes the stack keeps: the pool's, or every Harbor pool's together. */
function warmSandboxes(plan: PlatformPlan): number {
    const pools = harborPools(plan.sandboxes);
    return pools.length > 0 ? pools.reduce((n, p) => n + p.poolSize, 0) : plan.config.sandboxes.poolSize;
}

/** The Harbor path: the agent, and each task image's pool with its size (each holds the whole burst). */
function harborPoolRows(sb: NonNullable<PlatformPlan["sandboxes"]>, agent: string): string[][] {
    const pools = harborPools(sb);
    return [
        ["Harbor agent", `${agent} (harbor.agent; the trainer's HARBOR_AGENT)`],
        [
            "pools",
            `${pools.length} warm pools, one per task image (harbor.taskImages), each ${sb.poolSize} warm (${poolParts(sb)}: a GRPO group is one task, so one image may take the whole burst), ${sb.cpu} CPU / ${sb.memory} each; the trainer's SANDBOX_TASK_POOLS maps each image to its pool`,
        ],
        ...pools.map((p) => [`pool \`${p.warmPool}\``, `${p.poolSize} warm of \`${p.image}\` (template \`${p.template}\`)`]),
    ];
}

/** What a pool's size is made of: the rule's parts, or the stack's own number. */
function poolParts(sb: NonNullable<PlatformPlan["sandboxes"]>): string {
    const z = sb.sizing;
    return sb.poolSize === z.size ? `${z.burst} burst + ${z.refill} refill + ${z.margin} headroom` : "sandboxes.poolSize";
}

/** The autoscaler of the pool(s), where sandboxes.autoscale is on. */
function autoscalerRow(sb: NonNullable<PlatformPlan["sandboxes"]>): string[][] {
    const a = sb.pools[0]?.autoscale;
    if (a === undefined) return [];
    const each = sb.pools.length > 1 ? ` (one per pool, ${sb.pools.length})` : "";
    return [
        [
            "autoscaler (sandboxes.autoscale)",
            `HorizontalPodAutoscaler${each} on the SandboxWarmPool's /scale: ${a.min} to ${a.max} warm, following the external metric ` +
                `\`${a.metric}\` (the stack's recording rule: claimed now + claims/s over 2m x ${sb.sizing.refillSeconds} s + ${sb.sizing.margin}; ` +
                `needs observability and an external metrics adapter serving it); the quota counts ${a.max} per pool`,
        ],
    ];
}

/** The pool's settings as agent-sandbox carries them out. */
function sandboxRows(sb: NonNullable<PlatformPlan["sandboxes"]>, agent?: string): string[][] {
    const z = sb.sizing;
    const pool = ["pool", `${sb.poolSize} warm (${poolParts(sb)}), ${sb.cpu} CPU / ${sb.memory} each`];
    const sizing = [
        "pool sized by the run",
        `burst ${z.burst} claims at once = ${z.perWorker} in flight (training.maxInflight) x ${z.workersWhy}; ` +
            `claim rate ${z.burst} / ${z.rolloutSeconds} s (sandboxes.rolloutSeconds) = ${formatClaimRate(z)}; ` +
            `refill ${formatClaimRate(z)} x ${z.refillSeconds} s (sandboxes.refillSeconds) = ${z.refill} (rounded up); ` +
            `pool ${z.burst} + ${z.refill} + ${z.margin} (sandboxes.headroom) = ${z.size}` +
            (sb.poolSize === z.size
                ? ""
                : `; the pool is ${sb.poolSize} (sandboxes.poolSize), ${sb.poolSize > z.size ? `${sb.poolSize - z.size} above` : `${z.size - sb.poolSize} below: a burst leaves ${sb.poolSize - z.burst} warm, and at the planned claim rate the pool runs dry`}`),
    ];
    const run = ["run label", `${sb.runLabel}=${sb.runId}`];
    const harbor = agent !== undefined ? harborPoolRows(sb, agent) : [];
    return [
        ...(harbor.length > 0 ? harbor : [pool]),
        sizing,
        ...autoscalerRow(sb),
        ["claimed lifetime", `<= ${sb.maxLifetimeSeconds} s (admission policy on every claim)`],
        ["pod deadline", `${sb.deadlineSeconds} s (warm wait ${sb.maxWarmWaitSeconds} s + lifetime)`],
        [
            "quota",
            `${sb.quota.pods} pods, ${sb.quota.cpu} CPU, ${sb.quota.memory}` +
                (harbor.length > 0
                    ? ` (${harborPools(sb).length} pools x ${sb.pools[0]?.autoscale?.max ?? sb.poolSize} warm${sb.pools[0]?.autoscale !== undefined ? " at the autoscaler's max" : ""} + ${sb.sizing.burst} claimed + ${sb.headroom} headroom)`
                    : sb.pools[0]?.autoscale !== undefined
                      ? ` (${sb.pools[0].autoscale.max} warm at the autoscaler's max + ${sb.sizing.burst} claimed + ${sb.headroom} headroom)`
                      : ""),
        ],
        ["isolation", sb.runtimeClassName ? `runtimeClass ${sb.runtimeClassName}` : "runc (set sandboxes.runtimeClassName for gVisor/Kata)"],
        [
            "training trace",
            `recorded by each pod's forwarder (uid ${sb.forwarder.runAsUser}, ports held from before the agent starts), read by the trainer on TCP ${sb.forwarder.tracePort}; refused from inside the pod (docs/design/sandbox-trust.md)`,
        ],
        [
            "sampling and bounds",
            `the forwarder sends temperature ${sb.forwarder.bounds.temperature} on every call and cuts max_tokens to ${sb.forwarder.bounds.maxTokens} (the trainer's; it refuses a record sampled otherwise); a rollout gets at most ${sb.forwarder.bounds.maxCalls} calls and ${sb.forwarder.bounds.maxRolloutTokens} completion tokens (sandboxes.maxCallsPerRollout, maxTokensPerRollout), then 429 (docs/design/sandbox-trust.md)`,
        ],
        run,
    ];
}

/** Docker: what every container of the stack takes from the one host, summed. */
export function dockerHostSection(plan: PlatformPlan): string[] {
    const needs = dockerHostNeeds(plan);
    if (needs === undefined) return [];
    const rows = needs.shares.map((s) => [s.what, s.containers, s.cpus, formatMiB(s.memoryMiB), s.containers * s.cpus, formatMiB(s.containers * s.memoryMiB)]);
    rows.push(["**total**", needs.containers, "", "", `**${needs.cpus}**`, `**${formatMiB(needs.memoryMiB)}**`]);
    return [
        "## Docker host: what this stack takes",
        "",
        table(["containers", "count", "CPUs each", "memory each", "CPUs", "memory"], rows),
        "",
        `GPUs: ${needs.gpus.length === 0 ? "none" : `${needs.gpus.length} (host devices ${needs.gpus.join(", ")})`}. ` +
            "These are Docker limits, not reservations: the daemon starts every container whatever the sum, so a host with fewer CPUs shares them (slower), " +
            "and one with less memory lets the kernel's OOM killer end containers once they near their limits. " +
            "`npm run preflight -- <stack>` compares the totals with the host's `docker info` (NCPU, MemTotal, and GPUs where the daemon reports them).",
        "",
    ];
}

/** The checkpoint volume: what the program writes, the size rule, retention, resume. */
function checkpointSection(plan: PlatformPlan): string[] {
    const c = plan.config;
    const t = c.training;
    if (!t.checkpoints.enabled)
        return ["## Checkpoints", "", "training.checkpoints.enabled is false: no volume (output goes to an emptyDir and is lost with the pod)", ""];
    const need = checkpointNeed(c);
    const writes = programCheckpoints(c);
    const resume =
        t.resumeFromCheckpoint === false
            ? "off"
            : t.resumeFromCheckpoint === true
              ? `this run's (${c.runId}) latest complete checkpoint, else the base model`
              : `this run's latest complete checkpoint, else ${t.resumeFromCheckpoint.includes("/") ? `exactly ${t.resumeFromCheckpoint}` : `run ${t.resumeFromCheckpoint}'s latest complete one`} (missing or incomplete: the pod fails)`;
    const rows: string[][] = [
        ["volume (training.checkpoints.size)", `${t.checkpoints.size}, shared by the stack's runs: each writes ${CHECKPOINT_ROOT}/<runId>`],
        ["what the program writes", writes.why],
        ["one run needs", oneRunNeed(plan.config, need)],
        ["resume (training.resumeFromCheckpoint)", resume],
        ["copy out / prune", `npm run checkpoints -- ${c.stack} (prints the commands: a helper pod on the claim, kubectl cp / the host directory)`],
    ];
    return ["## Checkpoints", "", table(["setting", "value"], rows), ""];
}

/** The checkpoint rule's need for one run, and how many such runs the volume holds; a run that writes nothing says so. */
function oneRunNeed(c: PlatformConfig, need: CheckpointNeed | undefined): string {
    if (need === undefined) return `unknown: no parameter count for ${c.model.name} (set training.checkpoints.parameters for the size check)`;
    const runs = (n: CheckpointNeed) => `the volume holds ${Math.floor(quantityValue(c.training.checkpoints.size) / n.runBytes)} such run(s)`;
    if (need.runBytes > 0) return `${need.runSize} = ${describeNeed(need)}; ${runs(need)}`;
    const push = checkpointNeed(withHubPush(c));
    return (
        "nothing: the program saves no checkpoint and the stack sets no training.hubRepoId, so this run leaves the volume empty" +
        (push !== undefined && push.runBytes > 0
            ? `; with training.hubRepoId set, the push's local copy needs ${push.runSize} = ${describeNeed(push)}; ${runs(push)}`
            : "")
    );
}

export function renderPlanMarkdown(
    plan: PlatformPlan,
    resources: readonly RecordedResource[],
    manifests: ReadonlyArray<Record<string, any>>,
    /** Secrets the stack needs and does not set, planned with placeholders (scripts/lib/plan.ts). */
    placeholderSecrets: readonly string[] = [],
): string {
    return [
        ...introSection(plan, manifests),
        ...placeholderSecretsSection(placeholderSecrets),
        ...whatRunsWhereSection(plan),
        ...podResourcesSection(manifests),
        ...trainerProgramSection(plan),
        ...checkpointSection(plan),
        ...gpuMemorySection(plan.config),
        ...weightSyncSection(plan),
        ...endpointsSection(plan),
        ...metricsSection(plan),
        ...capacitySection(plan),
        ...ingressSection(plan),
        ...sandboxesSection(plan),
        ...dockerHostSection(plan),
        ...prerequisitesSection(plan),
        ...warningsSection(plan),
        ...topologySection(plan),
        ...resourcesSection(resources, manifests),
    ].join("\n");
}

/** The title, what runs on what, whether the prod rules hold, the GPU assumed and the run's GPU time. */
function introSection(plan: PlatformPlan, manifests: ReadonlyArray<Record<string, any>>): string[] {
    const c = plan.config;
    return [
        `# Plan: stack \`${c.stack}\`${c.recipe ? ` (recipe \`${c.recipe}\`)` : ""}`,
        "",
        `Run \`${c.runId}\` of \`${c.model.name}\`@\`${c.model.revision}\` on **${c.target.kind}**, layout **${c.training.layout}**. ` +
            `Made offline under Pulumi's mock runtime: these are the inputs the program sends to the engine; providers did not run (no auto-naming, no waiting, no diffs).`,
        "",
        `Prod rules (every image pinned by digest, the model revision pinned; checked by the config before anything registers): **${c.prod ? "on" : "off"}** ` +
            `(${c.prodFromConfig !== undefined ? `config \`prod: ${c.prodFromConfig}\`` : `from the stack name \`${c.stack}\`: set \`prod\` to decide it explicitly`}).` +
            (c.prod ? ` ${POLICY_PACK_NOTE}` : "") +
            (c.target.kind === "kubernetes"
                ? ` Cluster: ${c.target.context !== undefined ? `context \`${c.target.context}\`` : c.target.kubeconfig !== undefined ? `kubeconfig \`${c.target.kubeconfig}\`` : "kubectl's current context (dev stacks only)"}.`
                : ""),
        "",
        gpuHeadline(c),
        "",
        gpuTimeHeadline(c, manifests),
        "",
    ];
}

/** The secrets planned with placeholders: what `pulumi up` needs set first. */
function placeholderSecretsSection(keys: readonly string[]): string[] {
    if (keys.length === 0) return [];
    return [
        `**Secrets not set, planned with placeholders:** ${keys.map((k) => `\`${k}\``).join(", ")}. The config needs ${keys.length === 1 ? "it" : "them"}` +
            `${keys.includes("hfToken") ? " (`hfToken`: `training.hubRepoId` pushes to the Hub)" : ""}` +
            `${keys.some((k) => k.startsWith(ENV_SECRET_PREFIX)) ? " (`envSecret-*`: an extraEnv entry references it)" : ""}; \`pulumi up\` refuses the stack until you run ${keys.map((k) => `\`${setSecretCommand(k)}\``).join(" and ")} (docs/design/secrets.md).`,
        "",
    ];
}

/** Every component with where it runs, then the notes on credentials, DNS, tenancy, lifecycle and queueing. */
function whatRunsWhereSection(plan: PlatformPlan): string[] {
    return [
        "## What runs where",
        "",
        table(["component", "where", "GPUs", "replicas", "sessions / sandboxes", "ports"], [...trainingWhereRows(plan), ...servicesWhereRows(plan)]),
        "",
        ...registryNote(plan),
        ...clusterNotes(plan),
        ...lifecycleNote(plan),
        ...kueueNote(plan),
    ];
}

/** vLLM and the trainer: colocated, one node, or a JobSet across nodes. */
function trainingWhereRows(plan: PlatformPlan): Array<Array<string | number>> {
    const { config: c, names } = plan;
    const t = c.training;
    const where = c.target.kind === "kubernetes" ? names.namespaces.training : names.networks.training;
    const multi = plan.training.multiNode;
    if (t.layout === "whitebox-colocate") return [["trainer (vLLM colocated)", where, `${t.trainerGpus}`, 1, "-", "vLLM in-process"]];
    if (multi) {
        return [
            [
                `${t.layout === "blackbox" ? "vLLM (`vllm serve`)" : "vLLM (`vllm serve`, trainer image)"}, the JobSet's replicated job \`${multi.vllm.replicatedJob}\` on its own node, started first`,
                where,
                `${t.vllmGpus} (TP ${t.vllmGpus})`,
                1,
                "-",
                "8000 + NCCL (trainer pods only)",
            ],
            [
                `trainer: the same JobSet's \`${multi.replicatedJob}\` (${multi.nodes} nodes x ${t.numProcesses} processes = ${multi.nodes * t.numProcesses}), started once vLLM is Ready`,
                where,
                `${t.trainerGpus} per node, ${multi.nodes * t.trainerGpus} in all`,
                `${multi.nodes} (one pod per node)`,
                "-",
                `${multi.mainProcessPort} rendezvous on rank 0 + NCCL (trainer and vLLM pods only)`,
            ],
        ];
    }
    return [
        [t.layout === "blackbox" ? "vLLM (`vllm serve`)" : "vLLM (`vllm serve`, trainer image)", where, `${t.vllmGpus}`, 1, "-", "8000 (private)"],
        [
            `trainer (${t.numProcesses} process${t.numProcesses === 1 ? "" : "es"})`,
            where,
            `${t.trainerGpus}`,
            1,
            "-",
            t.layout === "whitebox-server" ? "51216 (NCCL group, private)" : "NCCL (private)",
        ],
    ];
}

/** The env servers, the ingress and the sandboxes. */
function servicesWhereRows(plan: PlatformPlan): Array<Array<string | number>> {
    const { config: c, names } = plan;
    const rows: Array<Array<string | number>> = [];
    for (const e of c.envs) {
        if (e.external) rows.push([`env \`${e.name}\` (external)`, e.external.url, 0, "-", e.external.sessions, "-"]);
        else
            rows.push([
                `env \`${e.name}\` (${e.catalog})`,
                c.target.kind === "kubernetes" ? names.namespaces.envs : dockerEnvWhere(plan, e.name),
                0,
                `${e.replicas} + router`,
                `${e.sessionsPerReplica} per replica`,
                `${e.port}`,
            ]);
    }
    if (c.ingress.enabled)
        rows.push([
            "vLLM ingress",
            c.target.kind === "kubernetes" ? names.namespaces.ingress : names.networks.training,
            0,
            c.target.kind === "kubernetes" ? c.ingress.replicas : 1,
            "-",
            c.ingress.tls.mode === "none" ? "8080 (http)" : "8443 (https)",
        ]);
    if (plan.sandboxes !== undefined)
        rows.push([`sandboxes (${c.sandboxes.provider})`, names.namespaces.sandboxes, 0, warmSandboxes(plan), `${c.training.maxInflight} in flight`, "-"]);
    return rows;
}

/** registryAuth: where the pull credentials go (values redacted). */
function registryNote(plan: PlatformPlan): string[] {
    const { config: c, names } = plan;
    if (plan.registryAuth === undefined) return [];
    return [
        c.target.kind === "kubernetes"
            ? `Registry credentials (registryAuth, a secret): the pull Secret \`${names.pullSecret}\` (kubernetes.io/dockerconfigjson) in each of the ${namespaceRoles(c).length} namespaces, referenced by every pod and the trainer's ServiceAccount; registries: ${plan.registryAuth.join(", ")} (values redacted).`
            : `Registry credentials (registryAuth, a secret): the Docker provider's registryAuth for ${dockerProviderAddresses(plan.registryAuth).join(", ")}, used for every image the stack pulls (values redacted).`,
        "",
    ];
}

/** Kubernetes: where DNS queries may go, and whose namespaces these are. */
function clusterNotes(plan: PlatformPlan): string[] {
    const c = plan.config;
    if (c.target.kind !== "kubernetes") return [];
    return [
        `DNS egress (target.dns): **${c.target.dns.kind}**: ${dnsEgressText(dnsEgressFor(c.target))}, on 53 UDP+TCP; nothing else there.`,
        "",
        tenancyText(plan),
        "",
    ];
}

/** training.nodes > 1: how the JobSet starts, ends and fails. */
function lifecycleNote(plan: PlatformPlan): string[] {
    if (!plan.training.multiNode) return [];
    return [
        `Lifecycle (training.nodes > 1): one JobSet holds vLLM and the trainers. The trainers start once vLLM's pod is Ready (its /health); ` +
            `the run completes when every trainer succeeds, and the JobSet then deletes vLLM's Job, freeing its node. ` +
            `A trainer's non-zero exit or the deadline fails the run (vLLM goes with it); a vLLM failure restarts vLLM and every trainer, ` +
            `counted against training.backoffLimit (${plan.training.job.backoffLimit}: ${plan.training.job.backoffLimit === 0 ? "the run ends" : "then the run ends"}); a drained node restarts everything without counting.`,
        "",
    ];
}

/** target.kueueQueue: the trainer waits, suspended, for Kueue's admission. */
function kueueNote(plan: PlatformPlan): string[] {
    const queue = plan.training.kueueQueue;
    if (queue === undefined) return [];
    const multi = plan.training.multiNode;
    return [
        `Kueue queue: **${queue}** (target.kueueQueue). The trainer's ${multi ? "JobSet" : "Job"} carries \`kueue.x-k8s.io/queue-name: ${queue}\` and is created suspended: ` +
            `it starts only when Kueue admits it against LocalQueue \`${queue}\` in ${plan.names.namespaces.training} (which the cluster must have; this stack creates no Kueue objects).` +
            (multi ? " vLLM is a replicated job of the same JobSet: queued and admitted with the trainers, no pod while suspended." : ""),
        "",
    ];
}

/** training.gpuSharing: how the weights reach vLLM, over which GPUs, with which NCCL settings. */
function weightSyncSection(plan: PlatformPlan): string[] {
    const c = plan.config;
    const sharing = plan.training.gpuSharing;
    if (sharing.mode === "none") return [];
    const multi = plan.training.multiNode;
    const ncclEnv = Object.entries(sharing.env)
        .map(([k, v]) => `${k}=${v}`)
        .join(" ");
    const rows = [
        ["GPU sharing (training.gpuSharing)", sharing.mode],
        ["transport", sharing.transport],
        ["expected bandwidth", sharing.bandwidth],
        [
            "GPUs",
            `vLLM ${plan.training.gpuLayout.vllm.join(",")} / trainer ${plan.training.gpuLayout.trainer.join(",")}${sharing.mode === "shared" ? " (CUDA_VISIBLE_DEVICES, PCI bus order)" : ""}`,
        ],
        [
            "pod shape",
            multi
                ? "vLLM pod on its own node; one trainer pod per node (JobSet)"
                : c.target.kind === "kubernetes"
                  ? sharing.oneContainer
                      ? "one container, every GPU; a supervisor starts vLLM, then the trainer"
                      : "vLLM native sidecar + trainer, each its own GPUs"
                  : "two containers, the trainer in vLLM's network and IPC namespaces",
        ],
        ["NCCL settings (both roles)", ncclEnv || "-"],
        [
            "NCCL check before vLLM loads (training.ncclCheck)",
            sharing.check ? `on: ${sharing.check.sizeGiB} GiB broadcast, ${sharing.check.timeoutSeconds} s limit` : "off",
        ],
        ...vllmSettingRows(c),
    ];
    const sharedOnDocker =
        sharing.mode === "shared" && c.target.kind === "docker"
            ? [
                  "",
                  "Both containers can open every training GPU: CUDA_VISIBLE_DEVICES keeps vLLM and the trainer apart, but nothing in the kernel does. Both are this run's trusted code; model-written code runs in env servers and sandboxes, which get no GPU.",
              ]
            : [];
    return ["## Weight sync (NCCL, trainer -> vLLM)", "", table(["setting", "value"], rows), ...sharedOnDocker, ...multiRankSyncNote(plan), ""];
}

/**
 * The black box's AsyncGRPO over more than one trainer rank: TRL 1.16.0 hangs at the first sync (huggingface/trl#7103);
 * the image carries the fix (trainer/fix_trl_weight_sync.py), proven on CPU ranks only until the multi-GPU run has passed.
 */
function multiRankSyncNote(plan: PlatformPlan): string[] {
    const t = plan.config.training;
    const ranks = (plan.training.multiNode?.nodes ?? 1) * t.numProcesses;
    if (t.layout !== "blackbox" || ranks < 2) return [];
    return [
        "",
        `**Unproven for ${ranks} trainer ranks.** TRL 1.16.0's AsyncGRPO hangs at the first weight sync when FSDP shards the model over more than one rank (huggingface/trl#7103: rank 0 sends while the others all-gather). The black-box image applies the fix proposed upstream (#7131; trainer/fix_trl_weight_sync.py: every rank gathers, then rank 0 sends whole tensors; a barrier after the NCCL setup). Its order is tested on 2 CPU ranks (gloo, FSDP2), not yet on GPUs with NCCL to vLLM: no multi-rank layout has run a sync here. During each sync rank 0 holds a full copy of the weights it sends.`,
    ];
}

/** Who calls whom at which URL. */
function endpointsSection(plan: PlatformPlan): string[] {
    const { config: c, names } = plan;
    const multi = plan.training.multiNode;
    const endpoints: Array<Array<string>> = [["trainer -> vLLM (internal)", plan.training.internalUrl]];
    if (multi) {
        endpoints.push([
            "trainer ranks -> rank 0 (accelerate --main_process_ip)",
            `${plan.training.multiNode?.derivedEnv.MAIN_PROCESS_IP.replace(/\$\(JOBSET_NAME\)/g, "<jobset>")}:${multi.mainProcessPort} (JobSet's headless Service)`,
        ]);
    }
    for (const e of c.envs)
        endpoints.push([`env \`${e.name}\``, `${names.envs[e.name].url} (websocket ${names.envs[e.name].url.replace(/^http/, "ws")}${e.wsPath})`]);
    if (c.ingress.enabled) {
        endpoints.push(["sandboxes -> vLLM (ingress)", names.ingress.sandboxUrl]);
        endpoints.push(["ingress -> vLLM upstream", names.training.vllmUpstream]);
    }
    return ["## Endpoints", "", table(["who", "URL"], endpoints), ""];
}

/** The capacity math with its numbers, then what changing an env's capacity mid-run does. */
function capacitySection(plan: PlatformPlan): string[] {
    const checks = [...batchChecks(plan), ...gpuChecks(plan), ...envChecks(plan), ...sandboxPoolCheck(plan)];
    return ["## Capacity checks", "", table(["check", "how", "value", "holds because"], checks), "", ...noBatchRuleNote(plan), ...capacityChangeNote(plan)];
}

/** The black box: TRL's batch rule does not bind AsyncGRPO, so no batch row claims it (validation skips it too). */
function noBatchRuleNote(plan: PlatformPlan): string[] {
    if (grpoBatchRuleApplies(plan.config.training)) return [];
    return [
        `No batch row: TRL's rule that the generation and eval batches divide by numGenerations (GRPOConfig) does not bind layout ${plan.config.training.layout}: AsyncGRPO has none (a micro-batch may hold fewer groups than rows), and validation does not check it.`,
        "",
    ];
}

/** The generation and eval batches against numGenerations, where TRL's GRPOConfig rule binds the trainer. */
function batchChecks(plan: PlatformPlan): Array<Array<string | number>> {
    const t = plan.config.training;
    if (!grpoBatchRuleApplies(t)) return [];
    const d = plan.config.demand;
    const multi = plan.training.multiNode;
    return [
        [
            "generation batch",
            `perDeviceTrainBatchSize ${t.perDeviceTrainBatchSize} x numProcesses ${t.numProcesses}${multi ? ` x nodes ${multi.nodes}` : ""} x stepsPerGeneration ${t.stepsPerGeneration}`,
            d.generationBatch,
            `divisible by numGenerations ${t.numGenerations}: ${d.promptsPerGeneration} prompts per generation`,
        ],
        [
            "eval batch",
            d.evalBatch > 0
                ? `perDeviceEvalBatchSize ${t.perDeviceEvalBatchSize} x numProcesses ${t.numProcesses}${multi ? ` x nodes ${multi.nodes}` : ""}`
                : "eval off (evalSize 0)",
            d.evalBatch,
            d.evalBatch > 0 ? `divisible by numGenerations ${t.numGenerations}` : "-",
        ],
    ];
}

/** GPUs per node, or per role and node count across a JobSet. */
function gpuChecks(plan: PlatformPlan): Array<Array<string | number>> {
    const t = plan.config.training;
    const multi = plan.training.multiNode;
    return [
        ...(multi
            ? [
                  ["trainer GPUs per node", `trainerGpus ${t.trainerGpus} (numProcesses ${t.numProcesses})`, t.trainerGpus, `<= ${t.gpusOnNode} on a node`],
                  ["vLLM GPUs", `vllmGpus ${t.vllmGpus} (tensor parallel)`, t.vllmGpus, `<= ${t.gpusOnNode} on its own node`],
                  [
                      "GPU nodes",
                      `${multi.nodes} trainer nodes + 1 vLLM node`,
                      multi.nodes + 1,
                      `${multi.nodes * t.trainerGpus + t.vllmGpus} GPUs in all, one trainer pod per node (JobSet exclusive placement on ${multi.exclusiveTopology})`,
                  ],
              ]
            : [["GPUs", `vLLM ${t.vllmGpus} + trainer ${t.trainerGpus}`, t.vllmGpus + t.trainerGpus, `<= ${t.gpusOnNode} on the node`]]),
    ];
}

/** Each env's sessions against the run's demand, and how long a half-open session holds a slot. */
function envChecks(plan: PlatformPlan): Array<Array<string | number>> {
    const d = plan.config.demand;
    const checks: Array<Array<string | number>> = [];
    for (const e of plan.config.envs) {
        if (e.external)
            checks.push([`env \`${e.name}\` sessions`, `external, declared ${e.external.sessions}`, e.external.sessions, `>= ${d.envSessions} live sessions`]);
        else
            checks.push([
                `env \`${e.name}\` sessions`,
                `${e.replicas} replicas x ${e.sessionsPerReplica} = ${e.capacity}`,
                e.capacity,
                `>= ${d.envSessions} live sessions (max of generation ${d.generationBatch} and eval ${d.evalBatch}) + ${e.headroomReplicas} spare replica (${e.headroomReplicas * e.sessionsPerReplica}) = ${d.envSessions + e.headroomReplicas * e.sessionsPerReplica}`,
            ]);
        const env = plan.envs.find((x) => x.name === e.name);
        if (env?.kind === "deployed") checks.push(envKeepaliveRow(env, e.catalog));
    }
    return checks;
}

/** A pool this stack runs: its size against the rollouts in flight. */
function sandboxPoolCheck(plan: PlatformPlan): Array<Array<string | number>> {
    const c = plan.config;
    if (plan.sandboxes === undefined) return [];
    const pools = harborPools(plan.sandboxes).length;
    return [
        [
            pools > 0 ? `sandbox pools (${pools}, one per task image)` : "sandbox pool",
            `poolSize ${c.sandboxes.poolSize}`,
            c.sandboxes.poolSize,
            `>= the burst ${c.sandboxes.sizing.burst} (refused below); the rule's ${c.sandboxes.sizing.size} = burst + ${c.sandboxes.sizing.refill} refill + ${c.sandboxes.sizing.margin} headroom`,
        ],
    ];
}

/** Deployed envs: a capacity change restarts their routers and drops live sessions. */
function capacityChangeNote(plan: PlatformPlan): string[] {
    const routed = plan.envs.filter((x) => x.kind === "deployed").map((x) => `\`${x.name}\``);
    if (routed.length === 0) return [];
    return [
        `Changing an env's capacity mid-run (\`envs.<name>.replicas\`, \`headroomReplicas\`, \`sessionsPerReplica\`) restarts its routers ` +
            `(env${routed.length === 1 ? "" : "s"} ${routed.join(", ")}): the router config lists the replicas, and ` +
            (plan.config.target.kind === "kubernetes"
                ? "the router Deployment replaces both its pods at once (Recreate), "
                : "the router container is replaced (deleted first), ") +
            `so every live session through them is dropped; \`pulumi up\` returns once the routers serve again. Change capacity between runs.`,
        "",
    ];
}

/** The ingress: keys, exposure, TLS, rate limit, routes. */
function ingressSection(plan: PlatformPlan): string[] {
    const { config: c, names } = plan;
    const i = plan.ingress;
    if (!i) return [];
    const rows = [
        ["keys (names; values are secret outputs)", i.keyNames.join(", ")],
        [
            "sandboxes use",
            i.sandboxKeyName !== undefined
                ? `${i.sandboxKeyName} at ${names.ingress.sandboxUrl}`
                : `their rollout's own \`rk1.\` key at ${names.ingress.sandboxUrl}; the shared key ${i.retiredSandboxKey} (ingress.sandboxKey) is not rendered and nginx refuses it`,
        ],
        ["exposure", `${i.exposure}${i.host ? ` (${i.host})` : ""}`],
        ["TLS ends at", i.tls.terminatedAt],
        ["rate limit per key", `${c.ingress.rateLimitPerSecond}/s per replica x ${i.replicas} = ${i.effectiveRateLimitPerSecond}/s`],
        [
            "allowed routes",
            `POST /v1/chat/completions, GET /v1/models${c.ingress.allowCompletions ? ", POST /v1/completions" : ""}${c.ingress.healthUnauthenticated ? ", GET /health (no key)" : ""}`,
        ],
        ...(i.rolloutKeys
            ? [
                  [
                      "per-rollout keys",
                      `on (agent-sandbox pool): nginx asks the verifier ${i.rolloutKeys.names.deployment} (one replica, ${i.rolloutKeys.verifyAddress}) about every \`rk1.\` key; its admin key is a generated secret, read by the verifier and the trainer only. The trainer mints a key per claim (${i.rolloutKeys.adminUrl}), hands it to the claim's forwarder and revokes it when the claim ends: each rollout has its own rate-limit bucket, and its key is refused once the rollout ends. No forwarder holds a shared key, and none falls back to one (docs/design/rollout-keys.md)`,
                  ],
              ]
            : []),
    ];
    return ["## Ingress", "", table(["setting", "value"], rows), ""];
}

/** A pool this stack runs. */
function sandboxesSection(plan: PlatformPlan): string[] {
    if (!plan.sandboxes) return [];
    return ["## Sandboxes", "", table(["setting", "value"], sandboxRows(plan.sandboxes, plan.config.harbor?.agent)), ""];
}

/** What the stack uses but does not create, each with the symptom of its absence and a check. */
function prerequisitesSection(plan: PlatformPlan): string[] {
    if (plan.prerequisites.length === 0) return [];
    return [
        "## Prerequisites this stack does not create",
        "",
        `The offline plan reads no ${plan.config.target.kind === "kubernetes" ? "cluster" : "host"}, so it checks none of these: \`npm run preflight -- <stack>\` checks them against the live target before \`pulumi up\`` +
            ` (the stack's \`preflight\` setting, now \`${plan.config.preflight}\`, runs the same checks at \`pulumi up\`: \`warn\` logs, \`enforce\` stops). Each row says what happens without it and how to check it by hand.`,
        "",
        table(
            ["must exist", "field", "otherwise", "check"],
            plan.prerequisites.map((p) => [p.what, `\`${p.field}\``, p.otherwise, `\`${p.check}\``]),
        ),
        "",
    ];
}

/** The plan's warnings and every deployed env's. */
function warningsSection(plan: PlatformPlan): string[] {
    const warnings = [...plan.warnings, ...plan.envs.flatMap((e) => (e.kind === "deployed" ? e.warnings : []))];
    if (warnings.length === 0) return [];
    return ["## Warnings", "", ...warnings.map((w) => `- ${w}`), ""];
}

/** The Mermaid diagram. */
function topologySection(plan: PlatformPlan): string[] {
    return ["## Topology", "", "```mermaid", renderMermaid(plan), "```", ""];
}

/** How many resources of each type the program registered. */
function resourcesSection(resources: readonly RecordedResource[], manifests: ReadonlyArray<Record<string, any>>): string[] {
    const counts = new Map<string, number>();
    for (const r of resources) counts.set(r.type, (counts.get(r.type) ?? 0) + 1);
    return [
        "## Resources",
        "",
        table(
            ["type", "count"],
            [...counts.entries()].sort().map(([k, v]) => [`\`${k}\``, v]),
        ),
        "",
        `${resources.length} resources registered${manifests.length > 0 ? `, ${manifests.length} Kubernetes objects in manifests/` : ""}.`,
        "",
    ];
}

/** The vLLM server's own settings (training.dtype, training.vllm), as plan.md rows. */
function vllmSettingRows(c: PlatformConfig): string[][] {
    const v = vllmServerSettings(c);
    const env = Object.entries(v.extraEnv)
        .map(([k, value]) => (typeof value === "string" ? `${k}=${value}` : `${k}=<secret ${value.secret}>`))
        .join(" ");
    return [
        ["dtype, vLLM and trainer (training.dtype)", v.dtype !== undefined ? `\`--dtype ${v.dtype}\`` : "the model's own (vLLM `auto`)"],
        ...(v.toolCallParser !== undefined ? [["tool-call parser (training.vllm.toolCallParser)", `\`${v.toolCallParser}\``]] : []),
        ["vLLM extra flags (training.vllm.extraArgs)", v.extraArgs.length > 0 ? `\`${v.extraArgs.join(" ")}\`` : "-"],
        ["vLLM extra env (training.vllm.extraEnv)", env || "-"],
    ];
}

/** The DNS peers of every locked-down pod's egress, in words. */
function dnsEgressText(dns: DnsEgress): string {
    return [
        ...dns.addresses.map((a) => `\`${a}/32\``),
        ...dns.pods.map(
            (p) =>
                `pods ${Object.entries(p.podLabels)
                    .map(([k, v]) => `\`${k}=${v}\``)
                    .join(", ")} in ${p.namespace}`,
        ),
    ].join(" and ");
}

/** observability.enabled: every metrics port, who scrapes it and how (plan.md's "Metrics"); nothing when off. */
function metricsSection(plan: PlatformPlan): string[] {
    const m = plan.monitoring;
    const c = plan.config;
    if (m === undefined) return [];
    const o = c.observability;
    const out = ["## Metrics", ""];
    const k8s = c.target.kind === "kubernetes";
    out.push(
        k8s
            ? `Scraped by the pods labelled ${Object.entries(o.scraper.podLabels)
                  .map(([k, v]) => `\`${k}=${v}\``)
                  .join(", ")} in namespace \`${o.scraper.namespace}\` (the NetworkPolicies admit them on these ports only), every ${m.scrapeInterval}, ${
                  m.form === "operator"
                      ? `through the PodMonitors below${
                            Object.keys(o.monitorLabels).length > 0
                                ? ` (labels ${Object.entries(o.monitorLabels)
                                      .map(([k, v]) => `\`${k}=${v}\``)
                                      .join(", ")})`
                                : ""
                        }`
                      : "through the pods' prometheus.io/* annotations (docs/guides/observability.md has the scrape job)"
              }.`
            : `A Prometheus on the Docker host scrapes these every ${m.scrapeInterval}, on the host's loopback (observability/prometheus.yml beside this plan.md; docs/guides/observability.md).`,
    );
    out.push("");
    if (!k8s) {
        out.push(
            table(
                ["host address", "container (network namespace)", "serves", "labels"],
                plan.dockerMetrics.map((t) => [
                    `\`${dockerMetricsAddress(t)}\``,
                    `\`${t.container}\``,
                    `\`${t.labels.container}\``,
                    Object.entries(t.labels)
                        .map(([k, v]) => `${k}=${v}`)
                        .join(", "),
                ]),
            ),
        );
        out.push("");
        out.push("Not visible on Docker: the trainer (it runs bare there, without the role runner) and the agent-sandbox controller (not on Docker).");
        out.push("");
        return out;
    }
    const monitorOf = (ns: string, labels: Readonly<Record<string, string>>) =>
        m.podMonitors.find((pm) => pm.namespace === ns && JSON.stringify(pm.selector) === JSON.stringify(labels))?.name ?? "-";
    const rows = m.scraped.flatMap((s) =>
        s.ports.map((p) => [
            s.role,
            k8s ? s.namespace : "-",
            `\`${p.container}\``,
            `${p.name} ${p.port}${p.path}`,
            p.what,
            ...(k8s && m.form === "operator" ? [monitorOf(s.namespace, s.podLabels)] : []),
        ]),
    );
    out.push(table(["pods", "namespace", "container", "port", "what", ...(k8s && m.form === "operator" ? ["PodMonitor"] : [])], rows));
    out.push("");
    if (c.training.layout === "whitebox-colocate") {
        out.push("vLLM runs inside the training script (colocate) and serves no HTTP: not visible; the trainer's port is.");
        out.push("");
    }
    return out;
}

/** Where the run's namespaces come from: its own, or its team's (target.team) with the team's bounds. */
function tenancyText(plan: PlatformPlan): string {
    const c = plan.config;
    const roles = namespaceRoles(c)
        .map((r) => `\`${plan.names.namespaces[r]}\``)
        .join(", ");
    if (c.target.kind !== "kubernetes" || c.target.team === undefined)
        return `Namespaces: ${roles}, made by this stack (Pod Security labels, a default-deny ingress policy each; the training one is kept on destroy). Cluster-scoped objects: the namespaces${plan.sandboxes !== undefined ? " and the sandbox claim policy + binding" : ""}.`;
    const t = c.cluster?.tenant;
    const quotas = t
        ? Object.entries(t.quotas)
              .map(([role, q]) => `${role} ${JSON.stringify(q)}`)
              .join("; ")
        : "";
    return (
        `Namespaces: team **${c.target.team}**'s ${roles}, made by the cluster stack \`${c.clusterStack}\` (with their Pod Security labels, default-deny policies and the team's quotas${quotas ? `: ${quotas}` : ""}); this stack makes no namespace and nothing cluster-wide, and its objects' names carry its prefix \`${plan.names.prefix}\` (the team's other run stacks share the namespaces). ` +
        `Sandbox claims are bounded by the team's admission policy (${t?.sandboxMaxLifetimeSeconds ?? "?"}s); the team's quotas, shared by its runs, bound this run's pods. At \`up\` the stack checks that its cluster is the cluster stack's (kube-system UID); a plan reads no cluster.`
    );
}
