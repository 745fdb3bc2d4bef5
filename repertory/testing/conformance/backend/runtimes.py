"""``RuntimeFactory``: what a backend's fixture hands the backend suite, and ``BackendSuite``, its base class.

A backend passes the contract when the suite's classes pass against a ``make_runtime`` fixture that
yields a ``RuntimeFactory`` of that backend, one per test, entered with ``async with``::

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        async def make_runtime(self, tmp_path):
            async with RuntimeFactory("mine", f"sqlite:///{tmp_path / 'suite.db'}") as factory:
                yield factory

A test calls the factory with its agents and gets a started ``Runtime`` on the test's store, closed
at teardown (or scoped)::

    rt = await make_runtime(script.agent())
    async with make_runtime({"a": agent_a}, idle_timeout=60) as rt:
        ...

Two runtimes started by one factory share the store's data: given a URL, each opens the store
itself and the data outlives a runtime (a second ``start`` after ``close`` is a process restart;
the restart tests need it and skip without it); given an open store object, every runtime uses
that object and the factory is not durable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Mapping
from types import TracebackType
from typing import Any

import pytest

from repertory.core.store import TreeStore
from repertory.runtime.agent import Agent
from repertory.storage.url import open_store
from repertory.testing.conformance.backend.board import Board, active_board, use_board
from repertory.testing.conformance.probe import ProbeUnsupported, StoreProbe
from repertory.tree.runtime import Runtime

__all__ = ["BackendSuite", "RuntimeFactory"]


class _Starting:
    """What ``make_runtime(...)`` returns: await it for a started ``Runtime``, or use ``async with``."""

    def __init__(self, factory: RuntimeFactory, agents: Agent | Mapping[str, Agent], opts: dict[str, Any]) -> None:
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
    """Starts runtimes of one backend on one test's store; every runtime it started is closed on exit.

    ``backend`` is the name ``Runtime.start`` finds the backend by (``register_backend`` or an entry
    point). ``store`` is a URL (each runtime opens it; durable) or an open store object (shared by
    every runtime; not durable, and the caller closes it); ``durable`` overrides that guess (a URL
    of a store that forgets, ``memory://``). ``start_options`` go to every ``Runtime.start`` (the
    backend's options: ``backend_options=...`` or keywords); a test's own options win.

    ``board`` is where the doubles keep their state (``board.py``): by default this process's, which
    is enough for a backend that runs models and tools in this process; a backend that runs them
    elsewhere supplies a board every process reaches. The factory switches it in and empties it
    when entered. ``probe`` gives the ``StoreProbe`` of a runtime's store, for the white-box
    history-row counts; without one those checks are left out.
    """

    def __init__(
        self,
        backend: str,
        store: str | TreeStore,
        *,
        durable: bool | None = None,
        start_options: Mapping[str, Any] | None = None,
        board: Board | None = None,
        probe: Callable[[TreeStore], StoreProbe] | None = None,
    ) -> None:
        self.backend = backend
        self.store = store
        self.durable = isinstance(store, str) if durable is None else durable
        self.start_options = dict(start_options or {})
        self._board = board
        self._probe = probe
        self._started: list[Runtime] = []
        self._using = contextlib.ExitStack()  # the board switched in while the factory is entered

    def __call__(self, agents: Agent | Mapping[str, Agent], **opts: Any) -> _Starting:
        """``await make_runtime(agents, idle_timeout=...)`` or ``async with make_runtime(agents) as rt``."""
        return _Starting(self, agents, opts)

    async def start(self, agents: Agent | Mapping[str, Agent], **opts: Any) -> Runtime:
        """Start a runtime on this test's store; a single ``Agent`` is registered under its own name."""
        named = {agents.name: agents} if isinstance(agents, Agent) else dict(agents)
        runtime = await Runtime.start(
            store=self.store, backend=self.backend, agents=named, **(self.start_options | opts)
        )
        self._started.append(runtime)
        return runtime

    def require_durable(self) -> None:
        """Skip the calling test unless the data outlives a runtime (what a restart test needs)."""
        if not self.durable:
            pytest.skip(f"backend {self.backend!r} on this store is not durable: its data dies with the runtime")

    async def open_store(self) -> TreeStore:
        """Another store object on this test's data (what a separate process would see); caller closes it."""
        if not isinstance(self.store, str):
            raise RuntimeError("a factory given a store object has no second view of it: give it a URL")
        store = await open_store(self.store)
        assert isinstance(store, TreeStore)
        return store

    async def history_rows(self, rt: Runtime) -> tuple[int, int] | None:
        """History entries and revisions the runtime's store holds; ``None`` without a probe that counts them."""
        if self._probe is None:
            return None
        try:
            return await self._probe(rt.store).count_history_rows()
        except ProbeUnsupported:
            return None

    async def __aenter__(self) -> RuntimeFactory:
        board = active_board() if self._board is None else self._using.enter_context(use_board(self._board))
        board.reset()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            for runtime in reversed(self._started):
                await runtime.close()
        finally:
            self._using.close()


class BackendSuite:
    """Base of the backend suite's classes: a subclass supplies the ``make_runtime`` fixture.

    There is deliberately no placeholder fixture here (one would shadow a conftest's); pytest's
    "fixture 'make_runtime' not found" says what is missing. Every test is ``async`` and marked
    ``asyncio``, so the suite runs in pytest-asyncio's strict mode as well as in auto mode.
    """

    pytestmark = pytest.mark.asyncio
