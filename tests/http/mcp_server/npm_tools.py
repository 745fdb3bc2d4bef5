"""The MCP clients from npm the server is tested against: the conformance suite and the inspector's CLI.

``js/`` is a node project with a committed lockfile (``scripts/system-deps`` and this module run
``npm ci`` there when ``node_modules`` is missing or older than the lock). It brings its own
Node 22 (the npm registry's ``node`` package): the inspector needs >= 22.19, newer than the
distribution's node that runs ``npm``. A machine without npm skips these tests, saying why.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

JS = Path(__file__).parent / "js"
BIN = JS / "node_modules" / ".bin"
_INSTALLED = JS / "node_modules" / ".package-lock.json"


async def _installed() -> None:
    lock = JS / "package-lock.json"
    if _INSTALLED.exists() and _INSTALLED.stat().st_mtime >= lock.stat().st_mtime:
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the MCP conformance and inspector tests need it (scripts/system-deps)")
    proc = await asyncio.create_subprocess_exec(
        npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", cwd=JS, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 600)
    assert proc.returncode == 0, f"npm ci failed:\n{out.decode()}"


async def run_js(tool: str, *args: str, limit_s: float = 300) -> tuple[int, str, str]:
    """Run ``tool`` (a bin of the project) under the project's Node 22; ``(exit status, stdout, stderr)``."""
    await _installed()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "node"), str(BIN / tool), *args, cwd=JS, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), limit_s)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
