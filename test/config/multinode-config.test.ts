/**
 * Multi-node training at the config edge (issue 18): training.nodes, the per-node GPU checks, the
 * batch arithmetic over every node's processes, the Docker refusal, target.kueueQueue, and the
 * trainer's command line; every message, each on its own.
 * Run: node --import tsx --test test/config/multinode-config.test.ts
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DOCKER_BLACKBOX_REFUSED, deepMerge, MULTI_NODE_RECIPE_NAMES, platformNames, RECIPE_NAMES } from "../../components/config";
import { resolveTrainingNode } from "../../components/training";
import { configProblems, parseWithTestImages as parsePlatformConfig } from "../helpers/config";

const K8S = { kind: "kubernetes", context: "test" } as const;
const base = { recipe: "opencode-blackbox-32b", runId: "r1", target: K8S };
const serverBase = {
    runId: "r1",
    target: K8S,
    model: { name: "Qwen/Qwen3-32B" },
    training: {
        layout: "whitebox-server",
        nodes: 2,
        gpusOnNode: 8,
        perDeviceTrainBatchSize: 2,
        gradientAccumulationSteps: 2,
        numGenerations: 8,
        datasetSize: 170,
        // Your own script (TrlParser flags): the seeds' scripts are one-GPU programs.
        program: "custom",
        command: ["python", "/app/train_grpo.py"],
        // A custom script is counted in fp32 + AdamW: 32.8B parameters need 1467Gi for one run (components/config/checkpoints.ts).
        checkpoints: { size: "1500Gi" },
    },
    envs: { coding: { catalog: "coding" } },
};

const problems = (raw: unknown): string[] => configProblems(() => parsePlatformConfig(raw, "test"));

/** Problems of the config plus the training node's own resolve step (where the command is checked). */
function resolveProblems(raw: unknown): string[] {
    const found = problems(raw);
    if (found.length > 0) return found;
    const c = parsePlatformConfig(raw, "test");
    const names = platformNames(c);
    return configProblems(() => resolveTrainingNode(c, names, { envUrls: {}, sandbox: { url: names.ingress.sandboxUrl, trainerEnv: {} } }));
}

const over = (override: Record<string, unknown>, from: Record<string, unknown> = base) => deepMerge(from, override);

describe("multi-node config: the recipe and its defaults", () => {
    test("the multi-node recipes are kept out of RECIPE_NAMES (recipes for both targets)", () => {
        assert.deepEqual(MULTI_NODE_RECIPE_NAMES, ["opencode-blackbox-32b"]);
        for (const r of MULTI_NODE_RECIPE_NAMES) assert.equal(RECIPE_NAMES.includes(r), false);
    });

    test("opencode-blackbox-32b: 2 trainer nodes x 8 GPUs, vLLM on a node of 8, 16 processes, 256 rows per step (TRL's script fixes 4 per device)", () => {
        const c = parsePlatformConfig(base, "test");
        assert.equal(c.training.nodes, 2);
        assert.equal(c.training.trainerGpus, 8);
        assert.equal(c.training.vllmGpus, 8);
        assert.equal(c.training.numProcesses, 8, "processes per node");
        assert.equal(c.training.gpuSharing, "network");
        assert.equal(c.demand.generationBatch, 4 * 8 * 2 * 4);
        assert.equal(c.demand.promptsPerGeneration, 32);
    });

    test("nodes > 1 defaults every role to a whole node: trainerGpus = vllmGpus = gpusOnNode", () => {
        const c = parsePlatformConfig(serverBase, "test");
        assert.equal(c.training.trainerGpus, 8);
        assert.equal(c.training.vllmGpus, 8);
        assert.equal(c.demand.generationBatch, 2 * 8 * 2 * 2);
    });

    test("nodes defaults to 1 and leaves one-node configs as they were", () => {
        const c = parsePlatformConfig({ recipe: "opencode-blackbox", runId: "r1", target: K8S }, "test");
        assert.equal(c.training.nodes, 1);
        assert.equal(c.training.gpuSharing, "shared");
        assert.equal(c.demand.generationBatch, 4);
    });

    test("target.kueueQueue is a Kubernetes field", () => {
        assert.equal(parsePlatformConfig(over({ target: { kueueQueue: "team-a" } }), "test").target.kind, "kubernetes");
        // The rest of the file is still checked: the Docker black box's default pool is refused beside the unknown field.
        assert.deepEqual(problems({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "docker", kueueQueue: "team-a" } }), [
            "target.kueueQueue: a kubernetes target's field, not docker's: remove it, or set target.kind: kubernetes",
            DOCKER_BLACKBOX_REFUSED,
        ]);
        assert.deepEqual(problems(over({ target: { kueueQueue: "Team A" } })), [
            "target.kueueQueue: must be lower-case letters, digits and '-', starting and ending with a letter or digit",
        ]);
    });
});

describe("multi-node config: every message", () => {
    const cases: Array<{ what: string; raw: unknown; expect: string[]; resolve?: boolean }> = [
        {
            what: "docker refuses more than one node",
            // A white box, so the nodes message comes alone (a black box on Docker gets its provider's refusal beside it).
            raw: { ...serverBase, target: { kind: "docker" } },
            expect: [
                "training.nodes: the docker target is one GPU host, so the trainer cannot span 2 nodes: set nodes to 1 and fit the run on the host's 8 GPUs (training.gpusOnNode), or use target.kind kubernetes, where nodes > 1 runs the trainer as a JobSet (one pod per node) and vLLM on a node of its own",
            ],
        },
        {
            what: "colocate cannot span nodes",
            raw: over({ training: { layout: "whitebox-colocate", vllmGpus: 0 } }, serverBase),
            expect: [
                "training.nodes: the whitebox-colocate layout runs vLLM inside the trainer on one node (got nodes 2): set nodes to 1, or use layout whitebox-server or blackbox, where vLLM runs on a node of its own and the trainer spans the nodes",
            ],
        },
        {
            what: "trainer GPUs beyond a node",
            raw: over({ training: { trainerGpus: 16 } }),
            expect: [
                "training.trainerGpus: each of the 2 trainer nodes runs 16 trainer GPUs, but a node has 8 (training.gpusOnNode): lower trainerGpus to 8, or raise gpusOnNode",
            ],
        },
        {
            what: "vLLM GPUs beyond a node",
            raw: over({ training: { vllmGpus: 16 } }),
            expect: [
                "training.vllmGpus: vLLM runs on one node of its own (tensor parallel over its GPUs), but 16 GPUs do not fit a node of 8 (training.gpusOnNode): lower vllmGpus to at most 8",
            ],
        },
        {
            what: "gpuSharing has nothing to share across nodes",
            raw: over({ training: { gpuSharing: "shared" } }),
            expect: [
                "training.gpuSharing: with nodes 2 vLLM runs on a node of its own, so the roles share no GPUs and the weight update crosses the network: remove gpuSharing",
            ],
        },
        {
            what: "the one-node NCCL check",
            raw: over({ training: { ncclCheck: true } }),
            expect: [
                "training.ncclCheck: the check runs both roles on one node; with nodes 2 vLLM and the trainer are on different nodes: remove ncclCheck (run nccl-tests between two GPU nodes to check the network instead)",
            ],
        },
        {
            what: "more processes per node than trainer GPUs",
            raw: over({ training: { numProcesses: 9 } }),
            expect: [
                "training.numProcesses: 9 trainer processes per node need one GPU each, but trainerGpus is 8: lower numProcesses to 8 or raise trainerGpus",
            ],
        },
        {
            what: "generation batch over every node's processes",
            // GRPOConfig's rule (white box); AsyncGRPO has none.
            raw: over({ training: { numGenerations: 5 } }, serverBase),
            expect: [
                "training.numGenerations: the generation batch perDeviceTrainBatchSize 2 x numProcesses 8 x nodes 2 x stepsPerGeneration 2 = 64 is not divisible by numGenerations 5: set numGenerations to one of 2, 4, 8, 16, 32, 64, or make the generation batch a multiple of 5",
            ],
        },
        {
            what: "eval batch over every node's processes",
            raw: over({ training: { numGenerations: 32, evalSize: 16, perDeviceEvalBatchSize: 1 } }, serverBase),
            expect: [
                "training.perDeviceEvalBatchSize: the eval batch perDeviceEvalBatchSize 1 x numProcesses 8 x nodes 2 = 16 is not divisible by numGenerations 32: set perDeviceEvalBatchSize to a multiple of 2",
            ],
        },
        {
            what: "a command accelerate cannot launch across nodes",
            raw: over({ training: { command: ["/app/train.sh"] } }, serverBase),
            resolve: true,
            expect: ["training.command: 16 trainer processes need 'accelerate launch <script>' (or 'python <script>', turned into it), got '/app/train.sh'"],
        },
        {
            what: "rank flags the platform sets",
            raw: over({ training: { command: ["accelerate", "launch", "--machine_rank", "0", "--main_process_port", "1234", "/app/x.py"] } }, serverBase),
            resolve: true,
            expect: [
                "training.command: --machine_rank, --main_process_port are set by the platform from JobSet's labels when training.nodes > 1: remove them from the command",
            ],
        },
        {
            what: "rank env vars the platform sets",
            raw: over({ training: { extraEnv: { MACHINE_RANK: "0", MAIN_PROCESS_IP: "x" } } }),
            resolve: true,
            expect: [
                "training.extraEnv.MACHINE_RANK: MACHINE_RANK is set by the platform (from the run's config and links): remove it from extraEnv",
                "training.extraEnv.MAIN_PROCESS_IP: MAIN_PROCESS_IP is set by the platform (from the run's config and links): remove it from extraEnv",
            ],
        },
    ];
    for (const c of cases) {
        test(c.what, () => {
            assert.deepEqual(c.resolve ? resolveProblems(c.raw) : problems(c.raw), c.expect);
        });
    }
});
