"""The ``local`` backend: one ``LocalHost`` in this process, started on the runtime's store.

Registered as the entry point ``local`` of the group ``repertory.backends`` (and built in, see
``repertory.tree.backends``). Starting it finishes every turn a previous process left open.
Its sessions' tools reach the tree (``agent_tool``) through the host itself (``TreeServices``).
"""

from __future__ import annotations

from repertory.runtime.host import LocalHost
from repertory.tree.backend import SessionBackend
from repertory.tree.backends import BackendConfig
from repertory.tree.delegation import TreeServices

__all__ = ["start_local_backend"]


async def start_local_backend(config: BackendConfig) -> SessionBackend:
    """A started ``LocalHost``; an ``address`` (a cluster to join) is refused with ``ValueError``."""
    if config.address is not None:
        raise ValueError("address is for backend='ray'")
    host = LocalHost(
        config.store,
        config.agents,
        idle_timeout=config.idle_timeout,
        memory=config.memory,
        clock=config.clock,
        poll_interval=config.poll_interval,
    )
    backend: SessionBackend = host
    host.services = TreeServices(config.store, lambda: backend)  # its tools delegate through the host itself
    try:
        await host.start(recover=config.recover)
    except BaseException:
        await host.close()
        raise
    return host
