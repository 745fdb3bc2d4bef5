"""The ``local`` backend: one ``LocalHost`` in this process, started on the runtime's store.

Registered as the entry point ``local`` of the group ``repertory.backends`` (and built in, see
``repertory.tree.backends``). Starting it finishes every turn a previous process left open.
Its sessions' tools reach the tree (``agent_tool``) through the host itself (``TreeServices``).
It has no options of its own: everything it takes is in ``BackendConfig``.
"""

from __future__ import annotations

from collections.abc import Mapping

from repertory.runtime.backend import SessionBackend
from repertory.runtime.host import LocalHost
from repertory.tree.backends import BackendConfig, BackendOptions
from repertory.tree.delegation import TreeServices

__all__ = ["start_local_backend"]


def _refuse_options(backend: str, options: BackendOptions) -> None:
    """Raise ``TypeError`` naming the options a backend that takes none was given (an empty mapping passes)."""
    if isinstance(options, Mapping):
        if options:
            names = ", ".join(sorted(map(str, options)))
            raise TypeError(
                f"backend {backend!r} takes no backend options, got: {names}"
                " (not Runtime.start's either; are they another backend's, such as backend='ray'?)"
            )
        return
    raise TypeError(f"backend {backend!r} takes no backend options, got backend_options={type(options).__name__}(...)")


async def start_local_backend(config: BackendConfig) -> SessionBackend:
    """A started ``LocalHost``; any backend option (an ``address`` to join, ``hosts``...) is a ``TypeError``."""
    _refuse_options("local", config.options)
    host = LocalHost(
        config.store,
        config.agents,
        idle_timeout=config.idle_timeout,
        memory=config.memory,
        clock=config.clock,
        poll_interval=config.poll_interval,
    )
    host.services = TreeServices(config.store, lambda: host)  # its tools delegate through the host itself
    try:
        await host.start(recover=config.recover)
    except BaseException:
        await host.close()
        raise
    return host
