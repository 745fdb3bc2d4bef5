"""``Supervisor``: one named, detached Ray actor that owns the session tree's placement.

The tree itself (lineage) and every session's placement are rows in the store, so the supervisor
holds nothing that a restart could lose: a restarted supervisor finds its hosts by name. It is off
the hot path: clients compute a shared session's host themselves (a stable hash over the shared
hosts) and cache dedicated hosts by name; the supervisor is asked only to create sessions (it
decides placement) and to start a dedicated host.
"""

from __future__ import annotations

import os
from typing import Any

import ray

from repertory.actors.host import host_actor_class
from repertory.actors.names import dedicated_host_name, shared_host_index, shared_host_name
from repertory.core.memory import MemoryFactory
from repertory.core.tree import NewSession, SessionRecord
from repertory.runtime.gc_tuning import freeze_startup, tune_gc
from repertory.tree.agent_specs import AgentSpec

__all__ = ["Supervisor"]


class Supervisor:
    """Creates sessions where they belong and starts dedicated hosts on demand."""

    def __init__(
        self,
        prefix: str,
        namespace: str,
        store_url: str,
        agents: dict[str, AgentSpec],
        hosts: int,
        idle_timeout: float,
        memory: MemoryFactory | None = None,
    ) -> None:
        tune_gc()  # repertory's own process, as a host is (see repertory.runtime.gc_tuning)
        freeze_startup()
        self.prefix = prefix
        self.namespace = namespace
        self.store_url = store_url
        self.agents = dict(agents)
        self.memory = memory
        self.hosts = hosts
        self.idle_timeout = idle_timeout

    def ping(self) -> dict[str, Any]:
        """Liveness: pid and the number of shared hosts."""
        return {"pid": os.getpid(), "hosts": self.hosts}

    def register_agents(self, agents: dict[str, AgentSpec]) -> None:
        """Agents that new dedicated hosts will get."""
        self.agents.update(agents)

    def _shared(self, index: int) -> Any:
        return ray.get_actor(shared_host_name(self.prefix, index), namespace=self.namespace)

    def dedicated_host(self, session_id: str, options: dict[str, Any] | None = None, cwd: str | None = None) -> str:
        """Start (or find) the dedicated host of ``session_id``; returns its Ray name."""
        name = dedicated_host_name(self.prefix, session_id)
        try:
            ray.get_actor(name, namespace=self.namespace)
            return name
        except ValueError:
            pass
        opts: dict[str, Any] = {"num_cpus": 0, **(options or {})}
        host_actor_class().options(
            name=name,
            namespace=self.namespace,
            lifetime="detached",
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=0,
            max_concurrency=1000,
            **opts,
        ).remote(
            self.store_url,
            self.agents,
            index=0,
            hosts=1,
            idle_timeout=self.idle_timeout,
            dedicated_session=session_id,
            cwd=cwd,
            memory=self.memory,
            shared_hosts=self.hosts,
        )
        return name

    async def create_session(self, spec: NewSession, options: dict[str, Any] | None = None) -> SessionRecord:
        """Persist a session on the host it belongs to (starting a dedicated host if asked).

        ``options`` are Ray actor options for a dedicated session's host. ``SessionExists`` if the id is taken.
        """
        if spec.placement == "dedicated":
            name = self.dedicated_host(spec.session_id, options, spec.cwd)
            host = ray.get_actor(name, namespace=self.namespace)
        else:
            host = self._shared(shared_host_index(spec.session_id, self.hosts))
        record: SessionRecord = await host.create_session.remote(spec)
        return record
