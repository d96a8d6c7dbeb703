/**
 * Kubernetes quantities ("500m", "4Gi", "1.5") as numbers, and the units the Docker provider
 * wants. One parser for every component (config validation already checked the shape).
 */
const QUANTITY = /^([0-9]+)(?:\.([0-9]+))?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/;
const FACTOR: Readonly<Record<string, number>> = { "": 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4 };

/** Value of a quantity as a number: bytes for memory ("4Gi"), cores for CPU ("500m" -> 0.5). */
export function quantityValue(q: string): number {
    const m = QUANTITY.exec(q);
    if (m === null) throw new Error(`'${q}' is not a Kubernetes quantity`);
    return Number(`${m[1]}.${m[2] ?? "0"}`) * (FACTOR[m[3] ?? ""] ?? 1);
}

/** `q` x `n` for a Kubernetes quantity, exactly (no float rounding): "500m" x 3 = "1500m", "1.5Gi" x 3 = "4.5Gi". */
export function multiplyQuantity(q: string, n: number): string {
    const m = QUANTITY.exec(q);
    if (m === null || !Number.isInteger(n) || n < 0) throw new Error(`cannot multiply quantity '${q}' by ${n}`);
    const [, whole, frac = "", suffix = ""] = m;
    const scaled = BigInt(`${whole}${frac}`) * BigInt(n);
    const digits = scaled.toString().padStart(frac.length + 1, "0");
    const intPart = digits.slice(0, digits.length - frac.length);
    const fracPart = digits.slice(digits.length - frac.length).replace(/0+$/, "");
    return `${intPart}${fracPart ? `.${fracPart}` : ""}${suffix}`;
}

/** Docker's `memory` (MiB, rounded up) from a memory quantity ("4Gi" -> 4096). */
export function dockerMemoryMiB(q: string): number {
    return Math.ceil(quantityValue(q) / 1024 ** 2);
}

/** Docker's decimal CPU count from a CPU quantity ("500m" -> "0.5", "2" -> "2"). */
export function dockerCpus(q: string): string {
    return String(quantityValue(q));
}

const BINARY = /(Ki|Mi|Gi|Ti)$/;

/**
 * `a` + `b` for two quantities of one kind (CPU or memory), as a quantity: "8" + "8" = "16",
 * "500m" + "1" = "1500m", "64Gi" + "64Gi" = "128Gi", "512Mi" + "1Gi" = "1536Mi".
 */
export function addQuantities(a: string, b: string): string {
    const sum = quantityValue(a) + quantityValue(b);
    if (BINARY.test(a) || BINARY.test(b)) {
        for (const [suffix, f] of [
            ["Ti", 1024 ** 4],
            ["Gi", 1024 ** 3],
            ["Mi", 1024 ** 2],
            ["Ki", 1024],
        ] as const) {
            if (sum % f === 0) return `${sum / f}${suffix}`;
        }
        return String(Math.ceil(sum));
    }
    if (Number.isInteger(sum)) return String(sum);
    return `${Math.round(sum * 1000)}m`;
}
