"""Test doubles that are product code: ``ScriptedModel`` (see ``repertory.runtime.testing``)."""

from repertory.runtime.testing import ScriptedModel, Step, StepFunction

__all__ = ["ScriptedModel", "Step", "StepFunction"]
