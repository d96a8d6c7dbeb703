/**
 * The NCCL weight-sync check script (gpu/nccl_check.py, torch only) as text, for the
 * Kubernetes ConfigMap / Docker upload that puts it at NCCL_CHECK_PATH in the training pod.
 * Users can run the same file by hand: see docs/design/gpu-sharing.md.
 */
import * as fs from "node:fs";
import * as path from "node:path";

/** Path of the check script in this package. */
export const NCCL_CHECK_SCRIPT = path.join(__dirname, "gpu", "nccl_check.py");

/** The check script's source text. */
export function ncclCheckSource(): string {
    return fs.readFileSync(NCCL_CHECK_SCRIPT, "utf8");
}
