"""Backends by name (``repertory.tree.backends``): registered, discovered by entry point, or refused clearly.

A third backend is a factory returning a ``SessionBackend``; here it is a ``LocalHost`` that also
records the typed decisions the handles send it, which shows the whole handle API running on a
backend the runtime has never heard of.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, InMemorySessionStore, ModelMessage, Principal, RunResult, Runtime, ToolContext, tool
from repertory.actors import RayOptions
from repertory.actors.client import RayHostClient
from repertory.core.decisions import Approve, Decision, Reject
from repertory.runtime.backend import SessionBackend
from repertory.runtime.host import LocalHost
from repertory.testing import ScriptedModel, Step
from repertory.testing.conformance.backend.doubles import within
from repertory.tree import backends
from repertory.tree.backends import BackendConfig, backend_names, load_backend, register_backend, unregister_backend
from repertory.tree.local import start_local_backend


def _the_ray_client_is_a_backend(client: RayHostClient) -> SessionBackend:
    return client  # mypy checks the fit; the package's own factories check it too


@tool(requires_approval=True)
def deploy(ctx: ToolContext, target: str) -> str:
    """Deploy somewhere (needs a human's yes)."""
    return f"deployed {target} ({ctx.approval})"


def _agent() -> Agent:
    def step(messages: list[ModelMessage], tools: Any) -> Step:
        if messages[-1].role == "user":
            return {"tool": "deploy", "args": {"target": "prod"}}
        return {"text": "over"}

    return Agent(name="ops", model=ScriptedModel(step), tools=[deploy])


class RecordingHost(LocalHost):
    """The local host, recording every decision it is handed."""

    def __init__(self, config: BackendConfig) -> None:
        super().__init__(config.store, config.agents, idle_timeout=config.idle_timeout)
        self.config = config
        self.decisions: list[Decision] = []

    async def decide(self, session_id: str, decision: Decision, principal: Principal) -> RunResult:
        self.decisions.append(decision)
        return await super().decide(session_id, decision, principal)


async def start_recording_backend(config: BackendConfig) -> SessionBackend:
    """The factory the tests register (and declare as a fake entry point)."""
    host = RecordingHost(config)
    await host.start()
    return host


@pytest.fixture
def recording() -> Iterator[str]:
    register_backend("recording", start_recording_backend)
    yield "recording"
    unregister_backend("recording")


def test_the_local_host_is_a_backend() -> None:
    host: SessionBackend = LocalHost(InMemorySessionStore(), {"ops": _agent()})
    assert host.resident == 0 and list(host.agents) == ["ops"]


def test_the_installed_entry_points_declare_local_and_ray() -> None:
    declared = {ep.name: ep.value for ep in entry_points(group=backends.ENTRY_POINT_GROUP)}
    assert declared["local"] == "repertory.tree.local:start_local_backend"
    assert declared["ray"] == "repertory.actors.bootstrap:start_ray_backend"
    assert {"local", "ray"} <= set(backend_names())
    assert load_backend("local") is start_local_backend
    from repertory.actors.bootstrap import start_ray_backend

    assert load_backend("ray") is start_ray_backend


async def test_an_unknown_backend_is_a_value_error_listing_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "never.db"
    with pytest.raises(ValueError, match=r"unknown backend 'mars'; known backends: local, ray"):
        await Runtime.start(store=f"sqlite:///{path}", backend="mars", agents={"ops": _agent()})
    assert not path.exists()  # refused before the store was opened
    with pytest.raises(ValueError, match="unknown backend"):
        load_backend("")


async def test_a_registered_backend_runs_the_handle_api_with_typed_decisions(recording: str) -> None:
    assert recording in backend_names()
    async with await Runtime.start(store=InMemorySessionStore(), backend=recording, agents={"ops": _agent()}) as rt:
        assert rt.backend == "recording"
        host = rt.host
        assert isinstance(host, RecordingHost) and host.config.idle_timeout == 300.0
        assert list(host.config.agents) == ["ops"] and host.config.store is rt.store
        h = await rt.create_session(agent="ops", metadata={"via": "recording"})
        assert (await within(h.run("ship"))).status == "suspended"
        [pending] = await h.pending_approvals()
        done = await within(h.approve(pending.token, approval={"by": "carol"}))
        assert done.status == "done" and done.text == "over"
        assert (await within(h.run("again"))).status == "suspended"
        [pending_again] = await h.pending_approvals()
        await within(h.reject(pending_again.token, reason="not today"))
        assert host.decisions == [
            Approve(token=pending.token, approval={"by": "carol"}),
            Reject(token=pending_again.token, reason="not today"),
        ]


async def test_a_registration_wins_over_the_entry_point_of_its_name() -> None:
    register_backend("local", start_recording_backend)
    try:
        async with await Runtime.start(store=InMemorySessionStore(), agents={"ops": _agent()}) as rt:
            assert isinstance(rt.host, RecordingHost)
    finally:
        unregister_backend("local")
    async with await Runtime.start(store=InMemorySessionStore(), agents={"ops": _agent()}) as rt:
        assert type(rt.host) is LocalHost


async def test_a_third_party_entry_point_is_discovered(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = EntryPoint("thirdparty", f"{__name__}:start_recording_backend", backends.ENTRY_POINT_GROUP)
    installed = list(entry_points(group=backends.ENTRY_POINT_GROUP))
    monkeypatch.setattr(backends, "entry_points", lambda group: [*installed, fake] if group == fake.group else [])
    assert "thirdparty" in backend_names()
    async with await Runtime.start(store=InMemorySessionStore(), backend="thirdparty", agents={"ops": _agent()}) as rt:
        assert isinstance(rt.host, RecordingHost)
        h = await rt.create_session(agent="ops")
        assert (await within(h.run("ship"))).status == "suspended"


def test_a_backend_whose_extra_is_missing_names_the_pip_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # As if ray were not installed: the Ray backend's modules are imported afresh and ``import ray`` fails.
    for name in [m for m in sys.modules if m == "repertory.actors" or m.startswith("repertory.actors.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"pip install 'repertory\[ray\]'") as caught:
        load_backend("ray")
    assert caught.value.name == "ray"
    assert load_backend("local") is start_local_backend  # the local backend never needed it


def test_a_third_party_backend_that_cannot_import_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = EntryPoint("broken", "no_such_package_for_repertory.backend:start", backends.ENTRY_POINT_GROUP)
    monkeypatch.setattr(backends, "entry_points", lambda group: [broken])
    with pytest.raises(ImportError, match=r"backend 'broken' cannot be imported.*install the package that provides it"):
        load_backend("broken")


# -- each backend owns its options ------------------------------------------------------------------


async def test_the_local_backend_refuses_every_option_by_name(tmp_path: Path) -> None:
    store = InMemorySessionStore()
    with pytest.raises(TypeError, match=r"backend 'local' takes no backend options, got: address, hosts"):
        await Runtime.start(store=store, agents={"ops": _agent()}, hosts=2, address="ray://x:10001")
    with pytest.raises(TypeError, match=r"backend 'local' takes no backend options, got: keep_hosts"):
        await Runtime.start(store=store, agents={"ops": _agent()}, backend_options={"keep_hosts": True})
    with pytest.raises(TypeError, match=r"backend_options=RayOptions\(\.\.\.\)"):
        await Runtime.start(store=store, agents={"ops": _agent()}, backend_options=RayOptions(hosts=1))
    async with await Runtime.start(store=store, agents={"ops": _agent()}, backend_options={}) as rt:
        assert rt.backend == "local"


async def test_ray_options_are_validated_by_the_ray_backend_before_ray_starts() -> None:
    store = InMemorySessionStore()
    with pytest.raises(TypeError, match=r"got unknown option\(s\): hostz; its options are: address, hosts"):
        await Runtime.start(store=store, backend="ray", agents={"ops": _agent()}, hostz=1)
    with pytest.raises(ValueError, match="hosts"):  # pydantic's ValidationError is a ValueError naming the field
        await Runtime.start(store=store, backend="ray", agents={"ops": _agent()}, hosts=0)
    with pytest.raises(TypeError, match=r"given twice, as keywords and in backend_options: hosts"):
        await Runtime.start(store=store, backend="ray", agents={"ops": _agent()}, backend_options={"hosts": 1}, hosts=2)
    with pytest.raises(TypeError, match=r"keyword option\(s\) hosts beside backend_options=RayOptions"):
        await Runtime.start(store=store, backend="ray", agents={"ops": _agent()}, backend_options=RayOptions(), hosts=2)


async def test_a_backend_receives_its_options_as_given(recording: str) -> None:
    given = RayOptions(hosts=3)  # any object: the runtime hands it over without reading it
    async with await Runtime.start(
        store=InMemorySessionStore(), backend=recording, agents={"ops": _agent()}, backend_options=given
    ) as rt:
        assert isinstance(rt.host, RecordingHost) and rt.host.config.options is given
    merged = {"region": "eu"}
    async with await Runtime.start(
        store=InMemorySessionStore(), backend=recording, agents={"ops": _agent()}, backend_options=merged, tier=2
    ) as rt:
        assert isinstance(rt.host, RecordingHost) and rt.host.config.options == {"region": "eu", "tier": 2}


def test_ray_options_from_a_mapping_or_an_instance() -> None:
    options = RayOptions.of({"address": None, "hosts": 4, "keep_hosts": False, "host_options": {"num_cpus": 1}})
    assert options == RayOptions(hosts=4, keep_hosts=False, host_options={"num_cpus": 1})
    assert RayOptions.of(options) is options and RayOptions.of({}) == RayOptions()
    with pytest.raises(TypeError, match="not list"):
        RayOptions.of([("hosts", 1)])


async def test_the_local_backend_refuses_a_dedicated_placement_and_writes_nothing() -> None:
    async with await Runtime.start(store=InMemorySessionStore(), agents={"ops": _agent()}) as rt:
        with pytest.raises(ValueError, match="placement='dedicated' needs a backend that gives a session a process"):
            await rt.create_session(agent="ops", placement="dedicated", session_id="alone")
        assert await rt.store.load_session("alone") is None
        assert (await rt.create_session(agent="ops", session_id="alone")).record.placement == "shared"
