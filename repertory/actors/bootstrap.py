"""Starting (or joining) Ray and finding or creating one store's hosts and supervisor: the ``ray`` backend.

``start_ray_backend`` is the factory the entry point ``ray`` of the group ``repertory.backends``
names (pyproject.toml), which ``Runtime.start(backend="ray")`` finds through
``repertory.tree.backends`` without the session tree importing this package.

Hosts and the supervisor are detached actors with versioned names in a namespace derived from the
store, so two runtimes on one cluster with different stores never share hosts, and a runtime that
starts later finds the hosts an earlier one left running (``keep_hosts``); the names are ``names.py``'s.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray

from repertory.actors.client import RayHostClient
from repertory.actors.host import host_actor_class
from repertory.actors.names import PREFIX, deployment_namespace, shared_host_name, supervisor_name
from repertory.actors.options import RayOptions
from repertory.actors.supervisor import Supervisor
from repertory.core.memory import MemoryFactory
from repertory.core.store import TreeStore
from repertory.errors import StoreError
from repertory.runtime.agent import Agent
from repertory.runtime.backend import SessionBackend
from repertory.tree.agent_specs import AgentSpec
from repertory.tree.backends import BackendConfig

__all__ = ["start_ray_backend", "start_ray_client", "store_url_for_hosts"]


def store_url_for_hosts(store: TreeStore, url: str | None) -> str:
    """A URL another process can open: absolute SQLite paths, the PostgreSQL conninfo."""
    from repertory.storage.memory.store import InMemorySessionStore
    from repertory.storage.postgres.store import PostgresSessionStore
    from repertory.storage.sqlite.store import SqliteSessionStore

    if isinstance(store, InMemorySessionStore):
        raise StoreError("the Ray backend needs a store other processes can open: SQLite or PostgreSQL, not memory://")
    if isinstance(store, SqliteSessionStore):
        if store.path == ":memory:":
            raise StoreError("the Ray backend cannot share an in-memory SQLite database between processes")
        return f"sqlite:///{store.path}?durability={store.durability}"
    if isinstance(store, PostgresSessionStore):
        return store.reopen_url
    if url is None:
        raise StoreError(f"cannot tell Ray hosts how to open a {type(store).__name__}")
    return url


async def start_ray_client(
    *,
    store: TreeStore,
    store_url: str | None,
    agents: dict[str, Agent],
    address: str | None,
    agent_specs: dict[str, AgentSpec] | None = None,
    memory: MemoryFactory | None = None,
    hosts: int,
    idle_timeout: float,
    max_in_flight: int = 256,
    call_timeout: float = 60.0,
    host_options: dict[str, Any] | None = None,
    ray_init: dict[str, Any] | None = None,
    keep_hosts: bool | None = None,
) -> RayHostClient:
    """Start or join Ray, then find or create the supervisor and ``hosts`` shared hosts."""
    if hosts < 1:
        raise ValueError("hosts must be >= 1")
    url = store_url_for_hosts(store, store_url)
    specs: dict[str, AgentSpec] = dict(agent_specs if agent_specs is not None else agents)
    owns_ray = False
    if not ray.is_initialized():
        init: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, **(ray_init or {})}
        ray.init(address="local" if address is None else address, **init)
        owns_ray = address is None
    namespace = deployment_namespace(url)
    prefix = PREFIX
    host_opts: dict[str, Any] = {"num_cpus": 0, **(host_options or {})}
    handles: list[Any] = [
        host_actor_class()
        .options(
            name=shared_host_name(prefix, i),
            namespace=namespace,
            lifetime="detached",
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=0,
            max_concurrency=1000,
            **host_opts,
        )
        .remote(url, specs, index=i, hosts=hosts, idle_timeout=idle_timeout, memory=memory)
        for i in range(hosts)
    ]
    supervisor: Any = (
        ray.remote(Supervisor)
        .options(
            name=supervisor_name(prefix),
            namespace=namespace,
            lifetime="detached",
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=-1,
            num_cpus=0,
        )
        .remote(prefix, namespace, url, specs, hosts, idle_timeout, memory)
    )
    # Existing detached hosts keep their agents: hand them ours (a fresh client recovering sessions).
    await asyncio.gather(*(h.register_agents.remote(specs) for h in handles), supervisor.register_agents.remote(specs))
    return RayHostClient(
        store=store,
        agents=agents,
        namespace=namespace,
        prefix=prefix,
        hosts=handles,
        supervisor=supervisor,
        owns_ray=owns_ray,
        max_in_flight=max_in_flight,
        call_timeout=call_timeout,
        keep_hosts=(not owns_ray) if keep_hosts is None else keep_hosts,
    )


async def start_ray_backend(config: BackendConfig) -> SessionBackend:
    """The ``ray`` backend: a ``RayHostClient`` to this store's hosts, started or joined (``start_ray_client``).

    Its own options (``config.options``) are ``RayOptions``: an instance, or a mapping of its fields
    (an unknown one is a ``TypeError`` naming it). Hosts keep time on their own wall clocks (each
    host's scheduler wakes the timers of the sessions it owns), so a ``clock`` is refused: it could
    not be shared with their processes.
    """
    options = RayOptions.of(config.options)
    if config.clock is not None:
        raise ValueError("clock= is for backend='local': Ray hosts keep the wall clock")
    return await start_ray_client(
        store=config.store,
        store_url=config.store_url,
        agents=config.agents,
        agent_specs=config.agent_specs,
        memory=config.memory,
        address=options.address,
        hosts=options.hosts,
        idle_timeout=config.idle_timeout,
        max_in_flight=options.max_in_flight,
        host_options=options.host_options,
        ray_init=options.ray_init,
        keep_hosts=options.keep_hosts,
    )
