// npm run ingress:local -- --listen 127.0.0.1:PORT --upstream http://127.0.0.1:UPORT --keys-file FILE
//   [--tls-cert F --tls-key F] [--allow-completions] [--health] [--print-config]
// Runs the VllmIngress nginx config (same renderNginxConfig as the deployed component) in the foreground.
// Keys file: one "name key" per line, "#" comments allowed. Exit 2 on bad arguments (nothing started).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { localPaths, parseKeysText, parseListen, parseUpstream, startLocalIngress } from "../components/ingress/local";
import { renderNginxConfig, resolveProxySettings } from "../components/ingress/nginx";
import { checkHelp, runCli, UsageError } from "./lib/cli";

const USAGE = `usage: npm run ingress:local -- --listen 127.0.0.1:PORT --upstream http://127.0.0.1:UPORT --keys-file FILE
         [--tls-cert FILE --tls-key FILE] [--allow-completions] [--health] [--print-config]`;

/** Parsed command line. */
export interface IngressLocalArgs {
    readonly listen: string;
    readonly upstream: string;
    readonly keysFile: string;
    readonly tlsCert: string | undefined;
    readonly tlsKey: string | undefined;
    readonly allowCompletions: boolean;
    readonly health: boolean;
    readonly printConfig: boolean;
}

/** Strict argument parsing: returns every problem at once; an unknown flag, a missing value or a bad value is an error. */
export function parseArgs(argv: ReadonlyArray<string>): { args?: IngressLocalArgs; errors: string[] } {
    checkHelp(argv);
    const valued = new Map<string, string>();
    const flags = new Set<string>();
    const errors: string[] = [];
    const VALUED = ["--listen", "--upstream", "--keys-file", "--tls-cert", "--tls-key"];
    const FLAGS = ["--allow-completions", "--health", "--print-config"];
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i]!;
        const eq = a.indexOf("=");
        const name = a.startsWith("--") && eq > 0 ? a.slice(0, eq) : a;
        if (VALUED.includes(name)) {
            const value = eq > 0 && a.startsWith("--") ? a.slice(eq + 1) : argv[++i];
            if (value === undefined || value === "" || (value.startsWith("--") && eq < 0)) errors.push(`${name}: missing value`);
            else if (valued.has(name)) errors.push(`${name}: given twice`);
            else valued.set(name, value);
        } else if (FLAGS.includes(a)) {
            if (flags.has(a)) errors.push(`${a}: given twice`);
            flags.add(a);
        } else {
            errors.push(`unknown argument "${a}"`);
        }
    }
    const listen = valued.get("--listen");
    const upstream = valued.get("--upstream");
    const keysFile = valued.get("--keys-file");
    if (listen === undefined) errors.push("--listen: required (e.g. 127.0.0.1:8080)");
    else {
        try {
            parseListen(listen);
        } catch (e) {
            errors.push(`--${(e as Error).message}`);
        }
    }
    if (upstream === undefined) errors.push("--upstream: required (e.g. http://127.0.0.1:8000)");
    else {
        try {
            parseUpstream(upstream);
        } catch (e) {
            errors.push(`--${(e as Error).message}`);
        }
    }
    if (keysFile === undefined) errors.push('--keys-file: required (file with one "name key" per line)');
    else {
        try {
            parseKeysText(fs.readFileSync(keysFile, "utf8"), keysFile);
        } catch (e) {
            errors.push(`--keys-file: ${(e as Error).message}`);
        }
    }
    const tlsCert = valued.get("--tls-cert");
    const tlsKey = valued.get("--tls-key");
    if ((tlsCert === undefined) !== (tlsKey === undefined)) errors.push("--tls-cert and --tls-key must be given together");
    for (const [flag, file] of [
        ["--tls-cert", tlsCert],
        ["--tls-key", tlsKey],
    ] as const) {
        if (file !== undefined && !fs.existsSync(file)) errors.push(`${flag}: file "${file}" does not exist`);
    }
    if (errors.length > 0) return { errors };
    return {
        errors,
        args: {
            listen: listen!,
            upstream: upstream!,
            keysFile: keysFile!,
            tlsCert,
            tlsKey,
            allowCompletions: flags.has("--allow-completions"),
            health: flags.has("--health"),
            printConfig: flags.has("--print-config"),
        },
    };
}

async function main(): Promise<number> {
    const { args, errors } = parseArgs(process.argv.slice(2));
    if (!args) throw new UsageError(errors.join("\n  "));
    const settings = { allowCompletions: args.allowCompletions, healthUnauthenticated: args.health };
    const tls = args.tlsCert !== undefined && args.tlsKey !== undefined ? { certFile: args.tlsCert, keyFile: args.tlsKey } : undefined;
    if (args.printConfig) {
        // Print what would run (paths under a placeholder run dir); starts nothing.
        const { host, port } = parseListen(args.listen);
        const dir = path.join(os.tmpdir(), "vllm-ingress-XXXXXX");
        const text = renderNginxConfig(
            resolveProxySettings({
                ...settings,
                ...localPaths(dir),
                listenAddress: host,
                listenPort: port,
                upstream: parseUpstream(args.upstream),
                tlsEnabled: tls !== undefined,
            }),
        );
        process.stdout.write(text);
        return 0;
    }
    // Handlers go in before nginx starts and before "ready" is printed: a supervisor may signal as soon as it reads that line.
    let signalled: NodeJS.Signals | undefined;
    let wakeUp: () => void = () => undefined;
    const signalledPromise = new Promise<void>((resolve) => (wakeUp = resolve));
    const onSignal = (sig: NodeJS.Signals) => {
        if (signalled !== undefined) return;
        signalled = sig;
        process.stderr.write(`ingress:local: ${sig}, stopping nginx\n`);
        wakeUp();
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    process.on("SIGHUP", onSignal);
    const ingress = await startLocalIngress({ listen: args.listen, upstream: args.upstream, keysFile: args.keysFile, tls, settings, echoOutput: true });
    if (signalled === undefined) {
        process.stdout.write(`ingress:local ready ${ingress.url} -> ${args.upstream} (pid ${ingress.pid}, dir ${ingress.dir})\n`);
    }
    const why = await Promise.race([signalledPromise.then(() => "signal" as const), ingress.exited.then(() => "exited" as const)]);
    await ingress.stop(); // kills nginx if still running, verifies it is gone, removes the run dir
    if (why === "signal") return 0;
    process.stderr.write("ingress:local: nginx exited unexpectedly\n");
    return 1;
}

// Its own errors (nginx would not start, a port is taken) are a failed run: exit 1 with the message.
if (require.main === module) runCli("ingress:local", USAGE, main, (e) => (e instanceof Error ? e.message : undefined));
