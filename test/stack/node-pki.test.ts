/**
 * The node fixture's credentials (test/node/pki.sh, which test/node/up.sh runs) pass Python's strict
 * verification: Python 3.13's ssl.create_default_context sets VERIFY_X509_STRICT and
 * VERIFY_X509_PARTIAL_CHAIN (CPython Lib/ssl.py), and OpenSSL then refuses a CA without keyUsage
 * ("CA cert does not include key usage extension"), which is every claim Harbor's venv made on the node.
 * A real TLS handshake on loopback: the API server's certificate served by Python's ssl, a client
 * context with those flags and the CA. Needs openssl and python3 (3.11 has the flags); the node
 * fixture itself is not started.
 * Run: node --import tsx --test test/stack/node-pki.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, test } from "node:test";

const PKI = path.resolve(__dirname, "..", "node", "pki.sh");

/** Serves `dir`/apiserver.crt on loopback and connects with Python 3.13's default verify flags and `dir`/ca.crt: "ok" or the error. */
const HANDSHAKE = String.raw`
import socket, ssl, sys, threading
d = sys.argv[1]
srv = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
srv.load_cert_chain(f"{d}/apiserver.crt", f"{d}/apiserver.key")
lsock = socket.create_server(("127.0.0.1", 0))
port = lsock.getsockname()[1]
def serve():
    conn, _ = lsock.accept()
    try:
        srv.wrap_socket(conn, server_side=True).close()
    except (ssl.SSLError, OSError):
        conn.close()
threading.Thread(target=serve, daemon=True).start()
cli = ssl.create_default_context(cafile=f"{d}/ca.crt")
cli.verify_flags |= ssl.VERIFY_X509_STRICT | ssl.VERIFY_X509_PARTIAL_CHAIN
try:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s, cli.wrap_socket(s, server_hostname="127.0.0.1"):
        print("ok")
except ssl.SSLCertVerificationError as e:
    print(e.verify_message)
`;

function handshake(dir: string): string {
    const r = spawnSync("python3", ["-I", "-c", HANDSHAKE, dir], { encoding: "utf8", timeout: 30_000 });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
}

function run(cmd: string, args: string[]): void {
    const r = spawnSync(cmd, args, { encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, `${cmd} ${args.join(" ")}: ${r.stderr}`);
}

const missing = ["openssl", "python3"].filter((t) => spawnSync(t, ["version"]).error !== undefined && spawnSync(t, ["--version"]).error !== undefined);

describe("the node fixture's CA under Python 3.13's strict verification", { skip: missing.length > 0 ? `needs ${missing.join(", ")}` : false }, () => {
    test("pki.sh's CA has keyUsage and a strict client verifies the API server through it", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-node-pki-"));
        run("bash", [PKI, dir, "127.0.0.1"]);
        const ext = spawnSync("openssl", ["x509", "-in", path.join(dir, "ca.crt"), "-noout", "-ext", "basicConstraints,keyUsage"], { encoding: "utf8" });
        assert.match(ext.stdout, /Basic Constraints: critical\s+CA:TRUE/);
        assert.match(ext.stdout, /Key Usage: critical\s+Certificate Sign, CRL Sign/);
        assert.equal(handshake(dir), "ok");
    });

    test("CONTROL: a CA made without keyUsage (up.sh's command before) is refused by the same client", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-node-pki-old-"));
        run("bash", [PKI, dir, "127.0.0.1"]);
        // The CA as up.sh made it before, and the API server's certificate signed again by it.
        const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        run("openssl", ["req", "-x509", ...ec, "-keyout", `${dir}/ca.key`, "-out", `${dir}/ca.crt`, "-days", "2", "-subj", "/CN=arl-node-ca"]);
        run("openssl", [
            "x509",
            "-req",
            "-in",
            `${dir}/apiserver.csr`,
            "-CA",
            `${dir}/ca.crt`,
            "-CAkey",
            `${dir}/ca.key`,
            "-CAcreateserial",
            "-out",
            `${dir}/apiserver.crt`,
            "-days",
            "2",
            "-extfile",
            `${dir}/apiserver.ext`,
        ]);
        assert.equal(handshake(dir), "CA cert does not include key usage extension");
    });
});
