/**
 * The facts walk (issue 43 point 2): for every named program in the facts (components/config/programs.ts),
 * every flag it takes is reachable, through a typed setting or through training.extraArgs:
 * - a flag the platform maps has a source (components/config/program-settings.ts ARG_SOURCES); a source
 *   that is a setting is a field of the schema, and setting it (SAMPLES) renders the flag with its value
 *   on that program's command line (components/training/program-args.ts);
 * - a flag the platform does not map passes training.extraArgs' check (a sample value of its type and
 *   choices) and reaches the command line as written.
 * Returns one line per problem; the walk takes its inputs as arguments so a test can break one
 * (a program table, the sources, the renderer) and see the walk fail.
 */
import { deepMerge, platformSchema, type ProgramFacts, type ProgramFlag } from "../../components/config";
import type { ArgSource } from "../../components/config/program-settings";
import type { ProgramArgMap } from "../../components/config/programs";
import { schemaAt } from "../../components/config/schema-walk";
import type { ProgramLinks } from "../../components/training/program-args";
import { configProblems, parseWithTestImages } from "./config";
import type { PlatformConfig } from "../../components/config";

/** A stack that runs each program (the recipe of its published run) and passes the config's checks. */
export const PROGRAM_BASES: Readonly<Record<string, Record<string, unknown>>> = {
    train_coding_whitebox_eval: { recipe: "mbpp-whitebox" },
    train_coding_whitebox: { recipe: "mbpp-whitebox-64" },
    train_wordle_whitebox: { recipe: "wordle-whitebox" },
    opencode_hf_sandbox: { recipe: "opencode-blackbox" },
};

/** For each mapped setting: what to write in the stack so its flag renders, and the value it renders as. */
export const SAMPLES: { readonly [K in keyof Required<ProgramArgMap>]: { readonly patch: Record<string, unknown>; readonly value?: string } } = {
    model: { patch: { model: { name: "Qwen/Qwen3-4B" } }, value: "Qwen/Qwen3-4B" },
    envUrl: { patch: {}, value: "ENV_URL" },
    datasetSize: { patch: { training: { datasetSize: 96 } }, value: "96" },
    evalSize: { patch: { training: { evalSize: 32 } }, value: "32" },
    perDeviceTrainBatchSize: { patch: { training: { perDeviceTrainBatchSize: 4 } }, value: "4" },
    gradientAccumulationSteps: { patch: { training: { gradientAccumulationSteps: 1 } }, value: "1" },
    numGenerations: { patch: { training: { numGenerations: 2 } }, value: "2" },
    perDeviceEvalBatchSize: { patch: { training: { evalSize: 32, perDeviceEvalBatchSize: 4 } }, value: "4" },
    outputDir: { patch: {}, value: "/checkpoints/r1" },
    vllmMode: { patch: { training: { layout: "whitebox-server", gpusOnNode: 2 } }, value: "server" },
    vllmServerUrl: { patch: { training: { layout: "whitebox-server", gpusOnNode: 2 } }, value: "VLLM_URL" },
    trackioSpaceId: { patch: { training: { trackioSpaceId: "org/trackio" } }, value: "org/trackio" },
    trackioProject: { patch: { training: { trackioProject: "knobs" } }, value: "knobs" },
    pushToHub: { patch: { training: { hubRepoId: "org/model" } } },
    hubModelId: { patch: { training: { hubRepoId: "org/model" } }, value: "org/model" },
    maxSteps: { patch: { training: { maxSteps: 7 } }, value: "7" },
    vllmUrl: { patch: {}, value: "VLLM_URL" },
    sandboxVllmUrl: { patch: {}, value: "SANDBOX_VLLM_URL" },
    sandboxImage: { patch: { sandboxes: { image: "registry.test/agent-rl/opencode-sandbox:knobs" } }, value: "registry.test/agent-rl/opencode-sandbox:knobs" },
    maxInflight: { patch: { training: { maxInflight: 4 } }, value: "4" },
    nPrompts: { patch: { training: { datasetSize: 48 } }, value: "48" },
    maxCompletionLength: { patch: { training: { maxCompletionLength: 2048 } }, value: "2048" },
    optim: { patch: { training: { optim: "adamw_8bit" } }, value: "adamw_8bit" },
    gradientCheckpointing: { patch: { training: { gradientCheckpointing: true } } },
    learningRate: { patch: { training: { learningRate: 3e-6 } }, value: "0.000003" },
    warmupSteps: { patch: { training: { warmupSteps: 5 } }, value: "5" },
    temperature: { patch: { training: { temperature: 0.7 } }, value: "0.7" },
    lrSchedulerType: { patch: { training: { lrSchedulerType: "cosine" } }, value: "cosine" },
    numEpochs: { patch: { training: { numEpochs: 2 } }, value: "2" },
    seed: { patch: { training: { seed: 7 } }, value: "7" },
    maxStaleness: { patch: { training: { maxStaleness: 2 } }, value: "2" },
};

export type Render = (p: ProgramFacts, config: PlatformConfig, links: ProgramLinks) => string[];

/** What the platform's links would hand the renderer (names only: the walk checks flags, not URLs). */
export const WALK_LINKS: ProgramLinks = { outputDir: "/checkpoints/r1", vllmUrl: "VLLM_URL", envUrls: { only: "ENV_URL" }, sandboxVllmUrl: "SANDBOX_VLLM_URL" };

/** A sample word of a flag's type and choices (what extraArgs would carry after it). */
export function sampleValue(spec: ProgramFlag): string {
    if (spec.choices !== undefined) return spec.choices[spec.choices.length - 1];
    return spec.type === "int" ? "3" : spec.type === "float" ? "0.5" : "sample";
}

function parseFor(raw: unknown): { config?: PlatformConfig; problems: string[] } {
    let config: PlatformConfig | undefined;
    const problems = configProblems(() => {
        config = parseWithTestImages(raw, "test");
    });
    return { config, problems };
}

/** Every problem of the walk over `programs`, one line each ([] when every flag is reachable). */
export function factsWalkProblems(
    programs: Readonly<Record<string, ProgramFacts>>,
    sources: Readonly<Record<string, ArgSource | undefined>>,
    render: Render,
): string[] {
    const out: string[] = [];
    for (const [name, p] of Object.entries(programs)) {
        const base = { ...PROGRAM_BASES[name], runId: "r1", target: { kind: "kubernetes", context: "test" } };
        if (PROGRAM_BASES[name] === undefined) {
            out.push(`${name}: no stack in PROGRAM_BASES runs it: add one`);
            continue;
        }
        const mapped = new Set<string>();
        for (const [key, flag] of Object.entries(p.args as Record<string, string>)) {
            mapped.add(flag);
            const source = sources[key];
            if (source === undefined) {
                out.push(`${name}: ${flag} is mapped from '${key}', which no setting or platform value feeds (ARG_SOURCES): nothing can set it`);
                continue;
            }
            if ("setting" in source && schemaAt(platformSchema, source.setting.split(".")) === undefined) {
                out.push(`${name}: ${flag} is mapped from ${source.setting}, which is no field of the schema`);
                continue;
            }
            const sample = (SAMPLES as Record<string, { patch: Record<string, unknown>; value?: string } | undefined>)[key];
            if (sample === undefined) {
                out.push(`${name}: ${flag} ('${key}') has no sample setting in the walk (SAMPLES): add one`);
                continue;
            }
            const { config, problems } = parseFor(deepMerge(base, sample.patch));
            if (config === undefined) {
                // The program's layout may not allow the sample (vllmServerUrl on a colocate-only script): then it is not its flag to render.
                if (!("setting" in source) || !problems.some((l) => l.startsWith("training.layout:")))
                    out.push(`${name}: setting ${key}: ${problems.join("; ")}`);
                continue;
            }
            const args = render(p, config, WALK_LINKS);
            const at = args.indexOf(flag);
            if (at < 0) out.push(`${name}: ${"setting" in source ? `${source.setting} set` : key}, but ${flag} is not on its command line`);
            else if (sample.value !== undefined && args[at + 1] !== sample.value)
                out.push(`${name}: ${flag} renders '${args[at + 1]}', expected '${sample.value}'`);
        }
        for (const [flag, spec] of Object.entries(p.flags)) {
            if (mapped.has(flag)) continue;
            const extra = spec.action === "store_true" ? [flag] : [flag, sampleValue(spec)];
            const { config, problems } = parseFor(deepMerge(base, { training: { extraArgs: extra } }));
            if (config === undefined) {
                out.push(`${name}: ${flag} is not mapped, and training.extraArgs refuses it: ${problems.join("; ")}`);
                continue;
            }
            const args = render(p, config, WALK_LINKS);
            if (args.slice(-extra.length).join(" ") !== extra.join(" ")) out.push(`${name}: extraArgs ${extra.join(" ")} do not end its command line`);
        }
    }
    return out;
}
