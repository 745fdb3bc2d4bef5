"""The JavaScript clients' node projects under tests/: node found (or the test skipped), ``npm ci`` when stale.

``scripts/system-deps`` installs every committed lockfile before a run; a test calls ``installed``
too, so one run alone after a lockfile changed still gets the clients it pins.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["installed", "node"]


def node(what: str) -> str:
    """The node binary; the test is skipped, saying why, where node is not installed."""
    found = shutil.which("node")
    if found is None:
        pytest.skip(f"node is not installed: {what} needs node and npm (.ci/run installs them)")
    return found


def installed(js: Path) -> None:
    """``npm ci`` in ``js`` unless its ``node_modules`` is there and as new as its lockfile."""
    marker, lock = js / "node_modules" / ".package-lock.json", js / "package-lock.json"
    if marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime:
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("node is installed but npm is not: install npm (apt-get install npm) to fetch the JS clients")
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"],
        cwd=js,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
