/**
 * Writes the NCCL/CUDA env the TrainingNode renders for vLLM and the trainer, per server layout
 * x target x gpuSharing, as shell env files (bench/gpu/rendered/<case>.{vllm,trainer}.env) plus
 * a cases list, so bench/gpu/nccl-rendered.sh runs the NCCL check with exactly those settings.
 * Run: npx tsx bench/gpu/render-env.ts
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { parsePlatformConfig, platformNames } from "../../components/config";
import { resolveTrainingNode } from "../../components/training";

const out = path.join(__dirname, "rendered");
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });
const cases: string[] = [];
const pick = (env: Readonly<Record<string, string>>) =>
    Object.entries(env)
        .filter(([k]) => k.startsWith("NCCL_") || k.startsWith("CUDA_"))
        .map(([k, v]) => `${k}=${v}\n`)
        .join("");
for (const layout of ["whitebox-server", "blackbox"] as const) {
    for (const target of ["kubernetes", "docker"] as const) {
        for (const gpuSharing of ["shared", "isolated"] as const) {
            const raw =
                layout === "blackbox"
                    ? {
                          recipe: "opencode-blackbox",
                          runId: "r1",
                          target: target === "kubernetes" ? { kind: target, context: "bench" } : { kind: target },
                          training: { gpuSharing },
                      }
                    : {
                          runId: "r1",
                          model: { name: "Qwen/Qwen3-1.7B" },
                          target: target === "kubernetes" ? { kind: target, context: "bench" } : { kind: target },
                          training: { layout, gpusOnNode: 2, datasetSize: 10, numGenerations: 8, command: ["python", "/app/t.py"], gpuSharing },
                      };
            const config = parsePlatformConfig(raw, "bench");
            const names = platformNames(config);
            const links =
                layout === "blackbox"
                    ? { envUrls: {}, sandbox: { url: names.ingress.sandboxUrl, provider: config.sandboxes.provider, trainerEnv: {} } }
                    : { envUrls: {} };
            const d = resolveTrainingNode(config, names, links);
            const name = `${layout}-${target}-${gpuSharing}`;
            // How each role's process sees the GPUs: one-container (K8s shared: both ranks from one
            // process tree), shared-devices (Docker shared: every GPU, CUDA_VISIBLE_DEVICES), own-device.
            const shape = d.gpuSharing.oneContainer ? "one-container" : gpuSharing === "shared" ? "shared-devices" : "own-device";
            fs.writeFileSync(path.join(out, `${name}.vllm.env`), pick(d.vllm!.env));
            fs.writeFileSync(path.join(out, `${name}.trainer.env`), pick(d.trainer.env));
            cases.push(`${name} ${shape}`);
        }
    }
}
fs.writeFileSync(path.join(out, "cases.txt"), `${cases.join("\n")}\n`);
console.log(cases.join("\n"));
