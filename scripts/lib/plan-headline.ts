/**
 * plan.md's headline answers: the GPU the memory check assumed and the field that changes it,
 * which known GPUs fit when the stack does not pin one, and the run's GPU time where the manifests
 * bound it.
 */
import { gpuMemoryField, gpuMemorySource, knownProductFits } from "../../components/config/gpu-fit";
import { RECIPES, type PlatformConfig, type RecipeName } from "../../components/config";
import { podShapes } from "./plan-pod-resources";

/** The recipe's own training.gpuMemory.product, when the stack's is that one. */
function recipeProduct(c: PlatformConfig): string | undefined {
    const recipe = c.recipe === undefined ? undefined : (RECIPES[c.recipe as RecipeName] as { training?: { gpuMemory?: { product?: string } } } | undefined);
    const product = recipe?.training?.gpuMemory?.product;
    return product !== undefined && product === c.training.gpuMemory.product ? product : undefined;
}

/** `A, B` of the known products that fit, and of those that do not. */
function fitList(c: PlatformConfig): string {
    const fits = knownProductFits(c);
    if (fits.every((f) => f.fits === undefined)) return "";
    const yes = fits.filter((f) => f.fits === true).map((f) => `\`${f.product}\``);
    const no = fits.filter((f) => f.fits === false).map((f) => `\`${f.product}\``);
    return ` Of the known GPUs (components/config/gpu-products.ts), the estimate fits ${yes.length > 0 ? yes.join(", ") : "none"}${no.length > 0 ? `; not ${no.join(", ")}` : ""}.`;
}

/** The GPU line: assumed, from which field, pinned or not, and what fits. */
export function gpuHeadline(c: PlatformConfig): string {
    const field = gpuMemoryField(c);
    const source = gpuMemorySource(c);
    const k8s = c.target.kind === "kubernetes";
    const change = k8s
        ? "to pin it, set `target.gpuProduct` to your GPU nodes' `nvidia.com/gpu.product` label (the node selector and this check both use it)"
        : "name yours in `training.gpuMemory.product` (`nvidia-smi --query-gpu=name`, spaces as dashes)";
    if (field === undefined || source === undefined) {
        const named = field === undefined ? "no GPU is named" : `\`${field}\` names a GPU the table lacks`;
        return `**GPU**: unknown: ${named}, so the GPU memory check is skipped; ${change}, or give \`training.gpuMemory.gib\`.${fitList(c)}`;
    }
    const recipe = field === "training.gpuMemory.product" ? recipeProduct(c) : undefined;
    const from = `\`${field}\`${recipe !== undefined ? ` (recipe \`${c.recipe}\`'s)` : ""}`;
    if (field === "target.gpuProduct")
        return `**GPU**: ${source.what}, pinned by \`target.gpuProduct\` (the training pod's node selector); the GPU memory check is against it.`;
    const pinned = k8s ? "Not pinned: the training pod may land on any GPU node" : "On Docker the run takes the host's GPUs, whatever they are";
    return `**GPU assumed by the memory check**: ${source.what}, from ${from}. ${pinned}; ${change}.${fitList(c)}`;
}

/**
 * The run's GPU time: an upper bound from the GPU pods' own deadlines (Job activeDeadlineSeconds)
 * where every GPU pod has one; never an estimate per step, which needs a step time the plan lacks.
 */
export function gpuTimeHeadline(c: PlatformConfig, manifests: ReadonlyArray<Record<string, any>>): string {
    const perStep = `the plan knows the run's steps (training.maxSteps ${c.training.maxSteps ?? "unset: the program's own"}) but not how long a step takes, so it gives no GPU-hours per step`;
    if (c.target.kind !== "kubernetes") return `**GPU time**: ${perStep}, and Docker has no deadline to bound the run.`;
    const gpuPods = podShapes(manifests).filter((s) => s.requests.gpu !== undefined && Number(s.requests.gpu) > 0 && s.count > 0);
    const deadline = (owner: string) => {
        const [kind, rest] = owner.split("/", 2) as [string, string];
        const name = rest.split(" ")[0];
        const m = manifests.find((x) => x.kind === kind && x.metadata?.name === name);
        if (kind === "Job") return m?.spec?.activeDeadlineSeconds as number | undefined;
        if (kind === "JobSet") {
            const job = (m?.spec?.replicatedJobs ?? []).find((rj: any) => owner.endsWith(` job ${rj.name}`));
            return job?.template?.spec?.activeDeadlineSeconds as number | undefined;
        }
        return undefined;
    };
    const bounded = gpuPods.map((s) => ({ s, seconds: deadline(s.owner) }));
    if (gpuPods.length === 0) return `**GPU time**: no pod requests a GPU.`;
    if (bounded.some((b) => b.seconds === undefined))
        return `**GPU time**: ${perStep}, and a GPU pod (${bounded.find((b) => b.seconds === undefined)?.s.owner}) has no deadline to bound it.`;
    const gpus = bounded.reduce((n, b) => n + Number(b.s.requests.gpu) * b.s.count, 0);
    const hours = bounded.reduce((h, b) => h + (Number(b.s.requests.gpu) * b.s.count * (b.seconds as number)) / 3600, 0);
    const longest = Math.max(...bounded.map((b) => b.seconds as number));
    return (
        `**GPU time**: at most ${Number(hours.toFixed(1))} GPU-hours: ${gpus} GPU${gpus === 1 ? "" : "s"} held for at most ${Number((longest / 3600).toFixed(2))} h ` +
        `(the Job's activeDeadlineSeconds, \`training.activeDeadlineSeconds\`; retries count against the same deadline). A bound, not an estimate: ${perStep}.`
    );
}
