#!/usr/bin/env bash
# The Harbor environment's tests (python/harbor_tests) with pytest in the Harbor fixture's venvs
# (Python 3.13, harbor 0.25.0 and harbor 0.26.0: test/harbor/build.sh, built here when missing). Extra arguments go
# to pytest (files or directories among them replace python/harbor_tests).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="$(bash "$here/build.sh" | tail -n 1)"
cd "$repo"
targets=(python/harbor_tests)
for a in "$@"; do [[ "$a" != -* && -e "$a" ]] && { targets=(); break; }; done
# Twice: harbor 0.25.0 with openenv (the training path's venv), then harbor 0.26.0 (the evaluation venv, eval/venv
# beside it: build.sh), where the tests of openenv's trial config are deselected and named (python/harbor_tests/harbor_versions.py, loaded as a plugin).
status=0
for py in "$python" "${python%/venv/bin/python}/eval/venv/bin/python"; do
  echo "== harbor $("$py" -c 'import importlib.metadata as m; print(m.version("harbor"))') ($py)"
  env PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$repo/python:$repo/python/harbor_tests" "$py" -m pytest -c python/pyproject.toml --rootdir python -p harbor_versions "${targets[@]}" "$@" || status=$?
done
exit "$status"
