#!/usr/bin/env bash
# Plans every stack in stacks/ and every recipe on both targets into one folder, for a golden
# comparison of a change that must not change behaviour:
#   bash scripts/golden/plans.sh /tmp/before        # on the commit before the change
#   bash scripts/golden/plans.sh /tmp/after         # on the change
#   diff -r /tmp/before /tmp/after                  # no output: identical plans
# A plan that fails keeps its exit code and its output in <name>.log, so a refusal is compared too.
set -uo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: scripts/golden/plans.sh DEST}
rm -rf "$dest" && mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
plan() { # name, plan arguments
    local name=$1; shift
    npx --no-install tsx scripts/plan.ts "$@" --out "$dest/$name" >"$dest/$name.log" 2>&1
    echo "exit $?" >>"$dest/$name.log"
    # The log names the output folder, which differs between runs by design.
    sed -i "s#$dest#DEST#g" "$dest/$name.log"
}
for f in stacks/Pulumi.*.yaml; do
    s=${f#stacks/Pulumi.}; s=${s%.yaml}
    plan "stack-$s" "$s"
done
recipes=$(npx --no-install tsx -e 'import { ALL_RECIPE_NAMES } from "./components/config"; console.log(ALL_RECIPE_NAMES.join(" "))')
for r in $recipes; do
    for t in kubernetes docker; do plan "recipe-$r-$t" --recipe "$r" --target "$t"; done
done
ls "$dest" | grep -c '\.log$' | sed 's/^/plans: /'
grep -l -v '^exit 0$' "$dest"/*.log | xargs -r grep -H '^exit [1-9]' || true
