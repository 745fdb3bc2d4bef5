"""Test doubles that are product code: ``ScriptedModel`` (see ``repertory.testing.scripted``).

Beside it: ``repertory.testing.pg_temp`` (a throwaway PostgreSQL server) and
``repertory.testing.conformance`` (the store contracts as pytest classes; it imports pytest, so it
is not imported from here).
"""

from repertory.testing.scripted import ScriptedModel, Step, StepFunction

__all__ = ["ScriptedModel", "Step", "StepFunction"]
