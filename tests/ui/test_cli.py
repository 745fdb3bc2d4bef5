"""``repertory ui`` as a real process: the web UI alone, behind its login form, until Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
COMMAND = Path(sys.executable).with_name("repertory")


async def test_repertory_ui_serves_the_ui_alone(tmp_path: Path) -> None:
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        *(str(COMMAND), "ui", "--port", "0", "--agents", "tests.ui.agents:make_agents", "--log-level", "warning"),
        *("--store", f"sqlite:///{tmp_path / 'ui.db'}", "--api-key", "dana=dana-secret"),
        cwd=ROOT,
        env=environ,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        line = ""
        while "listening on " not in line:
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert line, f"repertory ui exited with {await proc.wait()} before it listened"
        assert line.startswith("repertory ui: listening on ")
        url = line.split("listening on ")[1].split()[0]
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/")).headers["location"] == "/ui/"
            assert (await client.get("/ui/")).headers["location"].startswith("/ui/login")
            assert (await client.get("/ui/login")).status_code == 200
            assert (await client.get("/info")).status_code == 404  # the HTTP API is not served
    finally:
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
