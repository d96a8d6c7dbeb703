/**
 * Pulumi secrets in recorded mock inputs. The mock monitor hands `newResource` a secret input
 * as `{ [specialSigKey]: specialSecretSig, value }` (@pulumi/pulumi runtime/rpc.ts), so tests
 * can check that a value was sent as a secret, and unwrap it to assert on what it holds
 * (isSecret and unwrapSecrets are the mock runtime's, which the offline plan uses too).
 */
import { isSecret } from "../../scripts/lib/mockrun";

export { isSecret, unwrapSecrets } from "../../scripts/lib/mockrun";

/** Whether the value at `path` in `inputs` (or any object on the way to it) was sent as a secret. */
export function sentAsSecret(inputs: unknown, path: ReadonlyArray<string | number>): boolean {
    let v: any = inputs;
    for (const p of path) {
        if (isSecret(v)) return true;
        v = v?.[p];
    }
    return isSecret(v);
}
