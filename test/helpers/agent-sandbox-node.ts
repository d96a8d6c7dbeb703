/**
 * agent-sandbox on the node fixture, shared by test/node-suites/sandbox-claim.ts and the real-pod claim bench
 * (bench/claim-latency-node.ts).
 */
import { scaled } from "./waits";
import type { Node } from "./node";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A cluster has agent-sandbox installed before a run stack comes (the cluster stack, the preflight): its quota
 * controller already counts claims, so the pool's ResourceQuota is counted when it is made. On the node the CRDs
 * are minutes old; the quota controller picks a new resource up at its discovery resync, and a quota made before
 * that stays uncounted until its full resync (5 min by default), every claim refused meanwhile (403 "status
 * unknown for quota", measured: still uncounted 174 s after). So: a probe quota counting claims, made anew until
 * the controller counts it. Returns the seconds that took; throws after 150 s (scaled).
 */
export async function waitForClaimQuotaMonitor(node: Node): Promise<number> {
    const ns = "claim-quota-probe";
    await node.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    const key = "count/sandboxclaims.extensions.agents.x-k8s.io";
    const t0 = Date.now();
    for (let i = 0; Date.now() - t0 < scaled(150_000); i++) {
        const name = `probe-${i}`;
        await node.apply({ apiVersion: "v1", kind: "ResourceQuota", metadata: { name, namespace: ns }, spec: { hard: { [key]: "1" } } });
        await sleep(3000);
        const used = JSON.parse(await node.kubectlOk(["-n", ns, "get", "resourcequota", name, "-o", "json"])).status?.used ?? {};
        if (key in used) {
            await node.kubectl(["delete", "namespace", ns, "--wait=false"]);
            return (Date.now() - t0) / 1000;
        }
        await node.kubectl(["-n", ns, "delete", "resourcequota", name, "--wait=false"]);
    }
    throw new Error(`the quota controller did not count ${key} within ${scaled(150_000) / 1000} s of the CRDs`);
}
