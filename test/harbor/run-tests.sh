#!/usr/bin/env bash
# The Harbor environment's tests (python/harbor_tests) with pytest in the Harbor fixture's venv
# (Python 3.13, harbor 0.25.0: test/harbor/build.sh, built here when missing). Extra arguments go
# to pytest (files or directories among them replace python/harbor_tests).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="$(bash "$here/build.sh" | tail -n 1)"
cd "$repo"
targets=(python/harbor_tests)
for a in "$@"; do [[ "$a" != -* && -e "$a" ]] && { targets=(); break; }; done
exec env PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$repo/python" "$python" -m pytest -c python/pyproject.toml --rootdir python "${targets[@]}" "$@"
