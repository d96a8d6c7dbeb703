/** A throwaway self-signed certificate for 127.0.0.1/localhost (tests and benchmarks). */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { scaled } from "./waits";

/** Writes cert.pem and key.pem (P-256, one day) into `dir` with openssl; `ca` is the cert itself. */
export function selfSignedCert(dir: string): { certFile: string; keyFile: string; ca: string } {
    const certFile = path.join(dir, "cert.pem");
    const keyFile = path.join(dir, "key.pem");
    const r = spawnSync(
        "openssl",
        [
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            keyFile,
            "-out",
            certFile,
        ],
        { encoding: "utf8", timeout: scaled(20_000) },
    );
    if (r.status !== 0) throw new Error(`openssl failed (apt-get install -y openssl): ${r.stderr ?? r.error?.message}`);
    return { certFile, keyFile, ca: fs.readFileSync(certFile, "utf8") };
}
