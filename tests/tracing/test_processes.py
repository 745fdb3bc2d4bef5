"""One trace per run across processes: spans exported over OTLP/HTTP to a loopback collector.

A run suspends in one process and is approved in another; a run is SIGKILLed mid-tool and
recovered by another process. Each child configures its exporter from ``OTEL_EXPORTER_OTLP_*``
(``repertory.tracing.configure_from_env``, as ``repertory serve`` and Ray hosts do) and the test
reads what arrived at its collector. The processes are told apart by the ``process.pid`` resource
attribute.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tests.tracing.collector import Collector, GotSpan

ROOT = Path(__file__).resolve().parents[2]


async def _spawn(collector: Collector, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.tracing._worker",
        *args,
        cwd=ROOT,
        env={**os.environ, **collector.env()},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _finish(proc: asyncio.subprocess.Process) -> list[str]:
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode(errors="replace")
    return out.decode().splitlines()


def _of_run(spans: list[GotSpan], run_id: str) -> list[GotSpan]:
    """The run's spans: those naming it, and everything under them."""
    ids = {s.span_id for s in spans if s.attributes.get("repertory.run_id") == run_id}
    grew = True
    while grew:
        more = {s.span_id for s in spans if s.parent_id in ids} - ids
        ids |= more
        grew = bool(more)
    return [s for s in spans if s.span_id in ids]


def _everything(spans: list[GotSpan]) -> str:
    return json.dumps([(s.name, s.attributes, s.events, s.links, s.resource) for s in spans], default=str)


async def test_a_run_suspended_in_one_process_and_approved_in_another_is_one_trace(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    async with Collector() as collector:
        first = json.loads((await _finish(await _spawn(collector, "suspend", db)))[0])
        assert (await _finish(await _spawn(collector, "approve", db, first["run_id"], first["token"])))[-1] == "done"
        spans = await collector.wait_for(lambda got: any(s.name == "approver" for s in got))

    run = _of_run(spans, first["run_id"])
    pids = {s.resource["process.pid"] for s in run}
    assert len(pids) == 2, "the run's spans came from both processes"
    assert len({s.trace_id for s in run}) == 1
    asker = next(s for s in spans if s.name == "asker")
    approver = next(s for s in spans if s.name == "approver")
    assert approver.trace_id != asker.trace_id == run[0].trace_id
    started, approved = (
        next(s for s in run if s.name == "invoke_agent clerk" and s.attributes["repertory.drive.cause"] == cause)
        for cause in ("start", "approve")
    )
    assert started.parent_id == asker.span_id and started.attributes["repertory.run.status"] == "suspended"
    assert started.resource["process.pid"] != approved.resource["process.pid"]
    assert approved.parent_id == started.span_id  # the anchor stored in the run row
    assert [(trace_id, span_id) for trace_id, span_id, _ in approved.links] == [(approver.trace_id, approver.span_id)]
    wait = next(s for s in run if s.name == "approval wire")
    assert wait.parent_id == started.span_id and wait.attributes["repertory.approval.decision"] == "approved"
    assert any(s.name == "execute_tool wire" and s.parent_id == approved.span_id for s in run)
    assert approved.attributes["repertory.run.status"] == "done"
    assert first["token"] not in _everything(spans)


async def test_a_run_killed_mid_tool_is_recovered_by_another_process_in_its_trace(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    async with Collector() as collector:
        victim = await _spawn(collector, "hang", db)
        assert victim.stdout is not None
        line = await asyncio.wait_for(victim.stdout.readline(), 60)
        assert line.strip() == b"started"
        # The first model request's span ended before the tool started; it is exported (within
        # OTEL_BSP_SCHEDULE_DELAY) while the tool waits, and then the process dies.
        before = await collector.wait_for(lambda got: any(s.name == "chat scripted" for s in got))
        victim.kill()
        await victim.wait()
        [chat] = before
        run_id = await _running_run(db)
        assert (await _finish(await _spawn(collector, "recover", db, run_id)))[-1] == "done"
        spans = await collector.wait_for(
            lambda got: any(s.attributes.get("repertory.drive.cause") == "recover" for s in got)
        )

    [recovered] = [s for s in spans if s.name == "invoke_agent hanger"]  # the killed drive never ended
    assert recovered.attributes["repertory.drive.cause"] == "recover"
    assert recovered.resource["process.pid"] != chat.resource["process.pid"]
    assert recovered.trace_id == chat.trace_id
    assert recovered.parent_id == chat.parent_id  # both under the killed drive's span: the run's anchor
    assert [s.name for s in spans if s.parent_id == recovered.span_id] == ["chat scripted"]  # no second tool run
    assert recovered.attributes["repertory.run.status"] == "done"


async def _running_run(db: str) -> str:
    from repertory import SqliteSessionStore

    store = await SqliteSessionStore.open(db)
    try:
        [run] = [r for r in await store.list_runs() if r.status == "running"]
        assert run.traceparent is not None
        return run.run_id
    finally:
        await store.close()
