"""``repertory serve`` as a real process: API keys (401/403, principals), OpenAPI, Ctrl-C, and bad input."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import AuthenticationError, PermissionDeniedError
from typer.testing import CliRunner

from repertory.cli import app
from tests.http.conftest import human, obj

ROOT = Path(__file__).resolve().parents[2]
COMMAND = Path(sys.executable).with_name("repertory")
AGENTS = "tests.http.agents:make_agents"


async def _serve(
    *args: str, env: dict[str, str] | None = None, agents: str = AGENTS, said: list[str] | None = None
) -> tuple[asyncio.subprocess.Process, str]:
    """Start ``repertory serve --port 0 ...`` and return it with its URL, read from its start-up line.

    What it writes on stderr afterwards goes into ``said`` (when given) as it arrives.
    """
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        str(COMMAND),
        "serve",
        "--port",
        "0",
        "--agents",
        agents,
        "--log-level",
        "warning",
        *args,
        cwd=ROOT,
        env=environ,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        if not line:
            raise AssertionError(f"repertory serve exited with {await proc.wait()} before it listened")
        if "listening on " in line:
            _DRAINS.add(asyncio.ensure_future(_drain(proc.stderr, said)))  # a full pipe would stall the server
            return proc, line.split("listening on ")[1].split()[0]


_DRAINS: set[asyncio.Future[None]] = set()


async def _drain(stream: asyncio.StreamReader, said: list[str] | None) -> None:
    while line := await stream.readline():
        if said is not None:
            said.append(line.decode())


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[str]:
    """``repertory serve`` on SQLite with two named keys: a user (carol) and a mod (linter, an admin key)."""
    proc, url = await _serve(
        "--store",
        f"sqlite:///{tmp_path / 'serve.db'}",
        "--api-key",
        "carol=carol-secret-0123456789",
        "--admin-key",
        "mod:linter=linter-secret-0123456789",
        "--cors-origin",
        "http://localhost:3000",
    )
    try:
        yield url
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), 60)


async def test_keys_principals_and_openapi(served: str) -> None:
    async with httpx.AsyncClient(base_url=served) as raw:
        info = await raw.get("/info")
        assert info.status_code == 200 and info.json()["auth"] is True
        assert (await raw.get("/openapi.json")).status_code == 401
        bearer = {"Authorization": "Bearer carol-secret-0123456789"}
        document = (await raw.get("/openapi.json", headers=bearer)).json()
        assert {"/threads", "/threads/{thread_id}/runs/stream", "/runs/wait", "/info"} <= set(document["paths"])
        assert (await raw.post("/threads", json={}, headers=bearer)).status_code == 200
        # A browser page on agent-chat-ui's origin may call the API (the preflight needs no key).
        preflight = await raw.options(
            "/threads",
            headers={
                "Origin": "http://localhost:3000",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "x-api-key",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "http://localhost:3000"
        created = await raw.post("/threads", json={}, headers={**bearer, "Origin": "http://localhost:3000"})
        assert "Content-Location" not in created.headers  # only runs carry it
        assert created.headers["access-control-allow-origin"] == "http://localhost:3000"

    async with get_client(url=served, api_key=None) as anonymous:
        with pytest.raises(AuthenticationError):
            await anonymous.threads.create()
    async with get_client(url=served, api_key="wrong") as stranger:
        with pytest.raises(PermissionDeniedError):
            await stranger.threads.search()

    async with get_client(url=served, api_key="carol-secret-0123456789") as carol:
        thread = await carol.threads.create()
        values = obj(await carol.runs.wait(thread["thread_id"], "assistant", input=human("hello from carol")))
        assert values["messages"][0]["additional_kwargs"]["origin"] == {"kind": "user", "id": "carol"}
    async with get_client(url=served, api_key="linter-secret-0123456789") as linter:  # an admin key: carol's thread too
        values = obj(await linter.runs.wait(thread["thread_id"], "assistant", input=human("hello from the linter")))
        assert values["messages"][2]["additional_kwargs"]["origin"] == {"kind": "mod", "id": "linter"}
        assert obj((await linter.threads.get(thread["thread_id"]))["metadata"])["graph_id"] == "assistant"


async def test_keys_from_the_environment_and_ctrl_c(tmp_path: Path) -> None:
    proc, url = await _serve(
        "--store", f"sqlite:///{tmp_path / 'stop.db'}", env={"REPERTORY_API_KEYS": "dave-secret-0123456789"}
    )
    async with get_client(url=url, api_key="dave-secret-0123456789") as client:
        thread = await client.threads.create()
        values = obj(await client.runs.wait(thread["thread_id"], "assistant", input=human("hello")))
        origin = values["messages"][0]["additional_kwargs"]["origin"]
        assert origin["kind"] == "user" and origin["id"].startswith("key-") and "dave" not in origin["id"]
    proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(proc.wait(), 60) == 0


def _error_line(result: Any) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return str(lines[0])


def test_bad_input_is_one_error_line() -> None:
    runner = CliRunner()
    assert "--backend must be local or ray" in _error_line(runner.invoke(app, ["serve", "--backend", "mars"]))
    assert "cannot import agents" in _error_line(runner.invoke(app, ["serve", "--agents", "nowhere.at_all:x"]))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        line = _error_line(runner.invoke(app, ["serve", "--agents", AGENTS, "--port", port]))
        assert f"cannot listen on 127.0.0.1:{port}" in line
    line = _error_line(runner.invoke(app, ["serve", "--agents", AGENTS, "--port", "0", "--store", "nosuch://x"]))
    assert "nosuch" in line


async def test_an_owner_budget_caps_that_owners_runs_and_survives_a_restart(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'budget.db'}"
    keys = ("--api-key", "carol=carol-secret-0123456789", "--api-key", "dave=dave-secret-0123456789")
    proc, url = await _serve("--store", store, *keys, "--budget", "carol=max_model_requests=2")
    async with get_client(url=url, api_key="carol-secret-0123456789") as carol:
        thread = await carol.threads.create()
        for text in ("one", "two"):
            values = obj(await carol.runs.wait(thread["thread_id"], "assistant", input=human(text)))
            assert "__error__" not in values
        # langgraph-sdk raises a failed run's __error__ as an Exception naming the error's type.
        with pytest.raises(Exception, match=r"BudgetExceeded: the budget of owner:carol is spent"):
            await carol.runs.wait(thread["thread_id"], "assistant", input=human("three"))
    async with get_client(url=url, api_key="dave-secret-0123456789") as dave:  # another owner: not capped
        other = await dave.threads.create()
        for text in ("one", "two", "three"):
            assert "__error__" not in obj(await dave.runs.wait(other["thread_id"], "assistant", input=human(text)))
    proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(proc.wait(), 60) == 0

    # The spend is in the store: a restarted server with the same budget still refuses carol, and
    # one started with a larger budget lets her go on from what she spent.
    proc, url = await _serve("--store", store, *keys, "--budget", "carol=max_model_requests=3")
    try:
        async with get_client(url=url, api_key="carol-secret-0123456789") as carol:
            thread = await carol.threads.create()
            assert "__error__" not in obj(await carol.runs.wait(thread["thread_id"], "assistant", input=human("3")))
            with pytest.raises(Exception, match=r"BudgetExceeded: .* max_model_requests=3, used 3"):
                await carol.runs.wait(thread["thread_id"], "assistant", input=human("4"))
    finally:
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 60) == 0


def test_a_malformed_budget_is_one_error_line() -> None:
    runner = CliRunner()
    for spec, said in (
        ("carol", "expected OWNER="),
        ("carol=max_cst=1", "unknown field 'max_cst'"),
        ("carol=max_cost=lots", "max_cost: Input should be a valid number"),
        ("carol=warn_at=0.5", "caps at least one of"),
    ):
        line = _error_line(runner.invoke(app, ["serve", "--agents", AGENTS, "--port", "0", "--budget", spec]))
        assert "--budget" in line and said in line, line
    twice = ["--budget", "carol=max_cost=1", "--budget", "carol=max_cost=2"]
    assert "two budgets" in _error_line(runner.invoke(app, ["serve", "--agents", AGENTS, "--port", "0", *twice]))
