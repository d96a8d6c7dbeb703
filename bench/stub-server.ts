// The stub upstream (test/helpers/stub-upstream.ts) in its own process, so wrk, the proxy and the measuring client
// never share its event loop. Started by bench/ingress.ts with fork(); talks over the IPC channel:
//   -> {cmd:"sample"}  <- {connections, requests, cpuSeconds}   (TCP connections accepted and requests received so far;
//                         this process's CPU seconds)
//   -> {cmd:"stop"}    exits.  The process also exits when the parent goes away (IPC disconnect).
// Options come as one JSON argument: {"delayMs":20,"streamIntervalMs":10,"streamChunks":5}.
import { startStubUpstream } from "../test/helpers/stub-upstream";

async function main(): Promise<void> {
    const opts = JSON.parse(process.argv[2] ?? "{}") as { delayMs?: number; streamIntervalMs?: number; streamChunks?: number };
    const stub = await startStubUpstream(opts);
    // The stub records every request for tests; a benchmark sends hundreds of thousands: drop them.
    let dropped = 0;
    const drain = () => {
        dropped += stub.requests.length;
        stub.requests.length = 0;
    };
    const drainTimer = setInterval(drain, 250);
    const cpu = () => {
        const u = process.cpuUsage();
        return (u.user + u.system) / 1e6;
    };
    const exit = async () => {
        clearInterval(drainTimer);
        await Promise.race([stub.stop(), new Promise((r) => setTimeout(r, 2000))]);
        process.exit(0);
    };
    process.on("message", (m: { cmd?: string }) => {
        if (m?.cmd === "sample") {
            drain();
            process.send?.({ type: "sample", connections: stub.connections(), requests: dropped, cpuSeconds: cpu() });
        } else if (m?.cmd === "stop") void exit();
    });
    process.on("disconnect", () => void exit());
    process.on("SIGTERM", () => void exit());
    process.on("SIGINT", () => void exit());
    process.send?.({ type: "ready", port: stub.port, url: stub.url });
}

main().catch((e: unknown) => {
    process.stderr.write(`stub-server: ${String(e)}\n`);
    process.exit(1);
});
