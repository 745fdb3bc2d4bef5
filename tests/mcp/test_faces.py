"""Agents carrying MCP servers through the faces: the ``repertory`` CLI and ``repertory serve``.

Both load ``--agents tests.mcp.agents:make_agents``; the server is started by the process that
runs the agent and stopped when that process closes its runtime.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from typer.testing import CliRunner

from repertory import Runtime
from repertory.cli import app
from tests.http.conftest import human
from tests.mcp.agents import LOG_ENV, make_agents
from tests.mcp.helpers import ROOT, calls, process_alive

AGENTS = "tests.mcp.agents:make_agents"
COMMAND = Path(sys.executable).with_name("repertory")


def test_the_cli_approves_a_pending_mcp_call_and_it_is_sent_once(
    tmp_path: Path, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_ENV, str(log))
    store = f"sqlite:///{tmp_path / 'cli.db'}"

    async def suspended() -> str:
        async with await Runtime.start(store=store, agents=make_agents()) as rt:
            h = await rt.create_session(agent="ops")
            assert (await h.run("charge 12")).status == "suspended"
            [pending] = await h.pending_approvals()
            return pending.token

    token = asyncio.run(suspended())
    assert calls(log, "charge") == []
    done = CliRunner().invoke(app, ["approvals", "approve", token, "--store", store, "--agents", AGENTS])
    assert done.exit_code == 0, done.output
    assert ": done" in done.stdout
    assert [c["args"]["amount"] for c in calls(log, "charge")] == [12]
    [server_pid] = {c["pid"] for c in calls(log)}
    assert not process_alive(server_pid)  # the command's process closed the connection on its way out


async def test_repertory_serve_runs_mcp_tools_and_stops_the_server_with_it(tmp_path: Path, log: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), LOG_ENV: str(log)}
    proc = await asyncio.create_subprocess_exec(
        str(COMMAND),
        "serve",
        "--port",
        "0",
        "--agents",
        AGENTS,
        "--store",
        f"sqlite:///{tmp_path / 'serve.db'}",
        "--log-level",
        "warning",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    url = ""
    while not url:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        if not line:
            raise AssertionError(f"repertory serve exited with {await proc.wait()} before it listened")
        if "listening on " in line:
            url = line.split("listening on ")[1].split()[0]
    drain = asyncio.ensure_future(proc.stderr.read())  # a full pipe would stall the server
    try:
        async with get_client(url=url, api_key=None) as client:
            thread = await client.threads.create()
            values = await client.runs.wait(thread["thread_id"], "ops", input=human("whoami"))
            assert isinstance(values, dict)
            reply = values["messages"][-1]["content"]
            server_pid, parent = (int(x) for x in str(reply).removeprefix("result: ").split())
            assert parent == proc.pid  # the serve process started the server
            assert process_alive(server_pid)
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 60)
        await drain
    assert not process_alive(server_pid)  # stopped with the runtime
