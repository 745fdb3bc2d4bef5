"""``repertory serve --otlp-endpoint`` and ``repertory demo --otlp-endpoint``, as real processes, into a collector."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx

from tests.tracing.collector import Collector

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; from repertory.cli import app; sys.argv[0] = 'repertory'; app()"]
CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def _cli(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    # Only the variables the test chooses: none of this machine's OTEL_* settings leak in.
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        cwd=ROOT,
        env={**environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _listening(proc: asyncio.subprocess.Process) -> str:
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        if not line:
            raise AssertionError(f"repertory serve exited with {await proc.wait()} before it listened")
        if "listening on " in line:
            return line.split("listening on ")[1].split()[0]


async def _serve_and_run(tmp_path: Path, args: list[str], env: dict[str, str] | None = None) -> None:
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    proc = await _cli(
        "serve", "--port", "0", "--agents", "tests.http.agents:make_agents", "--store", store, *args, env=env
    )
    try:
        url = await _listening(proc)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            tid = (await client.post("/threads", json={})).json()["thread_id"]
            body = {"assistant_id": "assistant", "input": {"messages": [{"role": "human", "content": "research x"}]}}
            got = await client.post(f"/threads/{tid}/runs/wait", json=body, headers={"traceparent": CALLER})
            assert got.status_code == 200, got.text
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the server stops and the exporter flushes at exit
        await asyncio.wait_for(proc.communicate(), 60)


def _caller_trace(collector: Collector) -> list[str]:
    return [s.name for s in collector.spans if s.trace_id == CALLER.split("-")[1]]


async def test_serve_exports_to_the_otlp_endpoint_continuing_the_caller_trace(tmp_path: Path) -> None:
    async with Collector() as collector:
        await _serve_and_run(tmp_path, ["--otlp-endpoint", collector.endpoint])
        await collector.wait_for(lambda got: any(s.name == "invoke_agent assistant" for s in got))
    names = _caller_trace(collector)
    assert {"turn assistant", "invoke_agent assistant", "chat scripted", "execute_tool lookup"} <= set(names)
    assert any(s.resource.get("service.name") == "repertory" for s in collector.spans)


async def test_serve_reads_the_standard_otlp_variable(tmp_path: Path) -> None:
    async with Collector() as collector:
        await _serve_and_run(tmp_path, [], env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint})
        await collector.wait_for(lambda got: any(s.name == "invoke_agent assistant" for s in got))
    assert "turn assistant" in _caller_trace(collector)


async def test_demo_exports_its_fleet_spans(tmp_path: Path) -> None:
    async with Collector() as collector:
        proc = await _cli(
            "demo", "--backend", "local", "--sessions", "1", "--delay", "0",
            "--store", f"sqlite:///{tmp_path / 'demo.db'}", "--out", str(tmp_path / "export"),
            "--otlp-endpoint", collector.endpoint,
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode(errors="replace")
        spans = await collector.wait_for(lambda got: any(s.name.startswith("invoke_agent") for s in got))
    assert {s.name.split()[0] for s in spans} >= {"turn", "invoke_agent", "chat", "execute_tool"}


async def test_a_bad_otlp_endpoint_is_one_error_line_before_anything_starts() -> None:
    for command in (["serve", "--port", "0"], ["demo", "--backend", "local"]):
        proc = await _cli(*command, "--otlp-endpoint", "localhost:4318")
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 2, err.decode(errors="replace")
        assert err.decode().strip() == (
            "error: --otlp-endpoint: an OTLP/HTTP endpoint is an http:// or https:// URL, not 'localhost:4318'"
        )
