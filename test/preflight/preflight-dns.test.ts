/**
 * The preflight's DNS check: target.dns against what the cluster runs (a node-local-dns DaemonSet and
 * its listen addresses, the DNS pods of the shape's selector), every message tested without a cluster.
 * Run: node --import tsx --test test/preflight/preflight-dns.test.ts
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { resolvePlatform } from "../../components/platform";
import { checkDns, dnsPodSelector, nodeLocalAddresses } from "../../components/preflight/kubernetes";
import { parseWithTestImages } from "../helpers/config";

const planWith = (dns?: unknown) =>
    resolvePlatform(
        parseWithTestImages({ recipe: "mbpp-whitebox", runId: "run-001", target: { kind: "kubernetes", context: "test", ...(dns ? { dns } : {}) } }, "test"),
        { hfToken: true },
    );
/** NodeLocal DNSCache's DaemonSet as the upstream manifest renders it (kubernetes cluster/addons/dns/nodelocaldns/nodelocaldns.yaml). */
const cache = (localip: string) => ({
    metadata: { name: "node-local-dns", namespace: "kube-system" },
    spec: {
        template: {
            spec: { containers: [{ name: "node-cache", args: ["-localip", localip, "-conf", "/etc/Corefile", "-upstreamsvc", "kube-dns-upstream"] }] },
        },
    },
});
const calico = { metadata: { name: "calico-node", namespace: "kube-system" } };

describe("preflight: Cluster DNS", () => {
    test("kube-dns (the default) on a cluster without a cache: ok; with NodeLocal DNSCache: fails, naming the setting", () => {
        const p = planWith();
        assert.deepEqual(dnsPodSelector(p), { namespace: "kube-system", selector: "k8s-app=kube-dns" });
        const fine = checkDns(p, [calico], { dnsPods: 2 });
        assert.equal(fine.status, "ok");
        assert.match(fine.found, /2 pod\(s\) k8s-app=kube-dns in kube-system, and no NodeLocal DNSCache: target\.dns kube-dns matches/);
        const gke = checkDns(p, [calico, cache("169.254.20.10,10.96.0.10")], { dnsPods: 2 });
        assert.equal(gke.status, "fail");
        assert.match(
            gke.found,
            /NodeLocal DNSCache runs \(DaemonSet kube-system\/node-local-dns, listening on 169\.254\.20\.10, 10\.96\.0\.10\).*every pod of the stack would lose DNS/,
        );
        assert.equal(gke.fix, "set target.dns to { kind: node-local, addresses: [169.254.20.10, 10.96.0.10] }");
    });

    test("node-local: ok when every listen address is allowed; fails when one is not, or when there is no cache", () => {
        assert.deepEqual(nodeLocalAddresses(cache("169.254.20.10,10.96.0.10")), ["169.254.20.10", "10.96.0.10"]);
        const both = planWith({ kind: "node-local", addresses: ["169.254.20.10", "10.96.0.10"] });
        assert.equal(checkDns(both, [cache("169.254.20.10,10.96.0.10")], { dnsPods: 2 }).status, "ok");
        const one = planWith({ kind: "node-local" });
        const missing = checkDns(one, [cache("169.254.20.10,10.96.0.10")], { dnsPods: 2 });
        assert.equal(missing.status, "fail");
        assert.match(
            missing.found,
            /listens on 169\.254\.20\.10, 10\.96\.0\.10, but target\.dns\.addresses allows 169\.254\.20\.10: queries to 10\.96\.0\.10 would be dropped/,
        );
        const none = checkDns(one, [calico], { dnsPods: 2 });
        assert.equal(none.status, "fail");
        assert.match(none.found, /target\.dns is node-local, but no node-local-dns DaemonSet runs/);
        assert.match(none.fix, /set target\.dns to \{ kind: kube-dns \}/);
    });

    test("selector: the pods are looked up with its labels; none found fails naming the fields", () => {
        const p = planWith({ kind: "selector", namespace: "dns", podLabels: { app: "unbound", tier: "dns" } });
        assert.deepEqual(dnsPodSelector(p), { namespace: "dns", selector: "app=unbound,tier=dns" });
        assert.equal(checkDns(p, [calico], { dnsPods: 3 }).status, "ok");
        const none = checkDns(p, [calico], { dnsPods: 0 });
        assert.equal(none.status, "fail");
        assert.match(none.found, /no pod matches app=unbound,tier=dns in namespace dns \(target\.dns\)/);
        assert.match(none.fix, /set target\.dns\.namespace \/ podLabels to your DNS pods' \(kubectl get pods -n dns --show-labels\)/);
    });
});
