#!/usr/bin/env bash
# The Python tests (python/tests), in a venv made once per requirements-test.txt under
# ${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/python-venv-<hash> (PyPI only; about 5.5 minutes
# and 8 GB the first time: the shared trainer-side lock, torch included). Extra arguments go to pytest
# (test files or directories among them replace the default, the whole python/ tree). See python/README.md for what
# each test needs (node + npm ci, nginx-light, root, OPENENV_SRC) and what it skips without.
# Without OpenEnv's source tree (OPENENV_SRC, default ~/.cache/agent-rl-infra/openenv-src/envs,
# holding opencode_env/harness.py) the tests marked openenv_source are deselected with
# -m "not openenv_source" and named at the end (not skips), unless the arguments hold their own
# -m or AGENT_RL_REQUIRE_E2E=1 (then they run and fail).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra"
hash="$(sha256sum "$here/requirements-test.txt" | cut -c1-12)"
venv="${AGENT_RL_PYTHON_VENV:-$cache/python-venv-$hash}"
python="${PYTHON:-python3}"
mkdir -p "$cache"
exec 9>"$cache/.python-venv.lock"
flock 9
if [[ ! -f "$venv/.complete" ]]; then
  "$python" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' >&2
  rm -rf "$venv"
  echo "[python/run-tests] creating $venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements-test.txt" >&2 || { rm -rf "$venv"; exit 1; }
  touch "$venv/.complete"
fi
flock -u 9
# --venv-only: make (or check) the venv and stop (npm test builds it with the other fixtures).
if [[ "${1:-}" == --venv-only ]]; then echo "$venv"; exit 0; fi
openenv_src="${OPENENV_SRC:-$HOME/.cache/agent-rl-infra/openenv-src/envs}"
if [[ ! -f "$openenv_src/opencode_env/harness.py" && "${AGENT_RL_REQUIRE_E2E:-}" != 1 ]]; then
  own_m=0
  for a in "$@"; do [[ "$a" == -m* ]] && own_m=1; done
  if [[ $own_m == 0 ]]; then
    echo "[python/run-tests] OpenEnv's opencode env not found under $openenv_src: deselecting the tests marked openenv_source" >&2
    set -- -m "not openenv_source" "$@"
  fi
fi
cd "$here/.."
# The whole python/ tree unless the arguments name test files or directories themselves; not
# python/harbor_tests (Python 3.13 with harbor: test/harbor/run-tests.sh runs them in their own venv).
targets=(python --ignore=python/harbor_tests)
for a in "$@"; do [[ "$a" != -* && -e "$a" ]] && { targets=(); break; }; done
exec env PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest "${targets[@]}" "$@"
