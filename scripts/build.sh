#!/usr/bin/env bash
# Builds the component library for plain-Node consumers: dist/components/**.js with .d.ts
# declarations (package.json "exports" points there), plus the non-TypeScript files the
# components read at run time. `pulumi up` does not need it: it runs index.ts through ts-node.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
rm -rf "$out"
npx tsc -p tsconfig.build.json --outDir "$out"
# Files the components read from beside their modules (components/training/nccl-check.ts,
# components/training/role-runner.ts, components/env/responder.ts, components/observability/programs.ts,
# components/shared/metrics-http.ts).
mkdir -p "$out/components/training/gpu"
cp components/training/gpu/nccl_check.py "$out/components/training/gpu/"
cp components/training/role_runner.py "$out/components/training/"
cp components/env/capacity_responder.py "$out/components/env/"
cp components/observability/session_counter.py components/observability/ingress.mtail "$out/components/observability/"
cp components/shared/metrics_http.py "$out/components/shared/"
echo "built $out/components (CommonJS + declarations)" >&2
