"""Test doubles that are product code: ``ScriptedModel`` (``repertory.testing.scripted``) and
``ReplayModel`` (``repertory.testing.replay``).

Beside them: ``repertory.testing.pg_temp`` (a throwaway PostgreSQL server) and
``repertory.testing.conformance`` (the store contracts as pytest classes; it imports pytest, so it
is not imported from here).
"""

from repertory.testing.clock import ManualClock
from repertory.testing.replay import ReplayModel
from repertory.testing.scripted import ScriptedModel, Step, StepFunction

__all__ = ["ManualClock", "ReplayModel", "ScriptedModel", "Step", "StepFunction"]
