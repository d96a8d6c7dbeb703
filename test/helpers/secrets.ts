/**
 * Pulumi secrets in recorded mock inputs. The mock monitor hands `newResource` a secret input
 * as `{ [specialSigKey]: specialSecretSig, value }` (@pulumi/pulumi runtime/rpc.ts), so tests
 * can check that a value was sent as a secret, and unwrap it to assert on what it holds.
 */
import * as pulumi from "@pulumi/pulumi";

/** Whether a recorded input value is a Pulumi secret (as the mock monitor serialises it). */
export function isSecret(v: unknown): v is { value: unknown } {
    return v !== null && typeof v === "object" && (v as Record<string, unknown>)[pulumi.runtime.specialSigKey] === pulumi.runtime.specialSecretSig;
}

/** A recorded input with every secret wrapper replaced by its value (what the provider receives). */
export function unwrapSecrets(v: any): any {
    if (isSecret(v)) return unwrapSecrets(v.value);
    if (Array.isArray(v)) return v.map(unwrapSecrets);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unwrapSecrets(x)]));
    return v;
}

/** Whether the value at `path` in `inputs` (or any object on the way to it) was sent as a secret. */
export function sentAsSecret(inputs: unknown, path: ReadonlyArray<string | number>): boolean {
    let v: any = inputs;
    for (const p of path) {
        if (isSecret(v)) return true;
        v = v?.[p];
    }
    return isSecret(v);
}
