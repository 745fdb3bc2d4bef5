"""``repertory schedules list/cancel/disable/enable/timers`` through typer's runner, on a SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from repertory import Runtime
from repertory.cli import app
from repertory.testing import ManualClock
from tests.runtime.time.helpers import nap_agent

runner = CliRunner()


async def _fill(url: str) -> tuple[str, str]:
    clock = ManualClock()
    async with await Runtime.start(url, agents={"napper": nap_agent()}, clock=clock) as rt:
        h = await rt.create_session("napper")
        sched = await h.schedule("0 9 * * MON", "weekly report", tz="Europe/Berlin")
        slept = await h.run("nap")
        return sched.id, slept.run_id


def test_list_cancel_and_timers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    schedule_id, run_id = asyncio.run(_fill(url))
    listed = runner.invoke(app, ["schedules", "list", "--store", url])
    assert listed.exit_code == 0, listed.output
    assert schedule_id in listed.output and "0 9 * * MON" in listed.output and "Europe/Berlin" in listed.output
    assert "2026-01-05T08:00:00.000Z" in listed.output  # the first Monday, 09:00 in Berlin
    timers = runner.invoke(app, ["schedules", "timers", "--store", url])
    assert timers.exit_code == 0 and run_id in timers.output and "2026-01-01T01:00:00.000Z" in timers.output
    cancelled = runner.invoke(app, ["schedules", "cancel", schedule_id, "--store", url])
    assert cancelled.exit_code == 0 and schedule_id in cancelled.output
    assert schedule_id not in runner.invoke(app, ["schedules", "list", "--store", url]).output
    again = runner.invoke(app, ["schedules", "cancel", schedule_id, "--store", url])
    assert again.exit_code == 2 and "no schedule" in again.output


def test_disable_and_enable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    schedule_id, _ = asyncio.run(_fill(url))
    disabled = runner.invoke(app, ["schedules", "disable", schedule_id, "--store", url])
    assert disabled.exit_code == 0 and f"disabled schedule {schedule_id}" in disabled.output
    row = next(line for line in runner.invoke(app, ["schedules", "list", "--store", url]).output.splitlines()
               if schedule_id in line)  # fmt: skip
    assert " no " in row
    enabled = runner.invoke(app, ["schedules", "enable", schedule_id, "--store", url])
    assert enabled.exit_code == 0 and f"enabled schedule {schedule_id}" in enabled.output
    row = next(line for line in runner.invoke(app, ["schedules", "list", "--store", url]).output.splitlines()
               if schedule_id in line)  # fmt: skip
    assert " yes " in row  # next fire time: the first Monday 09:00 in Berlin after the wall clock's now
    missing = runner.invoke(app, ["schedules", "enable", "no-such-schedule", "--store", url])
    assert missing.exit_code == 2 and "no schedule" in missing.output
