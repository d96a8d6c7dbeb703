// Prints, as JSON, the recorded facts (components/config/programs.ts) of the program the node
// fixture's trainer STAND-IN stands for: its file and its flags, from which the stand-in builds its
// argument parser (test/node/images.sh bakes the output into the image).
// usage (repo root): node --import tsx test/node/trainer-standin/facts.ts opencode_hf_sandbox
import { PROGRAMS, type ProgramName } from "../../../components/config";

const name = process.argv[2] ?? "";
if (!(name in PROGRAMS)) {
    process.stderr.write(`facts.ts: no program "${name}" (the programs: ${Object.keys(PROGRAMS).join(", ")})\n`);
    process.exit(2);
}
const facts = PROGRAMS[name as ProgramName];
process.stdout.write(`${JSON.stringify({ program: name, file: facts.file, source: facts.source, flags: facts.flags })}\n`);
