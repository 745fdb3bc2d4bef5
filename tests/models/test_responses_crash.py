"""Re-attach under real crashes: a worker streaming background responses is SIGKILLed mid-reply, again and again.

The Responses server runs in its own process (``responses_server.py``: background mode as documented,
counting ``POST /responses``); the worker (``_responses_crash_worker.py``) runs turns on a SQLite file
with ``OpenAIResponsesModel(background=True)``. Each kill lands after a response's id was committed
and some of its text was sent; the next worker re-drives the run, which re-attaches to the response
(``GET /responses/{id}?stream=true&starting_after=n``) instead of asking again. At the end: one
``POST /responses`` per model step of every run, every stored reply is what the server generated,
and the log's deltas of each reply spell it exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from repertory import Runtime
from repertory.core.messages import ToolCallPart

from ._responses_crash_worker import build_agent

ROOT = Path(__file__).resolve().parents[2]
KILLS = 10
WAIT = 60.0


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _line(proc: subprocess.Popen[bytes], starts: str) -> str:
    """The next line of ``proc`` that starts with ``starts`` (the child's own progress report)."""
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline().decode()
        if line.startswith(starts):
            return line.strip()
        if not line:
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"{proc.args!r} ended before saying {starts!r}:\n{err.decode(errors='replace')[-3000:]}")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=WAIT) as answer:
        return json.loads(answer.read())


def test_sigkilled_mid_reply_ten_times_one_post_per_step_and_the_stored_replies_are_the_generated_ones(
    tmp_path: Path,
) -> None:
    server = _spawn("tests.models.responses_server")
    try:
        url = _line(server, "http://")
        seed = int(os.environ.get("CRASH_SEED", random.randrange(1 << 30)))
        rng = random.Random(seed)
        db = tmp_path / "runs.db"
        for kill in range(KILLS):
            worker = _spawn("tests.models._responses_crash_worker", str(db), url)
            _line(worker, "ready")
            _line(worker, "committed ")  # a response's id is durable: from here a kill is mid-reply
            more = rng.randint(0, 36)  # a reply is 41 text deltas: kills land before, between and after writes
            if more:
                _get(f"{url.removesuffix('/v1')}/wait?deltas={more}")
            os.kill(worker.pid, signal.SIGKILL)
            _, err = worker.communicate()
            assert worker.returncode == -signal.SIGKILL, f"seed {seed}, kill {kill}: {err.decode(errors='replace')}"
        asyncio.run(_verify(db, url, seed))
    finally:
        server.kill()
        server.communicate()


async def _verify(db: Path, url: str, seed: int) -> None:
    base = url.removesuffix("/v1")
    async with await Runtime.start(store=f"sqlite:///{db}", agents={"a": build_agent(url, announce=False)}) as rt:
        store = rt.store
        replies: dict[str, str] = {}  # stored assistant message: the response it came from -> its text
        steps = 0
        for record in await store.list_sessions():
            handle = await rt.session(record.session_id)
            for turn in await store.list_turns(record.session_id):
                result = await asyncio.wait_for(handle.get_turn(turn.submission_id).result(), WAIT)
                assert result.status == "done", f"seed {seed}: turn {turn.submission_id} ended {result.status}"
            thread = await store.load_thread(record.session_id)
            assert thread is not None and thread.history_revision_id is not None
            history = await store.load_history(thread.history_revision_id)
            assert history is not None
            log = await store.load_events(record.session_id)
            assert not [e for e in log if e.type == "reply.retracted"], f"seed {seed}: a reply was retracted"
            for revision in history.lineage():
                entry = history.entry(revision.entry_id)
                assert entry is not None
                message = entry.message
                if message.role != "assistant":
                    continue
                steps += 1
                calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
                if calls:
                    response_id = calls[0].tool_call_id.removeprefix("call_")
                    text = ""
                else:
                    found = re.match(r"\[(resp_\d+)\] ", message.text)
                    assert found, f"seed {seed}: a stored reply no response wrote: {message.text!r}"
                    response_id, text = found.group(1), message.text
                assert response_id not in replies, f"seed {seed}: {response_id} stored twice"
                replies[response_id] = text
                streamed = "".join(
                    e.data["text"] for e in log if e.type == "text.delta" and e.data["message_id"] == entry.id
                )
                assert streamed == text, f"seed {seed}: the log's deltas of {response_id} spell {streamed!r}"
    stats = await asyncio.to_thread(_get, f"{base}/stats")
    assert not stats["problems"], f"seed {seed}: {stats['problems']}"
    posts = len(stats["posts"])
    assert posts == steps, f"seed {seed}: {posts} POST /responses for {steps} model steps"
    assert sorted(replies) == sorted(f"resp_{n}" for n in range(1, posts + 1))
    for response_id, text in replies.items():
        assert text == stats["texts"][response_id], f"seed {seed}: {response_id} stored {text!r}"
    assert len(stats["reads"]) >= KILLS, f"seed {seed}: only {len(stats['reads'])} re-attaches for {KILLS} kills"
