"""The session tree: ``Runtime``, ``SessionHandle`` and ``TurnHandle`` over one typed backend seam.

``SessionBackend`` (``repertory.runtime.backend``, beside its reference implementation ``LocalHost``,
re-exported here) is everything the tree asks of a backend; backends are found by name
(``backends.py``: registered, or declared in the entry-point group ``repertory.backends``), so this
package never imports the Ray backend it may run on, nor names its options.
"""

from repertory.runtime.backend import SessionBackend
from repertory.tree.backends import BackendConfig, BackendFactory, BackendOptions, register_backend, unregister_backend
from repertory.tree.delegation import AgentTool, TreeServices, agent_tool
from repertory.tree.handle import Disposable, SessionHandle, TurnHandle
from repertory.tree.runtime import Runtime

__all__ = [
    "AgentTool",
    "BackendConfig",
    "BackendFactory",
    "BackendOptions",
    "Disposable",
    "Runtime",
    "SessionBackend",
    "SessionHandle",
    "TreeServices",
    "TurnHandle",
    "agent_tool",
    "register_backend",
    "unregister_backend",
]
