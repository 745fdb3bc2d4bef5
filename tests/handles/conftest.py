"""The ``make_runtime`` fixture: every handle test runs once per runtime backend listed in ``BACKENDS``.

The handle suite is backend-agnostic: a test asks for ``make_runtime`` and calls it with its agents::

    async def test_something(make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(script.agent())            # a started Runtime, closed at teardown
        async with make_runtime({"a": agent_a}, idle_timeout=60) as rt:  # or scoped
            ...

Adding a backend is one more ``BackendSpec`` in ``BACKENDS``; every test here then runs against it too.
On ``ray-sqlite`` models and tools run in a session host process, so the doubles in ``helpers.py``
keep their state on a Ray actor (``board.py``) for the length of the test. ``store`` says where the data lives:
``memory`` (one in-memory store object per test), ``sqlite`` (a file in ``tmp_path``) or ``postgres``
(the session's throwaway server, truncated per test). Markers narrow a test's backends:

- ``@pytest.mark.durable``: only backends whose data outlives the ``Runtime`` (restart tests);
- ``@pytest.mark.stores("sqlite", ...)``: only backends on those stores (the load test).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import pytest

from repertory import Agent, InMemorySessionStore, Runtime, open_store
from repertory.storage import SessionStore, TreeStore
from tests.conformance.probes import history_row_counts
from tests.conftest import truncate_pg
from tests.handles.board import RayBoard, use_board

__all__ = ["BACKENDS", "BackendSpec", "RuntimeFactory"]

StoreKind = Literal["memory", "sqlite", "postgres"]


@dataclass(frozen=True)
class BackendSpec:
    """One way to run the handle suite: a ``Runtime`` backend on a kind of store."""

    id: str
    backend: Literal["local", "ray"]
    store: StoreKind
    start_options: tuple[tuple[str, Any], ...] = ()

    @property
    def durable(self) -> bool:
        """True when a new ``Runtime`` on the same store URL finds the data again."""
        return self.store != "memory"


BACKENDS: dict[str, BackendSpec] = {
    spec.id: spec
    for spec in (
        BackendSpec("local-memory", "local", "memory"),
        BackendSpec("local-sqlite", "local", "sqlite"),
        BackendSpec("local-postgres", "local", "postgres"),
        # One shared host (another process) on a SQLite file; the hosts die with the runtime.
        BackendSpec("ray-sqlite", "ray", "sqlite", (("hosts", 1), ("keep_hosts", False))),
    )
}


class _Starting:
    """What ``make_runtime(...)`` returns: await it for a started ``Runtime``, or use ``async with``."""

    def __init__(self, factory: RuntimeFactory, agents: Agent | dict[str, Agent], opts: dict[str, Any]) -> None:
        self._factory = factory
        self._agents = agents
        self._opts = opts
        self._runtime: Runtime | None = None

    def __await__(self) -> Generator[Any, None, Runtime]:
        return self._factory.start(self._agents, **self._opts).__await__()

    async def __aenter__(self) -> Runtime:
        self._runtime = await self._factory.start(self._agents, **self._opts)
        return self._runtime

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._runtime is not None
        await self._runtime.close()


class RuntimeFactory:
    """Starts runtimes of one backend on one test's store; every runtime it started is closed at teardown.

    Two runtimes started by one factory share the store's data (on a durable backend, a second
    ``start`` after ``close`` is a process restart).
    """

    def __init__(self, spec: BackendSpec, store_url: str | None, memory_store: InMemorySessionStore | None) -> None:
        self.spec = spec
        self.store_url = store_url
        self._memory_store = memory_store
        self._started: list[Runtime] = []

    @property
    def durable(self) -> bool:
        """Whether the data outlives a runtime (restart tests need it)."""
        return self.spec.durable

    def __call__(self, agents: Agent | dict[str, Agent], **opts: Any) -> _Starting:
        """``await make_runtime(agents, idle_timeout=...)`` or ``async with make_runtime(agents) as rt``."""
        return _Starting(self, agents, opts)

    async def start(self, agents: Agent | dict[str, Agent], **opts: Any) -> Runtime:
        """Start a runtime on this test's store; a single ``Agent`` is registered under its own name."""
        if isinstance(agents, Agent):
            agents = {agents.name: agents}
        store: str | SessionStore
        if self._memory_store is not None:
            store = self._memory_store
        else:
            assert self.store_url is not None
            store = self.store_url
        options = dict(self.spec.start_options) | opts
        runtime = await Runtime.start(store=store, backend=self.spec.backend, agents=agents, **options)
        self._started.append(runtime)
        return runtime

    async def open_store(self) -> TreeStore:
        """Another store object on this test's data (what a separate process would see); caller closes it."""
        if self.store_url is None:
            raise RuntimeError(f"{self.spec.id} is not durable: there is no second view of its store")
        store = await open_store(self.store_url)
        assert isinstance(store, TreeStore)
        return store

    async def history_rows(self, rt: Runtime) -> tuple[int, int]:
        """History entries and revisions the runtime's store holds (counted in the store's own tables)."""
        return await history_row_counts(rt.store)

    async def aclose(self) -> None:
        for runtime in reversed(self._started):
            await runtime.close()
        if self._memory_store is not None:
            await self._memory_store.close()


RAY_IN_SUITE = frozenset({"test_restart", "test_delegation"})
"""The modules whose ``ray-sqlite`` instances run in ``make test``: where the Ray backend differs most
(host processes restarted under queued turns and decisions, children on other hosts). A
``ray-sqlite`` instance costs 2-4 s (a host process per runtime), so the rest of the matrix (about
ninety tests, several minutes) is marked ``slow`` and runs in ``make test-all``; ``tests/ray``,
and the Ray cases of ``tests/mcp``, ``tests/http`` and ``tests/cli``, cover the backend in the suite
(approvals and event streams across processes, host kills, failover)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "durable: run only on backends whose data outlives the runtime")
    config.addinivalue_line("markers", "stores(*kinds): run only on backends whose store is one of these kinds")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "make_runtime" not in metafunc.fixturenames:
        return
    specs = list(BACKENDS.values())
    if metafunc.definition.get_closest_marker("durable") is not None:
        specs = [s for s in specs if s.durable]
    stores = metafunc.definition.get_closest_marker("stores")
    if stores is not None:
        specs = [s for s in specs if s.store in stores.args]
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    params = [
        pytest.param(s.id, id=s.id, marks=pytest.mark.slow)
        if s.backend == "ray" and module not in RAY_IN_SUITE
        else pytest.param(s.id, id=s.id)
        for s in specs
    ]
    metafunc.parametrize("make_runtime", params, indirect=True)


@pytest.fixture
async def make_runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A ``RuntimeFactory`` for this test instance's backend, on a fresh, empty store."""
    spec = BACKENDS[request.param]
    url: str | None = None
    memory: InMemorySessionStore | None = None
    if spec.store == "memory":
        memory = InMemorySessionStore()
    elif spec.store == "sqlite":
        url = f"sqlite:///{tmp_path / 'handles.db'}"  # an absolute path: four slashes
    else:
        server = request.getfixturevalue("pg_server")
        url = server.url
        truncate_pg(server.url)
    factory = RuntimeFactory(spec, url, memory)
    with contextlib.ExitStack() as stack:
        if spec.backend == "ray":
            request.getfixturevalue("ray_instance")
            board = RayBoard.connect()
            board.reset()  # module-level recorders were cleared on this process's board, not this one
            stack.enter_context(use_board(board))
        try:
            yield factory
        finally:
            await factory.aclose()
