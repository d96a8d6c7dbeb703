#!/usr/bin/env bash
# checkov over the rendered Kubernetes manifests of every recipe and of the prod stack, against the
# reviewed allow-list (allowlist.json: one entry per check and resource pattern, each with its reason):
#   bash scripts/golden/plans.sh /tmp/plans            # every stack's and recipe's plan
#   CHECKOV=/tmp/checkov-venv/bin/checkov bash scripts/checkov/run.sh /tmp/plans
# Exit 0 when every finding is allowed and every allow-list entry still matches one; 1 otherwise
# (each finding outside the list, and each stale entry, printed); 2 when checkov itself fails.
# checkov is not a dependency of the project: install it apart (docs/design/env-hardening.md names
# the version the list was reviewed with).
set -euo pipefail
cd "$(dirname "$0")/../.."
plans=${1:?usage: scripts/checkov/run.sh PLANS_DIR (from scripts/golden/plans.sh)}
checkov=${CHECKOV:-checkov}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
n=0
for d in "$plans"/recipe-*-kubernetes "$plans"/stack-prod; do
  [[ -d "$d/manifests" ]] || continue
  code=0
  "$checkov" -d "$d/manifests" --framework kubernetes -o json --compact --quiet >"$out/$(basename "$d").json" 2>"$out/$(basename "$d").err" || code=$?
  # checkov exits 1 when a check fails: the comparison below decides.
  (( code <= 1 )) || { cat "$out/$(basename "$d").err" >&2; echo "checkov failed on $d (exit $code)" >&2; exit 2; }
  n=$((n + 1))
done
(( n > 0 )) || { echo "no recipe-*-kubernetes or stack-prod plan with manifests under $plans" >&2; exit 2; }
"$checkov" --version | sed 's/^/checkov /'
python3 -I scripts/checkov/compare.py scripts/checkov/allowlist.json "$out"/*.json
