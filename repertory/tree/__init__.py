"""The session tree: ``Runtime``, ``SessionHandle`` and ``TurnHandle`` over one typed backend seam."""

from repertory.tree.handle import Disposable, SessionHandle, TurnHandle
from repertory.tree.runtime import Runtime

__all__ = ["Disposable", "Runtime", "SessionHandle", "TurnHandle"]
