/**
 * The real JobSet controller (sigs.k8s.io/jobset v0.12.0, built by test/jobset-controller/build.sh)
 * against the simulated cluster (test/helpers/cluster.ts), with its webhooks: the JobSet
 * defaulting/validation and the pod webhooks that carry exclusive placement. The controller serves
 * them on 127.0.0.1 with a throwaway certificate (its own cert rotation, which patches a Service's
 * webhook configurations, is off: `internalCertManagement.enable: false`), and the module's webhook
 * configurations are installed pointing at that URL, with the objectSelector its kustomize patches add
 * (config/components/webhook/patches: pod webhooks only for pods labelled with a JobSet name).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import YAML from "yaml";
import { freePort } from "./http";
import type { Cluster } from "./cluster";
import { selfSignedCert } from "./tls";
import { scaled } from "./waits";

const REPO_ROOT = path.resolve(__dirname, "..", "..");
export const JOBSET_BUILD_SCRIPT = path.join(REPO_ROOT, "test", "jobset-controller", "build.sh");

/** The built controller's directory (build.sh prints it last), or why there is none. */
export function jobSetControllerBuild(): { ok: true; dir: string } | { ok: false; reason: string } {
    const r = spawnSync("bash", [JOBSET_BUILD_SCRIPT], { encoding: "utf8", timeout: scaled(30 * 60_000) });
    const dir = (r.stdout ?? "").trim().split("\n").pop() ?? "";
    if (r.status !== 0 || !fs.existsSync(path.join(dir, "bin", "jobset-controller")))
        return {
            ok: false,
            reason: `bash test/jobset-controller/build.sh failed (exit ${r.status}): ${(r.stderr ?? "").trim().split("\n").slice(-3).join(" | ")}`,
        };
    return { ok: true, dir };
}

function readyz(port: number): Promise<number> {
    return new Promise((resolve) => {
        const req = http.get({ host: "127.0.0.1", port, path: "/readyz", timeout: 2000 }, (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode ?? 0));
        });
        req.on("timeout", () => req.destroy(new Error("timeout")));
        req.on("error", () => resolve(0));
    });
}

/** The module's webhook configurations with its kustomize patches applied and the URL of the local webhook server. */
export function webhookConfigurations(dir: string, port: number, caPem: string): Array<Record<string, any>> {
    const docs = YAML.parseAllDocuments(fs.readFileSync(path.join(dir, "webhook", "manifests.yaml"), "utf8"))
        .map((d) => d.toJS())
        .filter(Boolean);
    const patches: Record<string, string> = { MutatingWebhookConfiguration: "mutating-patch.yaml", ValidatingWebhookConfiguration: "validating-patch.yaml" };
    const caBundle = Buffer.from(caPem).toString("base64");
    return docs.map((cfg: Record<string, any>) => {
        // Each patch is one `replace` of /webhooks/1 (the pod webhook), adding its objectSelector.
        for (const op of YAML.parse(fs.readFileSync(path.join(dir, "webhook", patches[cfg.kind]), "utf8")) as Array<Record<string, any>>) {
            if (op.op !== "replace" || !/^\/webhooks\/\d+$/.test(op.path)) throw new Error(`unexpected webhook patch ${JSON.stringify(op)}`);
            cfg.webhooks[Number(op.path.split("/")[2])] = op.value;
        }
        for (const w of cfg.webhooks) w.clientConfig = { url: `https://127.0.0.1:${port}${w.clientConfig.service.path}`, caBundle };
        cfg.metadata = { name: `jobset-${cfg.metadata.name}` };
        return cfg;
    });
}

/**
 * Starts the controller (a process of the cluster's API server fixture, stopped with it), installs
 * its webhook configurations and waits until it is ready (webhook server up, certificates loaded).
 */
export async function startJobSetController(cluster: Cluster, dir: string): Promise<void> {
    const work = fs.mkdtempSync(path.join(cluster.api.dir, "jobset-"));
    const certDir = path.join(work, "certs");
    fs.mkdirSync(certDir);
    const cert = selfSignedCert(certDir);
    // controller-runtime's webhook server reads tls.crt / tls.key from its cert dir.
    fs.copyFileSync(cert.certFile, path.join(certDir, "tls.crt"));
    fs.copyFileSync(cert.keyFile, path.join(certDir, "tls.key"));
    const [webhookPort, healthPort] = [await freePort(), await freePort()];
    const configFile = path.join(work, "config.yaml");
    fs.writeFileSync(
        configFile,
        YAML.stringify({
            apiVersion: "config.jobset.x-k8s.io/v1alpha1",
            kind: "Configuration",
            leaderElection: { leaderElect: false },
            internalCertManagement: { enable: false },
            webhook: { port: webhookPort, host: "127.0.0.1", certDir },
            health: { healthProbeBindAddress: `127.0.0.1:${healthPort}` },
            metrics: { bindAddress: "0" },
        }),
    );
    const proc = cluster.api.startProcess(
        "jobset-controller",
        path.join(dir, "bin", "jobset-controller"),
        [`--config=${configFile}`, `--kubeconfig=${cluster.kubeconfig}`, "--zap-devel=false"],
        { ports: [webhookPort, healthPort], env: { KUBECONFIG: cluster.kubeconfig } },
    );
    await cluster.waitFor(
        "the JobSet controller's /readyz",
        async () => {
            if (proc.exitCode !== null || proc.signalCode !== null)
                throw new Error(`jobset-controller exited (code ${proc.exitCode}): ${cluster.api.logTail("jobset-controller", 20)}`);
            return (await readyz(healthPort)) === 200;
        },
        60_000,
    );
    const configs = webhookConfigurations(dir, webhookPort, cert.ca);
    await cluster.kubectlOk(["create", "-f", "-"], configs.map((c) => JSON.stringify(c)).join("\n"));
}
