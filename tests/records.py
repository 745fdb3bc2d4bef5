"""Builders for the records the storage tests write: the shipped suites' own, from ``repertory.testing.conformance``."""

from repertory.testing.conformance.records import commit, full_runs, history_of, pointers, rich_messages

__all__ = ["commit", "full_runs", "history_of", "pointers", "rich_messages"]
