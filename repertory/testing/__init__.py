"""Test doubles that are product code: ``ScriptedModel`` (``repertory.testing.scripted``) and
``ReplayModel`` (``repertory.testing.replay``)."""

from repertory.testing.replay import ReplayModel
from repertory.testing.scripted import ScriptedModel, Step, StepFunction

__all__ = ["ReplayModel", "ScriptedModel", "Step", "StepFunction"]
