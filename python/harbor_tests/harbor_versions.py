"""Which Harbor runs these tests, and what it can hold beside it.

test/harbor/run-tests.sh runs them in the fixture's venv (python/requirements-harbor.txt: harbor 0.25.0 with
openenv 0.10.0, the training path's); the environment's own tests run in a venv of
python/requirements-harbor-eval.txt too (harbor 0.26.0, the evaluation venv, docs/guides/harbor.md "Harbor
0.25 and 0.26: two venvs"). openenv 0.10.0 requires fastmcp<4 and harbor 0.26.0 fastmcp>=4.1.6,<5 (their
published metadata), so no harbor 0.26 venv holds openenv: the tests of openenv's trial config (marker
`needs_openenv`) are deselected there by this module's hooks (a pytest plugin: run-tests.sh passes
-p harbor_versions), and named, not skipped: they run in the harbor 0.25 pass.
Under harbor 0.25 a missing openenv is a broken fixture, which fails.
"""

from __future__ import annotations

from importlib.metadata import version

import pytest
from packaging.version import Version

HARBOR_VERSION = Version(version("harbor"))
#: The first harbor whose fastmcp pin excludes openenv 0.10.0's.
HARBOR_WITHOUT_OPENENV = Version("0.26.0")

needs_openenv = pytest.mark.needs_openenv


def openenv_cannot_install() -> str | None:
    """Why openenv 0.10.0 cannot sit beside this harbor, or None."""
    if HARBOR_VERSION < HARBOR_WITHOUT_OPENENV:
        return None
    return (f"harbor {HARBOR_VERSION} needs fastmcp>=4.1.6,<5 and openenv 0.10.0 fastmcp<4: runs in the harbor 0.25 "
            "venv's pass (python/requirements-harbor.txt)")


_excluded: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if openenv_cannot_install() is None:
        return
    out = [i for i in items if i.get_closest_marker("needs_openenv") is not None]
    if not out:
        return
    items[:] = [i for i in items if i.get_closest_marker("needs_openenv") is None]
    config.hook.pytest_deselected(items=out)
    _excluded.extend(i.nodeid for i in out)


def pytest_terminal_summary(terminalreporter) -> None:
    if not _excluded:
        return
    terminalreporter.section("not in this venv: openenv's trial config (marker needs_openenv)")
    for nodeid in _excluded:
        terminalreporter.write_line(f"ELSEWHERE {nodeid}: {openenv_cannot_install()}")
