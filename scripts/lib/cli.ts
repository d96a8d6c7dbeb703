/**
 * What every CLI of scripts/ (plan, preflight, ingress:local) shares, so they behave alike:
 * `--help`/`-h` prints the usage on stdout and exits 0; a bad argument prints the problem and
 * the usage on stderr and exits 2; a failed check or a bad config prints its message and exits 1
 * (the CLI's own errors, told apart by `known`); anything else is an internal error with its
 * trace, exit 70.
 */

export const EXIT = { ok: 0, failed: 1, usage: 2, internal: 70 } as const;

/** A bad argument (exit 2); `message` names it and the fix. */
export class UsageError extends Error {}

/** `--help` or `-h` was given. */
export class HelpRequested extends Error {}

/** Throws HelpRequested when `argv` asks for help (anywhere, as every CLI's first check). */
export function checkHelp(argv: readonly string[]): void {
    if (argv.some((a) => a === "--help" || a === "-h")) throw new HelpRequested();
}

/**
 * Runs `main` as the CLI `name` and exits with its code. `known` turns the CLI's own errors
 * into their message (exit 1); UsageError and HelpRequested are handled here.
 */
export function runCli(name: string, usage: string, main: () => Promise<number>, known: (e: unknown) => string | undefined = () => undefined): void {
    const write = (stream: NodeJS.WriteStream, text: string) => new Promise<void>((resolve) => stream.write(text, () => resolve()));
    const finish = async (code: number, out?: string, err?: string) => {
        if (out !== undefined) await write(process.stdout, out);
        if (err !== undefined) await write(process.stderr, err);
        process.exit(code);
    };
    main().then(
        (code) => finish(code),
        (e: unknown) => {
            if (e instanceof HelpRequested) return finish(EXIT.ok, `${usage}\n`);
            if (e instanceof UsageError) return finish(EXIT.usage, undefined, `${name}: ${e.message}\n${usage}\n`);
            const message = known(e);
            if (message !== undefined) return finish(EXIT.failed, undefined, `${name}: ${message}\n`);
            return finish(EXIT.internal, undefined, `${name}: internal error: ${(e as Error)?.stack ?? String(e)}\n`);
        },
    );
}
