"""``repertory serve``'s tenant bounds as options: --allow-webhook-host, --min-cron-interval, --max-crons-per-owner."""

from __future__ import annotations

import signal
from pathlib import Path

from langgraph_sdk import get_client
from typer.testing import CliRunner

from repertory.cli import app
from tests.http.conftest import human, refused
from tests.http.receiver import Receiver
from tests.http.test_serve import AGENTS, _error_line, _serve

KEY = "erin-secret-0123456789"


def test_a_bad_allowed_webhook_host_is_one_error_line() -> None:
    runner = CliRunner()
    for bad in ("http://127.0.0.1/", "user@host", "a b"):
        line = _error_line(runner.invoke(app, ["serve", "--agents", AGENTS, "--allow-webhook-host", bad]))
        assert line.startswith("error: --allow-webhook-host:") and "host name, an address or a CIDR" in line


async def test_the_options_set_where_webhooks_go_and_how_crons_are_bounded(tmp_path: Path) -> None:
    receiver = await Receiver().start()
    proc, url = await _serve(
        "--store", f"sqlite:///{tmp_path / 'bounds.db'}", "--api-key", f"erin={KEY}", "--webhook-secret", "s3cret",
        "--allow-webhook-host", "127.0.0.1", "--min-cron-interval", "3600", "--max-crons-per-owner", "1",
    )  # fmt: skip
    try:
        async with get_client(url=url, api_key=KEY) as erin:
            thread = await erin.threads.create()
            await erin.runs.wait(thread["thread_id"], "assistant", input=human("hi"), webhook=receiver.url)
            assert (await receiver.next()).json()["thread_id"] == thread["thread_id"]  # loopback, as allowed
            status, detail = await refused(
                erin.crons.create("assistant", schedule="*/30 * * * *", input=human("x"), webhook=receiver.url)
            )
            assert status == 422 and "3600 s" in detail
            await erin.crons.create("assistant", schedule="0 * * * *", input=human("x"), webhook=receiver.url)
            status, detail = await refused(erin.crons.create("assistant", schedule="0 9 * * *", input=human("y")))
            assert status == 422 and "max_crons_per_owner=1" in detail
            status, detail = await refused(  # allowed is 127.0.0.1, not the rest of loopback
                erin.crons.create("assistant", schedule="0 9 * * *", input=human("y"), webhook="http://127.0.0.2/")
            )
            assert status == 422 and "loopback" in detail
    finally:
        proc.send_signal(signal.SIGINT)
        await proc.wait()
        await receiver.close()
