"""A backend written outside repertory, tested the way its author would: the shipped suite and a fixture.

``test_third_party_backend.py`` copies this file into an empty folder and runs pytest there (strict
asyncio mode, warnings as errors), so nothing from this repository's ``tests/`` (conftest, backend
mixins, the Ray board) is in reach: only ``repertory`` and ``repertory.testing.conformance``.

``WrappedBackend`` hands every ``SessionBackend`` call to a ``LocalHost`` it owns but is not one, so
nothing can recognise it by class; it is registered by name (``register_backend("wrapped", ...)``)
as a third-party package would (or declared in the entry-point group ``repertory.backends``), and
``Runtime.start(backend="wrapped")`` finds it. Its store is a SQLite file, so the restart tests run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

import pytest_asyncio
from pydantic import BaseModel, JsonValue

from repertory.core.decisions import Decision
from repertory.core.messages import ModelMessage
from repertory.core.principal import Principal
from repertory.core.result import RunResult
from repertory.core.state import SuspendReason
from repertory.core.store import DeletedRows
from repertory.core.toolspec import ToolSpec
from repertory.core.tree import IfBusy, NewSession, SessionEvent, SessionMetadata, SessionRecord, TurnKind, TurnRecord
from repertory.runtime.agent import Agent
from repertory.runtime.backend import SessionBackend, Submission
from repertory.runtime.compaction import CompactionResult
from repertory.runtime.host import LocalHost
from repertory.testing.conformance import BackendConformance, RuntimeFactory
from repertory.testing.conformance.backend.doubles import Script
from repertory.tree import BackendConfig, TreeServices, register_backend, unregister_backend

BACKEND = "wrapped"


class WrappedBackend:
    """Every ``SessionBackend`` call goes to an inner ``LocalHost``; ``calls`` counts what came through."""

    def __init__(self, inner: LocalHost) -> None:
        self.inner = inner
        self.calls = 0

    def _count(self) -> LocalHost:
        self.calls += 1
        return self.inner

    @property
    def agents(self) -> dict[str, Agent]:
        return self.inner.agents

    async def create_session(self, spec: NewSession) -> SessionRecord:
        return await self._count().create_session(spec)

    async def create_sessions(self, specs: list[NewSession]) -> list[SessionRecord]:
        return await self._count().create_sessions(specs)

    async def metadata(self, session_id: str) -> SessionMetadata:
        return await self._count().metadata(session_id)

    async def amend_session(
        self, session_id: str, *, agent: str | None = None, metadata: dict[str, JsonValue] | None = None
    ) -> SessionRecord:
        return await self._count().amend_session(session_id, agent=agent, metadata=metadata)

    async def delete_sessions(self, session_ids: list[str]) -> DeletedRows:
        return await self._count().delete_sessions(session_ids)

    async def send(
        self,
        session_id: str,
        message: ModelMessage,
        kind: TurnKind,
        if_busy: IfBusy,
        output_type: type[BaseModel] | None,
        submission_id: str | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> TurnRecord:
        return await self._count().send(session_id, message, kind, if_busy, output_type, submission_id, client_tools)

    async def send_many(self, batch: list[Submission]) -> list[TurnRecord]:
        return await self._count().send_many(batch)

    async def run_turn(
        self, session_id: str, message: ModelMessage, kind: TurnKind, output_type: type[BaseModel] | None
    ) -> RunResult:
        return await self._count().run_turn(session_id, message, kind, output_type)

    async def wait_turn(self, session_id: str, submission_id: str) -> None:
        await self._count().wait_turn(session_id, submission_id)

    async def cancel_turn(self, session_id: str, submission_id: str) -> None:
        await self._count().cancel_turn(session_id, submission_id)

    async def cancel(self, session_id: str) -> None:
        await self._count().cancel(session_id)

    def output_type_for(self, path: str | None, agent: str) -> type[BaseModel] | None:
        return self._count().output_type_for(path, agent)

    async def pending_approvals(self, session_id: str) -> list[SuspendReason]:
        return await self._count().pending_approvals(session_id)

    async def decide(self, session_id: str, decision: Decision, principal: Principal) -> RunResult:
        return await self._count().decide(session_id, decision, principal)

    async def recover(self, session_id: str) -> list[str]:
        return await self._count().recover(session_id)

    async def compact(self, session_id: str) -> CompactionResult | None:
        return await self._count().compact(session_id)

    def events(self, session_id: str, after_seq: int = 0) -> AsyncIterator[SessionEvent]:
        return self._count().events(session_id, after_seq)

    def listen(self, session_id: str, listener: Callable[[SessionEvent], None]) -> Callable[[], None]:
        return self._count().listen(session_id, listener)

    def nudge_timers(self, session_id: str | None) -> None:
        self._count().nudge_timers(session_id)

    def passivate_idle(self, older_than: float) -> int:
        return self._count().passivate_idle(older_than)

    @property
    def resident(self) -> int:
        return self.inner.resident

    async def close(self) -> None:
        await self.inner.close()


async def start_wrapped(config: BackendConfig) -> SessionBackend:
    """The factory a third-party package registers: a started ``LocalHost`` behind the wrapper."""
    if not isinstance(config.options, Mapping) or config.options:
        raise TypeError(f"backend {BACKEND!r} takes no options, got {config.options!r}")
    host = LocalHost(
        config.store,
        config.agents,
        idle_timeout=config.idle_timeout,
        memory=config.memory,
        clock=config.clock,
        poll_interval=config.poll_interval,
    )
    wrapper = WrappedBackend(host)
    host.services = TreeServices(config.store, lambda: wrapper)  # delegations go through the wrapper too
    await host.start(recover=config.recover)
    return wrapper


class TestWrappedBackend(BackendConformance):
    """The whole backend contract from a ``make_runtime`` fixture alone."""

    @pytest_asyncio.fixture
    async def make_runtime(self, tmp_path: Path) -> AsyncIterator[RuntimeFactory]:
        register_backend(BACKEND, start_wrapped)
        try:
            async with RuntimeFactory(BACKEND, f"sqlite:///{tmp_path / 'wrapped.db'}") as factory:
                yield factory
        finally:
            unregister_backend(BACKEND)

    async def test_the_suite_runs_through_the_wrapper(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        assert isinstance(rt.host, WrappedBackend) and not isinstance(rt.host, LocalHost)
        h = await rt.create_session(agent="assistant")
        assert (await h.run("hi")).text == "re: hi"
        assert rt.host.calls >= 2
