#!/bin/sh
# Lays out the sandbox image's additions under PREFIX (/ in the Dockerfile; a temp dir in
# python/tests/test_plan_contract.py, which then runs the pool template's exact command on it):
#   PREFIX/opt/agent-rl/runtime.py   the command runtime (PID 1 of every sandbox, port 8888)
#   PREFIX/opt/agent-rl/home/        the HOME skeleton the runtime mirrors into the HOME emptyDir:
#       .opencode/        opencode, copied from the stock image's HOME (the harness runs $HOME/.opencode/bin/opencode)
#       proxy/interception.py   the in-sandbox proxy, from the stock image (else the harness pip-installs it: egress is closed)
#       .config/opencode logs/agent logs/verifier task workdir   the dirs the harness writes into (its own
#                         install step, which creates them, is skipped when opencode is present)
# Everything readable by any uid (the pool runs as sandboxes.runAsUser, 65532 by default), nothing writable.
# usage: install-layout.sh STOCK_HOME RUNTIME_PY [PREFIX]
set -eu
stock_home=$1
runtime_py=$2
prefix=${3:-}
root="$prefix/opt/agent-rl"
seed="$root/home"
test -x "$stock_home/.opencode/bin/opencode" || { echo "no opencode at $stock_home/.opencode/bin/opencode: is the base the OpenEnv opencode sandbox image?" >&2; exit 1; }
test -f "$stock_home/proxy/interception.py" || { echo "no proxy at $stock_home/proxy/interception.py: is the base the OpenEnv opencode sandbox image?" >&2; exit 1; }
mkdir -p "$seed/.opencode" "$seed/proxy" "$seed/.config/opencode" "$seed/logs/agent" "$seed/logs/verifier" "$seed/task" "$seed/workdir"
cp -a "$stock_home/.opencode/." "$seed/.opencode/"
cp "$stock_home/proxy/interception.py" "$seed/proxy/interception.py"
cp "$runtime_py" "$root/runtime.py"
chmod -R a+rX,a-w "$root"
