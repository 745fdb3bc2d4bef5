"""Test doubles that are product code: ``ScriptedModel`` (see ``repertory.testing.scripted``)."""

from repertory.testing.scripted import ScriptedModel, Step, StepFunction

__all__ = ["ScriptedModel", "Step", "StepFunction"]
