// A request from a pod to a name inside the cluster, run again while the name does not resolve yet
// (the node suites, test/node-suites/). Imports nothing that builds a fixture, so a test of it needs none.
import { pollUntil } from "./waits";

/**
 * A pod's failed name lookup as python3 prints it (socket.gaierror, urllib's URLError): EAI_NONAME,
 * EAI_AGAIN, EAI_NODATA. Inside the cluster that is CoreDNS, or the kube-dns Service's rules, not
 * answering yet on a busy machine; never a NetworkPolicy's refusal (the pods' DNS egress stays
 * open), which is a timeout or a refused connection.
 */
const NAME_LOOKUP_FAILED = /Name or service not known|Temporary failure in name resolution|No address associated with hostname|socket\.gaierror/;

/**
 * `run` (a command in a pod that reaches an in-cluster name) run again, every second for up to 60 s
 * (scaled), while its output shows a failed name lookup; the first result without one is returned.
 * A name that never resolves fails naming `what` and the last output.
 */
export async function whileNameLookupFails<T extends { readonly out: string }>(what: string, run: () => Promise<T>): Promise<T> {
    let last: T | undefined;
    return await pollUntil(
        `${what}: a name lookup that answers`,
        async () => {
            last = await run();
            return NAME_LOOKUP_FAILED.test(last.out) ? undefined : last;
        },
        { budgetMs: 60_000, intervalMs: 1000, describe: () => last?.out ?? "not run" },
    );
}
