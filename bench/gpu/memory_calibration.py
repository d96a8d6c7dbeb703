#!/usr/bin/env python3
"""GPU memory calibration of the trainer's memory model (components/training/memory, issue 47).

For each shape: a model built from its config facts with random weights (no download: the facts are
the upstream config.json values, the same table as components/training/memory/models.ts), full
fine-tune, gradient checkpointing as the shape says, two optimizer steps, measured three ways:
torch's peak allocated, torch's peak reserved, and the device's peak used (NVML, sampled every 10 ms
by a thread: the CUDA context, cuBLAS workspaces and bitsandbytes' paged (managed) optimizer state
included, which torch's counters do not see).

Mode `trl` runs TRL's real GRPOTrainer step: GRPOTrainer (use_vllm=False) built around the model, its
`_prepare_inputs` replaced by the identity so the batch is the completions generation would have
produced (random token ids, prompt + completion, all-ones masks, random advantages), then
`trainer.training_step` (TRL's `_compute_loss` with its fused lm_head log-probs, accelerate's backward)
and the optimizer transformers builds from `--optim` (`trainer.create_optimizer()`), stepped twice.
Mode `plain` (the fallback where TRL does not import) does the same with a plain HF forward,
logits for the completion tokens only, log_softmax and a policy-gradient loss.

Each shape runs in its own process (fresh CUDA context, clean peaks). Usage:
    python3 memory_calibration.py --out DIR [--shapes a,b,...] [--deadline-s 540]
Writes DIR/calibration.jsonl, one JSON object per shape.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time
import traceback

# Upstream config.json facts (huggingface.co/<model>/blob/main/config.json).
MODELS = {
    "Qwen/Qwen3-1.7B": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                            num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True),
    "Qwen/Qwen3-8B": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                          num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=False),
    "Qwen/Qwen3-4B-Instruct-2507": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                                        num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True),
    # A stand-in for a smoke test of this script, not a model anyone trains.
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=512, tie_word_embeddings=True),
}

M17, M8, M4 = "Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B", "Qwen/Qwen3-4B-Instruct-2507"
# name: (model, dtype, optim, batch, prompt tokens, completion tokens, gradient checkpointing)
SHAPES = {
    "tiny": ("tiny", "bfloat16", "adamw_torch", 2, 16, 16, True),
    "wb-1.7b-bf16-adamw-8x2048": (M17, "bfloat16", "adamw_torch", 8, 1024, 1024, True),
    "1.7b-bf16-adamw-8x4096": (M17, "bfloat16", "adamw_torch", 8, 1024, 3072, True),
    "1.7b-fp32-adamw-8x4096": (M17, "float32", "adamw_torch", 8, 1024, 3072, True),
    "bb-8b-fp32-paged8bit-4x4608": (M8, "float32", "paged_adamw_8bit", 4, 512, 4096, True),
    "8b-bf16-paged8bit-4x4608": (M8, "bfloat16", "paged_adamw_8bit", 4, 512, 4096, True),
    "8b-fp32-paged8bit-1x4608": (M8, "float32", "paged_adamw_8bit", 1, 512, 4096, True),
    "8b-fp32-adamw-1x4096": (M8, "float32", "adamw_torch", 1, 512, 3584, True),
    "1.7b-bf16-adamw-4x2048-nogc": (M17, "bfloat16", "adamw_torch", 4, 1024, 1024, False),
    "1.7b-bf16-fused-8x2048": (M17, "bfloat16", "adamw_torch_fused", 8, 1024, 1024, True),
    "8b-bf16-adamw-2x4608": (M8, "bfloat16", "adamw_torch", 2, 512, 4096, True),
    "4b-bf16-paged8bit-4x8192": (M4, "bfloat16", "paged_adamw_8bit", 4, 512, 7680, True),
    # Held out: measured after the constants were fitted, to check the model's prediction.
    "ho-1.7b-fp32-paged8bit-4x2048": (M17, "float32", "paged_adamw_8bit", 4, 1024, 1024, True),
    "ho-8b-bf16-paged8bit-8x4608": (M8, "bfloat16", "paged_adamw_8bit", 8, 512, 4096, True),
    "ho-4b-fp32-fused-2x4096": (M4, "float32", "adamw_torch_fused", 2, 512, 3584, True),
    "ho-1.7b-bf16-fused-2x16384": (M17, "bfloat16", "adamw_torch_fused", 2, 1024, 15360, True),
    "ho-8b-bf16-fused-1x2048-nogc": (M8, "bfloat16", "adamw_torch_fused", 1, 512, 1536, False),
}

GIB = 1024 ** 3


class NvmlPeak:
    """The device's used memory, sampled every 10 ms on a thread; peak and first reading."""

    def __init__(self):
        self._nvml = None
        try:
            import pynvml
            pynvml.nvmlInit()
            idx = int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0])
            self._h = pynvml.nvmlDeviceGetHandleByIndex(idx)
            self._nvml = pynvml
            self.source = "nvml"
        except Exception:  # noqa: BLE001  (no NVML: cudaMemGetInfo, the same figure)
            self.source = "cudaMemGetInfo"
        self.peak = 0
        self.total = self._total()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _total(self):
        if self._nvml is not None:
            return self._nvml.nvmlDeviceGetMemoryInfo(self._h).total
        import torch
        return torch.cuda.mem_get_info()[1]

    def used(self):
        if self._nvml is not None:
            return self._nvml.nvmlDeviceGetMemoryInfo(self._h).used
        import torch
        free, total = torch.cuda.mem_get_info()
        return total - free

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.used())
            time.sleep(0.01)

    def start(self):
        self._t.start()

    def stop(self):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.used())


def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    tk = Tokenizer(models.WordLevel({"<pad>": 0, "<eos>": 1, "<unk>": 2, "hi": 3}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    return tok


def zero_reward(completions, **kwargs):
    return [0.0] * len(completions)


def batch(torch, vocab, b, p, c, dev):
    g = torch.Generator(device=dev)
    return {
        "prompt_ids": torch.randint(3, vocab, (b, p), device=dev, generator=g),
        "prompt_mask": torch.ones(b, p, dtype=torch.long, device=dev),
        "completion_ids": torch.randint(3, vocab, (b, c), device=dev, generator=g),
        "completion_mask": torch.ones(b, c, dtype=torch.long, device=dev),
        "advantages": torch.randn(b, device=dev, generator=g),
        "old_per_token_logps": None,
        "num_items_in_batch": torch.tensor(float(b * c), device=dev),
    }


def run_one(name, result):
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config
    model_name, dtype_name, optim, b, p, c, gc = SHAPES[name]
    dtype = getattr(torch, dtype_name)
    result.update(model=model_name, dtype=dtype_name, optim=optim, batch=b, prompt=p, completion=c, gradient_checkpointing=gc)
    torch.backends.cuda.matmul.allow_tf32 = True  # speed only: the same tensors, the same memory
    torch.backends.cudnn.allow_tf32 = True
    dev = torch.device("cuda")
    torch.cuda.init()
    torch.zeros(1, device=dev)
    nv = NvmlPeak()
    result["device_total_gib"] = nv.total / GIB
    result["device_memory_source"] = nv.source
    result["torch_total_gib"] = torch.cuda.get_device_properties(0).total_memory / GIB
    result["context_used_gib"] = nv.used() / GIB
    nv.start()
    t0 = time.time()
    cfg = Qwen3Config(**MODELS[model_name], max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                      use_cache=False)
    with torch.device(dev):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.to(dev)
    result["parameters"] = sum(t.numel() for t in model.parameters())
    result["weights_gib"] = torch.cuda.memory_allocated() / GIB
    result["init_s"] = round(time.time() - t0, 1)
    mode = "trl"
    try:
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer
    except Exception as e:  # noqa: BLE001
        mode = "plain"
        result["trl_import_error"] = repr(e)[:300]
    result["mode"] = mode
    ga = 1 if b % 2 == 0 else 2
    if mode == "trl":
        import trl
        import transformers
        result["versions"] = dict(torch=torch.__version__, transformers=transformers.__version__, trl=trl.__version__)
        args = GRPOConfig(output_dir="/tmp/calib-out", per_device_train_batch_size=b, gradient_accumulation_steps=ga,
                          num_generations=2, max_completion_length=c, bf16=False, fp16=False, report_to="none",
                          use_vllm=False, gradient_checkpointing=gc, optim=optim, learning_rate=1e-6, logging_steps=1,
                          save_strategy="no")
        trainer = GRPOTrainer(model=model, reward_funcs=[zero_reward], args=args,
                              train_dataset=Dataset.from_dict({"prompt": ["hi"] * 8}), processing_class=tokenizer())
        trainer._prepare_inputs = lambda inputs: inputs  # the batch is what generation would have returned
        trainer.current_gradient_accumulation_steps = ga
        model = trainer.model
        if gc:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs or {"use_reentrant": False})
        trainer.create_optimizer()
        opt = trainer.optimizer
        result["loss_type"] = getattr(trainer, "loss_type", None)
        result["optimizer_class"] = type(opt).__name__

        def step(inputs):
            trainer.training_step(model, inputs, inputs["num_items_in_batch"])
    else:
        import transformers
        result["versions"] = dict(torch=torch.__version__, transformers=transformers.__version__)
        if gc:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        from transformers import Trainer, TrainingArguments
        targs = TrainingArguments(output_dir="/tmp/calib-out", optim=optim, learning_rate=1e-6, report_to="none", bf16=False)
        opt_cls, opt_kwargs = Trainer.get_optimizer_cls_and_kwargs(targs, model)
        opt = opt_cls([q for q in model.parameters() if q.requires_grad], **opt_kwargs)
        result["optimizer_class"] = type(opt).__name__

        def step(inputs):
            model.train()
            ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
            mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
            logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=c + 1).logits[:, :-1, :]
            logps = torch.gather(logits.float().log_softmax(-1), 2, inputs["completion_ids"].unsqueeze(-1)).squeeze(-1)
            loss = -(logps * inputs["advantages"].unsqueeze(1)).mean()
            loss.backward()

    torch.cuda.reset_peak_memory_stats()
    steps = []
    for i in range(2):
        ts = time.time()
        for _ in range(ga):
            step(batch(torch, MODELS[model_name]["vocab_size"], b, p, c, dev))
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        steps.append(dict(step=i + 1, seconds=round(time.time() - ts, 1),
                          allocated_gib=torch.cuda.memory_allocated() / GIB,
                          peak_allocated_gib=torch.cuda.max_memory_allocated() / GIB,
                          peak_reserved_gib=torch.cuda.max_memory_reserved() / GIB,
                          device_used_gib=nv.used() / GIB))
    nv.stop()
    result["steps"] = steps
    result["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / GIB
    result["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / GIB
    result["peak_device_gib"] = nv.peak / GIB
    result["end_reserved_gib"] = torch.cuda.memory_reserved() / GIB
    result["end_device_gib"] = nv.used() / GIB
    result["status"] = "ok"


def child(name, out):
    result = {"shape": name}
    try:
        run_one(name, result)
    except Exception as e:  # noqa: BLE001
        result["status"] = "oom" if "out of memory" in repr(e).lower() else "error"
        result["error"] = repr(e)[:600]
        result["traceback"] = traceback.format_exc()[-3000:]
        try:
            import torch
            result["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / GIB
            result["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / GIB
        except Exception:  # noqa: BLE001
            pass
    line = json.dumps(result)
    print(line, flush=True)
    with open(os.path.join(out, "calibration.jsonl"), "a") as f:
        f.write(line + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default=",".join(s for s in SHAPES if s != "tiny"))
    ap.add_argument("--deadline-s", type=float, default=540)
    ap.add_argument("--child", default=None)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.child:
        child(a.child, a.out)
        return
    start = time.time()
    for name in a.shapes.split(","):
        if name not in SHAPES:
            sys.exit(f"unknown shape {name}; known: {', '.join(SHAPES)}")
    for name in a.shapes.split(","):
        left = a.deadline_s - (time.time() - start)
        if left < 30:
            print(json.dumps({"shape": name, "status": "skipped", "why": "deadline"}), flush=True)
            continue
        t = time.time()
        try:
            subprocess.run([sys.executable, __file__, "--out", a.out, "--child", name], timeout=left, check=False)
        except subprocess.TimeoutExpired:
            print(json.dumps({"shape": name, "status": "timeout", "seconds": round(time.time() - t)}), flush=True)
        print(f"# {name}: {time.time() - t:.0f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
