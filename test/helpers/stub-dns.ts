/**
 * A tiny DNS server on 127.0.0.1 (UDP) for tests: answers A queries from a table the test edits
 * while it runs (a name that moves to a new address, as a recreated container's does under
 * Docker's embedded DNS), NXDOMAIN for a name not in the table, an empty answer for other types.
 */
import * as dgram from "node:dgram";

export interface StubDns {
    /** "127.0.0.1:<port>": an nginx `resolver` address. */
    readonly address: string;
    /** name -> IPv4; edit it to move a name (undefined: NXDOMAIN). */
    readonly records: Map<string, string>;
    /** A queries answered so far, by name. */
    readonly queries: string[];
    stop(): Promise<void>;
}

function readName(msg: Buffer, start: number): { name: string; end: number } {
    const labels: string[] = [];
    let i = start;
    for (let guard = 0; guard < 128 && i < msg.length; guard++) {
        const len = msg[i]!;
        if (len === 0) return { name: labels.join(".").toLowerCase(), end: i + 1 };
        labels.push(msg.subarray(i + 1, i + 1 + len).toString("ascii"));
        i += 1 + len;
    }
    throw new Error("malformed query name");
}

export async function startStubDns(): Promise<StubDns> {
    const records = new Map<string, string>();
    const queries: string[] = [];
    const socket = dgram.createSocket("udp4");
    socket.on("message", (msg, rinfo) => {
        try {
            if (msg.length < 12) return;
            const { name, end } = readName(msg, 12);
            const qtype = msg.readUInt16BE(end);
            const question = msg.subarray(12, end + 4);
            const ip = records.get(name);
            const answer = qtype === 1 && ip !== undefined;
            if (qtype === 1) queries.push(name);
            const header = Buffer.alloc(12);
            header.writeUInt16BE(msg.readUInt16BE(0), 0); // id
            // QR, opcode 0, AA, RD copied, RA; rcode 3 (NXDOMAIN) when the name is unknown.
            header.writeUInt16BE(0x8400 | ((msg[2]! & 0x01) << 8) | 0x0080 | (ip === undefined ? 3 : 0), 2);
            header.writeUInt16BE(1, 4);
            header.writeUInt16BE(answer ? 1 : 0, 6);
            const parts = [header, question];
            if (answer) {
                const rr = Buffer.alloc(16);
                rr.writeUInt16BE(0xc00c, 0); // pointer to the question's name
                rr.writeUInt16BE(1, 2); // A
                rr.writeUInt16BE(1, 4); // IN
                rr.writeUInt32BE(1, 6); // TTL 1 s
                rr.writeUInt16BE(4, 10);
                ip!.split(".").forEach((o, k) => {
                    rr.writeUInt8(Number(o), 12 + k);
                });
                parts.push(rr);
            }
            socket.send(Buffer.concat(parts), rinfo.port, rinfo.address);
        } catch {
            // ignore malformed packets
        }
    });
    await new Promise<void>((resolve, reject) => {
        socket.once("error", reject);
        socket.bind(0, "127.0.0.1", () => resolve());
    });
    const { port } = socket.address();
    return {
        address: `127.0.0.1:${port}`,
        records,
        queries,
        stop: () => new Promise<void>((resolve) => socket.close(() => resolve())),
    };
}
