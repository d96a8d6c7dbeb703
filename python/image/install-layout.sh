#!/bin/sh
# Lays out the sandbox image's additions under PREFIX (/ in the Dockerfile; a temp dir in
# python/tests/test_plan_contract.py, which then runs the pool template's exact command on it):
#   PREFIX/opt/agent-rl/runtime.py     the command runtime (PID 1 of every sandbox, port 8888)
#   PREFIX/opt/agent-rl/forwarder.py   the key-holding forwarder (the pod's other container, another uid)
#   PREFIX/opt/agent-rl/home/          the HOME skeleton the runtime mirrors into the HOME emptyDir (/root):
#       .opencode/        opencode, copied from the stock image's HOME (the harness runs $HOME/.opencode/bin/opencode)
#       proxy/interception.py   the in-sandbox proxy, when the base bakes it (OpenEnv revisions up to the one TRL
#                         pins; later ones upload it at rollout start, so it may be absent: then it is skipped)
#       .config/opencode logs/agent logs/verifier task workdir   the dirs the harness writes into (its own
#                         install step, which creates them, is skipped when opencode is present)
#   PREFIX/home/user -> /root   OpenEnv's default sandbox_home leads to TRL's (/root), the one HOME volume
# Everything readable by any uid (the pool runs as sandboxes.runAsUser, 65532 by default), nothing writable.
# usage: install-layout.sh STOCK_HOME RUNTIME_PY FORWARDER_PY [PREFIX]
set -eu
stock_home=$1
runtime_py=$2
forwarder_py=$3
prefix=${4:-}
root="$prefix/opt/agent-rl"
seed="$root/home"
test -x "$stock_home/.opencode/bin/opencode" || { echo "no opencode at $stock_home/.opencode/bin/opencode: is the base the OpenEnv opencode sandbox image?" >&2; exit 1; }
mkdir -p "$seed/.opencode" "$seed/.config/opencode" "$seed/logs/agent" "$seed/logs/verifier" "$seed/task" "$seed/workdir"
cp -a "$stock_home/.opencode/." "$seed/.opencode/"
if test -f "$stock_home/proxy/interception.py"; then
  mkdir -p "$seed/proxy"
  cp "$stock_home/proxy/interception.py" "$seed/proxy/interception.py"
else
  echo "install-layout: no proxy at $stock_home/proxy/interception.py: skipped (newer OpenEnv harnesses upload it at rollout start; an older one would pip-install it, which the egress policy blocks)" >&2
fi
cp "$runtime_py" "$root/runtime.py"
cp "$forwarder_py" "$root/forwarder.py"
chmod -R a+rX,a-w "$root"
# /home/user: a link to /root, unless the base already has something there.
mkdir -p "$prefix/home"
if test -L "$prefix/home/user"; then
  test "$(readlink "$prefix/home/user")" = /root || { echo "$prefix/home/user links elsewhere than /root" >&2; exit 1; }
elif test -d "$prefix/home/user"; then
  rmdir "$prefix/home/user" || { echo "$prefix/home/user is a non-empty directory: the base has a user there; HOME is /root" >&2; exit 1; }
  ln -s /root "$prefix/home/user"
else
  ln -s /root "$prefix/home/user"
fi
