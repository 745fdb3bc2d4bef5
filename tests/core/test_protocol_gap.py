"""``protocol_gap``: what an object lacks to be a store protocol, as ``isinstance`` on this Python sees it."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from repertory import Agent, Runtime
from repertory.core.protocols import protocol_gap, protocol_members
from repertory.core.store import MemoryStore, SessionStore, TreeStore
from repertory.core.timing import TimeStore
from repertory.errors import StoreError
from repertory.memory import StoreMemory
from repertory.storage import InMemorySessionStore
from repertory.testing import ScriptedModel

PROTOCOLS = [SessionStore, TreeStore, MemoryStore, TimeStore]


def _shaped(members: set[str]) -> object:
    """An instance of a class that defines exactly ``members`` (as async methods)."""

    async def member(self: object) -> None:
        return None

    return type("Shaped", (), dict.fromkeys(members, member))()


class Delegating:
    """A wrapper reaching an in-memory store through ``__getattr__`` only."""

    def __init__(self) -> None:
        self.inner = InMemorySessionStore()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class HalfStore:
    """Two of ``SessionStore``'s methods, defined on the class."""

    async def load_run(self, run_id: str) -> None:
        return None

    async def close(self) -> None:
        return None


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_the_members_are_the_ones_isinstance_checks(protocol: type) -> None:
    members = set(protocol_members(protocol))
    assert isinstance(_shaped(members), protocol)
    for name in members:  # each one is needed
        assert not isinstance(_shaped(members - {name}), protocol), name


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_a_built_in_store_has_no_gap(protocol: type) -> None:
    assert protocol_gap(InMemorySessionStore(), protocol) is None


def test_a_partial_store_is_told_every_member_it_lacks() -> None:
    gap = protocol_gap(HalfStore(), SessionStore)
    assert gap is not None
    lacking = sorted(set(protocol_members(SessionStore)) - {"load_run", "close"})
    assert gap == f"HalfStore is not a SessionStore: it lacks {', '.join(lacking)}"


def test_a_getattr_wrapper_is_a_store_exactly_where_isinstance_says_so() -> None:
    gap = protocol_gap(Delegating(), TreeStore)
    if sys.version_info >= (3, 12):
        assert gap is not None
        assert gap.startswith("Delegating is not a TreeStore: it lacks ")
        assert "all of them only through __getattr__" in gap
        assert "define them on the class" in gap
    else:
        assert gap is None  # 3.11's isinstance looks members up with hasattr, which __getattr__ answers


async def test_runtime_start_and_store_memory_name_what_is_missing() -> None:
    agent = Agent(name="a", model=ScriptedModel(lambda m, t: {"text": "ok"}))
    with pytest.raises(StoreError, match=r"HalfStore is not a TreeStore: it lacks .*accept_turn"):
        await Runtime.start(store=HalfStore(), agents={"a": agent})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"HalfStore is not a MemoryStore: it lacks .*append_memory"):
        StoreMemory(HalfStore(), resource="u1")
