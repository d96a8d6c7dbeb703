/**
 * plan.md's "GPU memory" section: each role's estimated peak per GPU against the GPU's memory
 * (components/config/gpu-fit.ts; the model and its calibration: docs/design/gpu-memory.md).
 */
import { describeTrainer, describeTrainerShape, describeVllm, gpuMemoryPlan, validateGpuMemory } from "../../components/config/gpu-fit";
import { gib } from "../../components/config/gpu-memory";
import { CUSTOM_PROGRAM, type PlatformConfig } from "../../components/config";

function table(header: string[], rows: string[][]): string {
    const line = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, "\\|")).join(" | ")} |`;
    return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

function verdict(fits: boolean | undefined, need: number, budget: number | undefined): string {
    if (fits === undefined || budget === undefined) return "unknown GPU";
    return fits ? `fits, ${gib(budget - need)} GiB to spare` : `**does not fit**: short by ${gib(need - budget)} GiB`;
}

/**
 * Which trainer the estimate describes, against the one the run runs: the calibration is GRPOTrainer's step; the
 * black box's programs (TRL's opencode script, the Harbor script) run AsyncGRPOTrainer, whose step was never measured.
 */
export function trainerTheEstimateDescribes(c: PlatformConfig): string {
    if (c.training.layout !== "blackbox") return "This run's trainer is TRL's GRPOTrainer: the step the estimate was calibrated on.";
    const whose = c.training.program === CUSTOM_PROGRAM ? "your script's trainer (TRL's opencode and Harbor scripts run AsyncGRPOTrainer)" : "AsyncGRPOTrainer";
    return (
        `**The estimate describes GRPOTrainer's step; this run's trainer is ${whose}**, whose step (rows packed up to 32768 tokens, ` +
        "a varlen attention kernel) was never measured: the fp32 sequence-squared attention term inside the trainer's figure may not apply " +
        "to it, so the figure may over-state its peak; unproven until measured (docs/design/gpu-memory.md)."
    );
}

/** The section's lines. */
export function gpuMemorySection(c: PlatformConfig): string[] {
    const head = ["## GPU memory", ""];
    const plan = gpuMemoryPlan(c);
    if (plan.model === undefined || plan.trainer === undefined || plan.trainerShape === undefined || plan.vllm === undefined || plan.vllmShape === undefined) {
        return [
            ...head,
            `No estimate: ${c.model.name} is not in the model table (components/config/model-facts.ts); give its config.json numbers in training.gpuMemory.model.`,
            "",
        ];
    }
    const t = c.training;
    const gpu = plan.gpu === undefined ? "unknown: set target.gpuProduct, training.gpuMemory.product or training.gpuMemory.gib" : plan.gpu.what;
    const trainer = plan.roles[0]!;
    const vllm = plan.roles[1]!;
    const colocate = t.layout === "whitebox-colocate";
    const v = plan.vllm;
    const rows: string[][] = [
        ["GPU", "-", gpu, "-", "-"],
        [
            "trainer",
            `${colocate ? "1 GPU shared with vLLM" : `${t.trainerGpus} GPU${t.nodes > 1 ? ` x ${t.nodes} nodes` : ""}`}, per GPU`,
            `${gib(trainer.need)} GiB = ${describeTrainer(plan.trainer)} (${describeTrainerShape(c.model.name, plan.trainerShape)})`,
            trainer.budget === undefined ? "-" : `${gib(trainer.budget)} GiB (${trainer.budgetRule})`,
            verdict(trainer.fits, trainer.need, trainer.budget),
        ],
        [
            "vLLM",
            colocate ? "inside the trainer process" : `${t.vllmGpus} GPU (TP ${plan.vllmShape.tensorParallel}), per GPU`,
            `${gib(vllm.need)} GiB to start = ${describeVllm(v, plan.vllmShape)}`,
            vllm.budget === undefined ? "-" : `${gib(vllm.budget)} GiB (${vllm.budgetRule})`,
            verdict(vllm.fits, vllm.need, vllm.budget),
        ],
    ];
    const kv =
        plan.gpu === undefined
            ? []
            : [
                  `vLLM's KV cache (${gib(v.kvPerToken * 1024)} GiB per 1k tokens per GPU) holds ${v.sequencesAtFullLength} sequence(s) at the full ${plan.vllmShape.maxModelLen} tokens; ${plan.vllmShape.concurrency} run at once${v.sequencesAtFullLength < plan.vllmShape.concurrency ? ": long ones queue or are preempted (shorter sequences share the cache)" : ""}.`,
              ];
    const refused = validateGpuMemory(c);
    const check =
        t.gpuMemory.enforce === false
            ? ["training.gpuMemory.enforce is false: a misfit is not refused."]
            : refused.length > 0
              ? ["Refused by the config check:", ...refused.map((p) => `- ${p}`)]
              : ["The config check refuses a role whose estimate exceeds its budget (training.gpuMemory.enforce: false overrides)."];
    return [
        ...head,
        table(["role", "GPUs", "estimated peak", "budget", "fit"], rows),
        "",
        ...kv,
        "The trainer's estimate is calibrated within 15% on one H200 with TRL's GRPOTrainer step (bench/results.md \"GPU memory calibration\"); vLLM's is its own start-up arithmetic (weights, one full-length sequence's KV cache, overhead).",
        "",
        trainerTheEstimateDescribes(c),
        "",
        ...check,
        "",
    ];
}
