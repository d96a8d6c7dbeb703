/**
 * Which checkpoint a run resumes from, decided in the trainer's container at start (the volume's
 * contents are only known there), by one small Python program that the resume wrapper and the
 * `npm run checkpoints` listing both run, so "complete" means one thing.
 *
 * Complete: `trainer_state.json` is present (transformers 5.24 `Trainer._save_checkpoint` writes it
 * after the weights, the optimizer, the scheduler and the RNG state) and the weights are whole: every
 * shard a `*.index.json` lists is present, else a single weights file, else an FSDP sharded state
 * (`pytorch_model_fsdp_*` with torch.distributed.checkpoint's `.metadata`, which it writes last).
 * Checkpoints are ordered by their step number, never by mtime (a crash's half-written one is the
 * newest by mtime).
 */
/** The selection program (python -c). argv: `resume <root> <runId> <source|''> -- <command...>` or `list <root>`. */
export const CHECKPOINT_SELECT_PY = String.raw`import json, os, re, sys
WEIGHTS = ("model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", "adapter_model.bin")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json", "adapter_model.safetensors.index.json")
def incomplete(d):
    if not os.path.isfile(os.path.join(d, "trainer_state.json")):
        return "no trainer_state.json (written last)"
    for idx in INDEXES:
        f = os.path.join(d, idx)
        if os.path.isfile(f):
            try:
                shards = sorted(set(json.load(open(f))["weight_map"].values()))
            except Exception as e:
                return "unreadable %s (%s)" % (idx, e)
            missing = [s for s in shards if not os.path.isfile(os.path.join(d, s))]
            return ("missing %s of %s" % (", ".join(missing), idx)) if missing else None
    if any(os.path.isfile(os.path.join(d, w)) for w in WEIGHTS):
        return None
    if any(e.startswith("pytorch_model_fsdp_") and os.path.isfile(os.path.join(d, e, ".metadata")) for e in os.listdir(d)):
        return None
    return "no model weights"
def steps(run_dir):
    found = []
    if os.path.isdir(run_dir):
        for e in os.listdir(run_dir):
            m = re.fullmatch(r"checkpoint-([0-9]+)", e)
            if m and os.path.isdir(os.path.join(run_dir, e)):
                found.append((int(m.group(1)), os.path.join(run_dir, e)))
    return sorted(found, reverse=True)
def latest(run_dir):
    for _, d in steps(run_dir):
        why = incomplete(d)
        if why is None:
            return d
        print("resume: skipping %s: %s" % (d, why), file=sys.stderr)
    return None
mode, root = sys.argv[1], sys.argv[2]
if mode == "list":
    for run in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        for step, d in steps(os.path.join(root, run)):
            why = incomplete(d)
            print("%s/checkpoint-%d\t%s" % (run, step, "complete" if why is None else "incomplete: " + why))
    sys.exit(0)
run, source, cmd = sys.argv[3], sys.argv[4], sys.argv[6:]
chosen = latest(os.path.join(root, run))
if chosen is None and source:
    d = os.path.join(root, source)
    if "/" in source:
        why = incomplete(d) if os.path.isdir(d) else "not found"
        if why is not None:
            sys.exit("resume: %s cannot be resumed: %s (npm run checkpoints lists the complete ones)" % (d, why))
        chosen = d
    else:
        chosen = latest(d)
        if chosen is None:
            sys.exit("resume: run %s has no complete checkpoint under %s (npm run checkpoints lists them)" % (source, root))
if chosen is None:
    print("resume: no complete checkpoint of run %s under %s: starting from the base model" % (run, root), flush=True)
    os.execvp(cmd[0], cmd)
print("resume: from %s" % chosen, flush=True)
os.execvp(cmd[0], cmd + ["--resume_from_checkpoint", chosen])
`;

/**
 * The trainer command that resumes: this run's latest complete checkpoint, else the named source
 * (a run id or `<runId>/checkpoint-<step>`; missing or incomplete: the pod fails with the reason), else
 * (no source) the base model. Never another run's checkpoint unless the config names it.
 */
export function resumeCommand(runId: string, source: string | undefined, command: readonly string[], root: string): string[] {
    return ["python", "-c", CHECKPOINT_SELECT_PY, "resume", root, runId, source ?? "", "--", ...command];
}

/** The listing command (run where the volume is mounted): one line per checkpoint, complete or why not. */
export function listCheckpointsCommand(root: string): string[] {
    return ["python", "-c", CHECKPOINT_SELECT_PY, "list", root];
}
