// A node:test reporter that writes one JSON line per skipped test (name, file, reason), so the
// test runner (scripts/test/run.ts) can count and name every skip. Used beside the normal reporter.
export default async function* skipsReporter(source) {
    for await (const event of source) {
        if (event.type === "test:pass" || event.type === "test:fail") {
            const skip = event.data.skip;
            if (skip !== undefined && skip !== false) {
                yield JSON.stringify({ name: event.data.name, file: event.data.file ?? "", reason: typeof skip === "string" ? skip : "(no reason given)" }) +
                    "\n";
            }
        }
    }
}
