// GPU pods on the real node (issue #29) with a STAND-IN device plugin: test/node/kubelet/gpu-standin
// registers with the node's kubelet and advertises fake `nvidia.com/gpu` devices (there is no
// GPU: its Allocate sets NVIDIA_VISIBLE_DEVICES to the fake ids and nothing else), so that pods
// requesting the stack's GPU resource (trainer, vLLM: components/training/) are admitted. Checked
// on the running node: its capacity and allocatable; a pod requesting 2 sees 2 distinct fake ids
// and no device node; an over-request is refused by the kubelet's admission (the pods are bound
// with spec.nodeName, bypassing the node's kube-scheduler, so nothing stays Pending for a
// scheduler; the kubelet rejects the pod); a deleted pod's devices are free again. Run on test/stack/node.test.ts's node.
import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { HARDENED_CONTAINER, type Node, type NodeSession } from "../helpers/node";
import { scaledCount, scaledSeconds } from "../helpers/waits";

const NS = "gpu-standin-test";
const ENV = "NVIDIA_VISIBLE_DEVICES";
const FAKE_ID = /^standin-fake-gpu-\d+$/;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function gpuStandinSuite(shared: NodeSession): void {
    describe("node: a stand-in device plugin advertises fake nvidia.com/gpu devices; GPU pods are admitted, over-requests refused, devices freed", () => {
        let node: Node;
        let resource = "";
        let devices = 0;

        before(async () => {
            node = shared.node;
            resource = node.names.gpuResource;
            devices = node.names.gpuDevices;
            // The default ServiceAccount too: the pods below may come before the controller-manager makes it.
            await node.apply({
                apiVersion: "v1",
                kind: "List",
                items: [
                    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
                    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default", namespace: NS } },
                ],
            });
        });

        after(() => shared.clearNamespaces());

        /** A busybox pod bound to the node (spec.nodeName: the scheduler is bypassed) whose one container requests `gpus` of the resource. */
        const gpuPod = (name: string, gpus: number) => ({
            apiVersion: "v1",
            kind: "Pod",
            metadata: { name, namespace: NS },
            spec: {
                nodeName: node.names.nodeName,
                restartPolicy: "Never",
                automountServiceAccountToken: false,
                enableServiceLinks: false,
                terminationGracePeriodSeconds: 1,
                securityContext: { runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534 },
                containers: [
                    {
                        name: "gpu",
                        image: node.names.busyboxImage,
                        imagePullPolicy: "Never",
                        command: ["/bin/sleep", "2147483647"],
                        resources: { limits: { [resource]: String(gpus) } },
                        securityContext: HARDENED_CONTAINER,
                    },
                ],
            },
        });

        const podJson = async (name: string): Promise<any> => JSON.parse(await node.kubectlOk(["-n", NS, "get", "pod", name, "-o", "json"]));

        /** Runs the pod, waits for Ready; its NVIDIA_VISIBLE_DEVICES ids and whether /dev has any nvidia node. */
        const runGpuPod = async (name: string, gpus: number): Promise<{ ids: string[]; devNvidia: string }> => {
            await node.kubectlOk(["apply", "-f", "-"], JSON.stringify(gpuPod(name, gpus)));
            const t0 = Date.now();
            const w = await node.kubectl(["-n", NS, "wait", "--for=condition=Ready", `--timeout=${scaledSeconds(90)}s`, `pod/${name}`], undefined, 100_000);
            if (w.code !== 0) {
                const d = await node.kubectl(["-n", NS, "describe", "pod", name]);
                assert.fail(
                    `${name} (${gpus} ${resource}) not Ready: ${w.stderr}\n${d.stdout}\nkubelet:\n${node.logTail("kubelet", 30)}\ngpu-standin:\n${node.logTail("gpu-standin", 10)}`,
                );
            }
            process.stderr.write(`# ${name} (${gpus} ${resource}) Ready ${((Date.now() - t0) / 1000).toFixed(1)} s after kubectl apply\n`);
            const r = await node.kubectl(["-n", NS, "exec", name, "--", "sh", "-c", `printf '%s\\n' "$${ENV}"; ls /dev | grep -i nvidia; true`]);
            assert.equal(r.code, 0, r.stderr);
            const [value = "", ...dev] = r.stdout.split("\n");
            return { ids: value.split(",").filter((x) => x !== ""), devNvidia: dev.join(" ").trim() };
        };

        it("the node's capacity and allocatable show the stand-in's fake devices", async () => {
            const status = JSON.parse(await node.kubectlOk(["get", "node", node.names.nodeName, "-o", "json"])).status;
            assert.equal(status.capacity[resource], String(devices), `capacity: ${JSON.stringify(status.capacity)}`);
            assert.equal(status.allocatable[resource], String(devices), `allocatable: ${JSON.stringify(status.allocatable)}`);
            const log = node.logTail("gpu-standin", 20);
            const registered = log.split("\n").find((l) => l.includes(`registered ${resource}: ${devices} fake devices`));
            assert.ok(registered?.startsWith("[gpu-standin, STAND-IN: no GPU]"), `the stand-in registered and names itself in its log:\n${log}`);
            // The kubelet's device plugin directory is fixed (/var/lib/kubelet/device-plugins); the
            // node's is $W/device-plugins bind-mounted there in its own mount namespace (env.sh).
            const own = path.join(node.names.work, "device-plugins");
            assert.ok(fs.existsSync(path.join(own, "kubelet.sock")) && fs.existsSync(path.join(own, "gpu-standin.sock")), `both sockets in ${own}`);
            // Without that bind mount the kubelet would make its socket in the host's directory.
            assert.ok(
                !fs.existsSync("/var/lib/kubelet/device-plugins/kubelet.sock"),
                "the host's device plugin directory is not the node's: no kubelet.sock there",
            );
        });

        let firstIds: string[] = [];
        it(`a pod requesting 2 GPUs runs and sees ${ENV} naming 2 distinct fake ids, no device node`, async () => {
            const seen = await runGpuPod("two-gpus", 2);
            assert.equal(seen.ids.length, 2, `${ENV}=${seen.ids.join(",")}`);
            assert.equal(new Set(seen.ids).size, 2, `distinct: ${seen.ids.join(",")}`);
            for (const id of seen.ids) assert.match(id, FAKE_ID);
            assert.equal(seen.devNvidia, "", "no /dev/nvidia* in the container (a stand-in: there is no GPU)");
            firstIds = seen.ids;
        });

        // The kubelet's device manager (its admit handler runs before the resource-fit predicate,
        // k8s.io/kubernetes v1.36.3 pkg/kubelet/kubelet.go) fails the allocation: the pod is Failed
        // with UnexpectedAdmissionError (pkg/kubelet/cm/admission/errors.go). A scheduler would have
        // kept it Pending instead; these pods bypass it.
        it("a pod requesting more than are free is rejected by the kubelet's admission: Failed, UnexpectedAdmissionError (bound with spec.nodeName, no scheduler in the way)", async () => {
            assert.equal(firstIds.length, 2, "needs the 2-GPU pod from the test before");
            const over = devices - 2 + 1; // one more than the free ones
            await node.kubectlOk(["apply", "-f", "-"], JSON.stringify(gpuPod("too-many-gpus", over)));
            let pod: any;
            for (let i = 0; i < scaledCount(60); i++) {
                pod = await podJson("too-many-gpus");
                if (pod.status?.phase && pod.status.phase !== "Pending") break;
                await sleep(500);
            }
            process.stderr.write(
                `# too-many-gpus (${over} ${resource}, ${devices - 2} free): phase ${pod.status?.phase}, reason ${pod.status?.reason}: ${pod.status?.message}\n`,
            );
            assert.equal(pod.status.phase, "Failed", `the kubelet rejects it: ${JSON.stringify(pod.status)}`);
            assert.equal(pod.status.reason, "UnexpectedAdmissionError", JSON.stringify(pod.status));
            assert.equal(
                pod.status.message,
                `Pod was rejected: Allocate failed due to requested number of devices unavailable for ${resource}. Requested: ${over}, Available: ${devices - 2}, which is unexpected`,
            );
            assert.equal(pod.status.containerStatuses?.[0]?.state?.running, undefined, "its container never ran");
            await node.kubectlOk(["-n", NS, "delete", "pod", "too-many-gpus", "--wait=true"]);
        });

        it("after the pod is deleted its devices are free again: a pod requesting all of them runs", async () => {
            assert.equal(firstIds.length, 2, "needs the 2-GPU pod from the test before");
            const t0 = Date.now();
            await node.kubectlOk(["-n", NS, "delete", "pod", "two-gpus", "--wait=true", `--timeout=${scaledSeconds(60)}s`]);
            process.stderr.write(`# two-gpus deleted in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
            const seen = await runGpuPod("all-gpus", devices);
            assert.equal(seen.ids.length, devices, `${ENV}=${seen.ids.join(",")}`);
            assert.equal(new Set(seen.ids).size, devices, `distinct: ${seen.ids.join(",")}`);
            for (const id of seen.ids) assert.match(id, FAKE_ID);
            for (const id of firstIds) assert.ok(seen.ids.includes(id), `${id}, the deleted pod's, is allocated again`);
            await node.kubectlOk(["-n", NS, "delete", "pod", "all-gpus", "--wait=true", `--timeout=${scaledSeconds(60)}s`]);
        });
    });
}
