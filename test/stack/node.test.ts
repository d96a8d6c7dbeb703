// Real pods on one real node (issue #29): the node fixture (test/node/README.md) brought up once
// for the whole file (containerd 2 + runc + CNI + kubelet, kube-proxy, controller-manager,
// scheduler, CoreDNS, kube-router's NetworkPolicy controller, the stand-in GPU device plugin and
// every image test/node/images.sh builds), the suites in test/node-suites/ run on it one after the
// other, each leaving the node without its namespaces (NodeSession.clearNamespaces), and down.sh
// checked last. One node for all suites: each node up and down costs about a minute, and the node
// is one per machine (env.sh's fixed names), so suites in files of their own waited for each other
// while `npm test` held a test slot for them. Root and Linux only; under CI the fixture is built
// when missing (a skip fails CI).
import { after, before, describe, it } from "node:test";
import { NodeSession, nodeSkipReason } from "../helpers/node";
import { envSpaceSuite } from "../node-suites/env-space";
import { gpuStandinSuite } from "../node-suites/gpu";
import { imagesSuite } from "../node-suites/images";
import { ingressSuite } from "../node-suites/ingress";
import { sandboxClaimSuite } from "../node-suites/sandbox-claim";
import { sandboxAndReachabilitySuite } from "../node-suites/sandbox-reachability";
import { scaled } from "../helpers/waits";

const CI = !!process.env.CI;

/** In the order they run. */
const SUITES: Record<string, (shared: NodeSession) => void> = {
    "sandbox-reachability": sandboxAndReachabilitySuite,
    gpu: gpuStandinSuite,
    images: imagesSuite,
    "env-space": envSpaceSuite,
    ingress: ingressSuite,
    "sandbox-claim": sandboxClaimSuite,
};

/** NODE_SUITES=ingress,gpu runs only those suites (while working on one); unset, all. Never under CI. */
function onlySuites(): Set<string> | undefined {
    const v = process.env.NODE_SUITES;
    if (v === undefined || v === "") return undefined;
    if (CI) throw new Error("NODE_SUITES is for working on a suite; CI runs every suite (unset it)");
    const names = new Set(v.split(",").map((n) => n.trim()));
    const unknown = [...names].filter((n) => !(n in SUITES));
    if (unknown.length > 0) throw new Error(`NODE_SUITES: no suite ${unknown.join(", ")} (the suites: ${Object.keys(SUITES).join(", ")})`);
    return names;
}
const only = onlySuites();

describe("node: one real node, the stack's pods on it", {
    skip: nodeSkipReason(CI),
    timeout: scaled(90 * 60_000), // the wait for another process's node (helpers/node.ts, 30 min) + the suites (about 10 min) + a venv made under --no-setup
}, () => {
    const shared = new NodeSession();

    before(async () => {
        await shared.prepare();
        await shared.start();
    });

    after(() => shared.cleanup());

    for (const [name, suite] of Object.entries(SUITES)) if (only === undefined || only.has(name)) suite(shared);

    it("down.sh leaves no process, mount, cgroup, network namespace, veth, CNI cache or host iptables/ipset change", async () => {
        await shared.downLeavesNothing();
    });
});
