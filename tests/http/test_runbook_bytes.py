"""The run book remembers runs by bytes: a tenant's large requests cannot grow the server's memory without bound.

Issue 39, finding 5: the book kept the request bodies of the last 10,000 runs whatever their size,
so 200 runs with a 0.9 MB context each held 183 MB. Now each remembered run costs what it keeps
(its request's metadata and kwargs as JSON, plus ``ENTRY_OVERHEAD``), the oldest are forgotten
first, and a run whose request alone exceeds the budget is kept slim (its routes still answer).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from repertory import Principal, Runtime
from repertory.core.tree import SessionRecord
from repertory.http.auth import Caller
from repertory.http.gateway import Gateway
from repertory.http.limits import DEFAULT_LIMITS, ServerLimits
from repertory.http.runbook import ENTRY_OVERHEAD, RunBook
from repertory.http.schemas import RunCreate
from tests.http.agents import make_agents
from tests.http.conftest import ServerThread, human

ALICE = Caller(Principal.user("alice"), "alice-stream-name", owner="alice")
CONTEXT = "x" * 900_000  # a 0.9 MB context, as the probe sent


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    """A gateway over a memory-store runtime serving the HTTP tests' scripted agents."""
    runtime = await Runtime.start(store="memory://", agents=make_agents())
    gw = Gateway(runtime)
    try:
        yield gw
    finally:
        await gw.close()
        await runtime.close()


async def _thread(gw: Gateway) -> SessionRecord:
    return await gw.create_thread(ALICE, thread_id=None, metadata=None, if_exists=None, agent="assistant")


def _run(text: str, **extra: object) -> RunCreate:
    return RunCreate.model_validate({"assistant_id": "assistant", "input": human(text), **extra})


async def test_200_runs_with_a_large_context_keep_the_book_within_its_budget(gateway: Gateway) -> None:
    book = RunBook(gateway)
    assert book.budget_bytes == DEFAULT_LIMITS.run_book_bytes == 64 << 20
    record = await _thread(gateway)
    started = [await book.start(ALICE, record, _run(f"hello {i}", context={"blob": CONTEXT})) for i in range(200)]
    assert book.held_bytes <= book.budget_bytes
    views = [await book.view(await book.locate(ALICE, record.session_id, run.run_id)) for run in started]
    kept = [i for i, view in enumerate(views) if view["kwargs"].get("context") == {"blob": CONTEXT}]
    # The newest are remembered whole, as many as fit, and the oldest forgotten first.
    assert kept == list(range(200 - len(kept), 200))
    assert 60 <= len(kept) <= (64 << 20) // 900_000
    # A forgotten run still answers, from its turn: its status, with {} for what only the book held.
    oldest = views[0]
    assert oldest["run_id"] == started[0].run_id and oldest["kwargs"] == {} and oldest["metadata"] == {}


async def test_a_run_larger_than_the_whole_budget_is_kept_slim_and_still_answers(gateway: Gateway) -> None:
    book = RunBook(gateway, budget_bytes=100_000)
    record = await _thread(gateway)
    small = await book.start(ALICE, record, _run("hello small", metadata={"tag": "small"}))
    big = await book.start(ALICE, record, _run("hello big", context={"blob": CONTEXT}, metadata={"tag": "big"}))
    assert book.held_bytes <= book.budget_bytes
    found = await book.locate(ALICE, record.session_id, big.run_id)
    # Slim: what the store cannot say (where its events start, its modes) is still known; its bulk is not.
    assert (found.start_seq, found.modes, found.submission_id) == (big.start_seq, big.modes, big.submission_id)
    assert found.kwargs == {} and found.metadata == {}
    assert (await book.view(found))["run_id"] == big.run_id
    # The small run before it was within the budget, so it is still remembered whole.
    again = await book.view(await book.locate(ALICE, record.session_id, small.run_id))
    assert again["metadata"] == {"tag": "small"}
    assert book.held_bytes >= 2 * ENTRY_OVERHEAD


@pytest.fixture(scope="module")
def small_book_server() -> Iterator[ServerThread]:
    """A keyless server whose run book holds 3 MB and whose bodies may be 2 MB."""
    limits = ServerLimits(run_book_bytes=3_000_000, max_body_bytes=2_000_000)
    server = ServerThread("memory://", limits=limits).start()
    yield server
    server.stop()


async def test_serve_sizes_its_run_book_from_the_server_limits(small_book_server: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=small_book_server.url, timeout=30) as http:
        thread = (await http.post("/threads", json={})).json()["thread_id"]
        runs = []
        for i in range(6):
            body = {"assistant_id": "assistant", "input": human(f"hello {i}"), "context": {"blob": CONTEXT}}
            answer = await http.post(f"/threads/{thread}/runs", json=body)
            assert answer.status_code == 200, answer.text
            runs.append(answer.json()["run_id"])
        first = await http.get(f"/threads/{thread}/runs/{runs[0]}")
        last = await http.get(f"/threads/{thread}/runs/{runs[-1]}")
    assert first.status_code == 200 and first.json()["kwargs"] == {}
    assert last.status_code == 200 and last.json()["kwargs"]["context"] == {"blob": CONTEXT}
