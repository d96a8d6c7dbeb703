/**
 * GPU memory by product: the `nvidia.com/gpu.product` label GPU feature discovery puts on a node
 * (the product name with spaces as dashes), to the memory one GPU offers a process. Pure data.
 */

/** nvidia-smi's memory.total in MiB, per product label (NVIDIA's datasheets; the H200 as read on the lent one). */
export const GPU_PRODUCT_MIB: Readonly<Record<string, number>> = {
    "NVIDIA-H200": 143771,
    "NVIDIA-H100-80GB-HBM3": 81559,
    "NVIDIA-H100-NVL": 95830,
    "NVIDIA-A100-SXM4-80GB": 81920,
    "NVIDIA-A100-80GB-PCIe": 81920,
    "NVIDIA-A100-SXM4-40GB": 40960,
    "NVIDIA-L40S": 46068,
    "NVIDIA-A10G": 23028,
    "NVIDIA-L4": 23034,
};

/**
 * What the driver keeps of memory.total: on the lent H200, NVML's total 140.40 GiB, torch's
 * total_memory 139.80 GiB (bench/gpu/results/memory-calibration.jsonl).
 */
export const DRIVER_RESERVED_GIB = 0.6;

/** Usable GiB of one GPU from nvidia-smi's MiB. */
export function usableGiB(mib: number): number {
    return mib / 1024 - DRIVER_RESERVED_GIB;
}

/** A product label as nvidia-smi names it ("NVIDIA H200") or as the node label has it ("NVIDIA-H200"). */
export function productLabel(name: string): string {
    return name.trim().replace(/\s+/g, "-");
}

/** Usable GiB of one GPU of a product, or undefined for a product the table lacks. */
export function productGiB(product: string): number | undefined {
    const mib = GPU_PRODUCT_MIB[productLabel(product)];
    return mib === undefined ? undefined : usableGiB(mib);
}
