"""Backends by name: ``Runtime.start(backend="ray")`` finds its ``SessionBackend`` here.

A backend is a factory, ``async (BackendConfig) -> SessionBackend``, known by a name. Names come
from three places, the first that knows a name wins:

1. ``register_backend(name, factory)`` in this process (a test double, an embedding application);
2. the entry-point group ``repertory.backends`` of the installed distributions: repertory declares
   ``local`` and ``ray`` in its pyproject.toml, and a third-party package declares its own the
   same way (``mine = "my_pkg.backend:start"``), with no change here;
3. ``local`` itself, so a source tree that was never installed still runs the default.

So the session tree never imports a backend it does not run: the Ray backend is a string in
pyproject.toml, imported only when asked for, and a missing ``ray`` is an ``ImportError`` that
names the extra to install rather than a failure to import ``repertory``.

Each backend owns its options: ``BackendConfig`` carries what every backend takes, and the rest
(``Runtime.start(backend_options=...)`` or the keywords ``Runtime.start`` does not know) arrives
as given in ``BackendConfig.options``, for the factory to validate into its own options type
(``repertory.actors.RayOptions`` for ``ray``) and to refuse what it does not know by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, cast

from repertory.core.clock import Clock
from repertory.core.memory import MemoryFactory
from repertory.core.store import TreeStore
from repertory.runtime.agent import Agent
from repertory.runtime.backend import SessionBackend
from repertory.tree.agent_specs import AgentSpec

__all__ = [
    "ENTRY_POINT_GROUP",
    "BackendConfig",
    "BackendFactory",
    "BackendOptions",
    "backend_names",
    "load_backend",
    "register_backend",
    "unregister_backend",
]

ENTRY_POINT_GROUP = "repertory.backends"


BackendOptions = Mapping[str, Any] | object
"""A backend's own options as ``Runtime.start`` hands them over: a mapping of keyword options (the
keywords ``Runtime.start`` does not know, merged with a ``backend_options`` mapping), or the options
object of the backend's own type that ``backend_options`` gave (``repertory.actors.RayOptions``)."""


@dataclass(frozen=True)
class BackendConfig:
    """What ``Runtime.start`` hands a backend factory: the open store, the agents, and what every backend takes.

    ``store_url`` is the URL the store was opened from (``None`` for a store object: a backend
    whose hosts open the store themselves derives one). ``agents`` are resolved; ``agent_specs``
    are as given, so a backend in other processes can send a ``module:attr`` path instead of a
    pickled agent. ``options`` are the backend's own (``BackendOptions``): an empty mapping when
    none were given; the factory validates them into its own type and refuses, naming them, the
    ones it does not know (``TypeError``), as a function refuses an unexpected keyword.
    """

    store: TreeStore
    store_url: str | None
    agents: dict[str, Agent]
    agent_specs: dict[str, AgentSpec]
    idle_timeout: float
    memory: MemoryFactory | None = None
    # Durable time: the clock timers and schedules run on (``None``: the wall clock), and how often
    # a host's scheduler looks at the store for rows other processes armed.
    clock: Clock | None = None
    poll_interval: float = 5.0
    # False: this process neither re-drives open turns nor wakes timers (``Runtime.start(recover=...)``).
    recover: bool = True
    options: BackendOptions = field(default_factory=dict)


BackendFactory = Callable[[BackendConfig], Awaitable[SessionBackend]]
"""Starts a backend on an open store; the runtime closes what it returns."""

_registered: dict[str, BackendFactory] = {}
_BUILTIN = {"local": "repertory.tree.local:start_local_backend"}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make ``Runtime.start(backend=name)`` use ``factory`` in this process (over an entry point of that name)."""
    if not name or not isinstance(name, str):
        raise ValueError(f"a backend name must be a non-empty string, not {name!r}")
    _registered[name] = factory


def unregister_backend(name: str) -> None:
    """Forget a ``register_backend`` (an entry point or the built-in of that name applies again)."""
    _registered.pop(name, None)


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def backend_names() -> list[str]:
    """Every backend name this process can start, sorted."""
    return sorted({*_registered, *_entry_points(), *_BUILTIN})


def load_backend(name: str) -> BackendFactory:
    """The factory of backend ``name``, imported now.

    An unknown name raises ``ValueError`` listing the known ones. A known backend whose code cannot
    be imported (the Ray backend without ``ray``) raises ``ImportError`` naming the extra to install.
    """
    if not isinstance(name, str):
        raise ValueError(f"a backend is named by a string, not {type(name).__name__}")
    factory = _registered.get(name)
    if factory is not None:
        return factory
    found = _entry_points().get(name)
    target = found.value if found is not None else _BUILTIN.get(name)
    if target is None:
        raise ValueError(f"unknown backend {name!r}; known backends: {', '.join(backend_names())}")
    try:
        loaded = found.load() if found is not None else _import(target)
    except ImportError as exc:
        # A missing optional dependency, not a missing backend: say what to install.
        ours = target.startswith("repertory.")
        hint = f"pip install 'repertory[{name}]'" if ours else "install the package that provides it"
        raise ImportError(f"backend {name!r} cannot be imported ({exc}); {hint}", name=exc.name) from exc
    if not callable(loaded):
        raise ValueError(f"backend {name!r} ({target}) is not a factory: {type(loaded).__name__}")
    return cast(BackendFactory, loaded)


def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
