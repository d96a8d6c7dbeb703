"""Which Harbor runs these tests, and what it can hold beside it.

test/harbor/run-tests.sh runs them in the fixture's venv (python/requirements-harbor.txt: harbor 0.25.0 with
openenv 0.10.0, the training path's); the environment's own tests run in a venv of
python/requirements-harbor-eval.txt too (harbor 0.26.0, the evaluation venv, docs/guides/harbor.md "Harbor
0.25 and 0.26: two venvs"). openenv 0.10.0 requires fastmcp<4 and harbor 0.26.0 fastmcp>=4.1.6,<5 (their
published metadata), so no harbor 0.26 venv holds openenv: the tests of openenv's trial config skip there,
and only there (under harbor 0.25 a missing openenv is a broken fixture, which fails).
"""

from __future__ import annotations

from importlib.metadata import version

import pytest
from packaging.version import Version

HARBOR_VERSION = Version(version("harbor"))
#: The first harbor whose fastmcp pin excludes openenv 0.10.0's.
HARBOR_WITHOUT_OPENENV = Version("0.26.0")

needs_openenv = pytest.mark.skipif(
    HARBOR_VERSION >= HARBOR_WITHOUT_OPENENV,
    reason=f"harbor {HARBOR_VERSION} needs fastmcp>=4.1.6,<5 and openenv 0.10.0 fastmcp<4: the training path's "
    "trial config runs in the harbor 0.25 venv (python/requirements-harbor.txt)",
)
