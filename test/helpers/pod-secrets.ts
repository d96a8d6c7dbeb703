// Where a rendered pod spec reads a Secret from: an env var's secretKeyRef, or a Secret volume mounted at a dir.
// The node suites give the Secrets the plan redacts their test values by these (test/node-suites/ingress.ts,
// sandbox-claim.ts).
import { strict as assert } from "node:assert";

/** The Secret and key a pod's container reads `env` from (its secretKeyRef). */
export function secretRef(spec: any, env: string): { name: string; key: string } {
    const ref = spec.containers.flatMap((c: any) => c.env ?? []).find((e: any) => e.name === env)?.valueFrom?.secretKeyRef;
    assert.ok(typeof ref?.name === "string" && typeof ref?.key === "string", `${env} comes from a secretKeyRef: ${JSON.stringify(ref)}`);
    return { name: ref.name, key: ref.key };
}

/** The Secret (and its key) mounted as a file at `dir` in the pod spec: the verifier reads its admin key so. */
export function secretFileRef(spec: any, dir: string): { name: string; key: string } {
    const mount = spec.containers.flatMap((c: any) => c.volumeMounts ?? []).find((m: any) => m.mountPath === dir);
    const secret = (spec.volumes ?? []).find((v: any) => v.name === mount?.name)?.secret;
    assert.ok(mount?.readOnly === true && typeof secret?.secretName === "string", `${dir} is a read-only Secret volume: ${JSON.stringify(secret)}`);
    return { name: secret.secretName, key: secret.items[0].key };
}
