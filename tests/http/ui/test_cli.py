"""``repertory ui`` as a real process: the web UI alone, behind its login form, until Ctrl-C; admin keys see all."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx

from repertory import Runtime
from tests.http.ui.agents import make_agents
from tests.http.ui.conftest import form_token

ROOT = Path(__file__).resolve().parents[3]
COMMAND = Path(sys.executable).with_name("repertory")


async def _sees(client: httpx.AsyncClient, key: str, title: str) -> bool:
    """Log in with ``key`` and say whether the sessions list shows ``title``."""
    token = form_token((await client.get("/ui/login")).text)
    answer = await client.post("/ui/login", data={"csrf": token, "key": key, "next": "/ui/"})
    assert answer.status_code == 303, answer.text
    return title in (await client.get("/ui/")).text


async def test_repertory_ui_serves_the_ui_alone(tmp_path: Path) -> None:
    async with await Runtime.start(store=f"sqlite:///{tmp_path / 'ui.db'}", agents=make_agents()) as rt:
        await rt.create_session(agent="assistant", title="erin's own", owner="erin")
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        *(str(COMMAND), "ui", "--port", "0", "--agents", "tests.http.ui.agents:make_agents", "--log-level", "warning"),
        *("--store", f"sqlite:///{tmp_path / 'ui.db'}", "--api-key", "dana=dana-secret-0123456789"),
        *("--admin-key", "ops=ops-secret-0123456789"),
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
        async with httpx.AsyncClient(base_url=url) as client:
            assert not await _sees(client, "dana-secret-0123456789", "erin&#39;s own")  # another owner's session
        async with httpx.AsyncClient(base_url=url) as client:
            assert await _sees(client, "ops-secret-0123456789", "erin&#39;s own")  # the admin key sees all
    finally:
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
