"""The Ray cluster of a ``--backend ray`` soak: a head and two worker nodes, started by the conductor.

The session hosts ask for a resource only the worker nodes have (``session_hosts``), so removing a
worker node (``ray_node_remove``, ``remove_node(allow_graceful=False)``: raylet and workers die at
once) takes hosts with it; a fresh worker node joins in its place, and Ray restarts the hosts
there. Health checks are tuned as in ``benchmarks.ray_failover`` so a dead node is noticed in
about two seconds. The driver and the approver join it by its address; the conductor never
initialises Ray itself (it stays a process no fault touches).
"""

from __future__ import annotations

from typing import Any

from benchmarks.ray_failover import HEALTH

__all__ = ["HOST_OPTIONS", "ChaosCluster", "start_cluster"]

HOST_OPTIONS: dict[str, Any] = {"resources": {"session_hosts": 1}}
"""Ray actor options of the soak's session hosts: on a worker node, never on the head."""


class ChaosCluster:
    """The cluster and its worker nodes; ``replace_node`` is the node-removal fault."""

    def __init__(self) -> None:
        from ray.cluster_utils import Cluster

        self.cluster: Any = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 2, "include_dashboard": False, "_system_config": HEALTH},
        )
        self.workers = [self._add() for _ in range(2)]
        self.cluster.wait_for_nodes()
        self.address: str = self.cluster.address

    def _add(self) -> Any:
        return self.cluster.add_node(num_cpus=1, resources={"session_hosts": 100})

    def replace_node(self, index: int) -> str:
        """Kill worker node ``index`` hard and start a fresh one in its place; returns the dead node's id."""
        node = self.workers[index % len(self.workers)]
        self.cluster.remove_node(node, allow_graceful=False)
        self.workers[index % len(self.workers)] = self._add()
        self.cluster.wait_for_nodes()
        return str(node.node_id)

    def shutdown(self) -> None:
        """Stop every node of the cluster."""
        self.cluster.shutdown()


def start_cluster() -> ChaosCluster:
    """A fresh three-node cluster on this machine."""
    return ChaosCluster()
