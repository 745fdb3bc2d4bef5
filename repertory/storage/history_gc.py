"""Which history rows a deletion may collect, and the bookkeeping at write time that lets it know.

Deleting sessions (``TreeStore.delete_sessions``) must keep every revision another thread's
lineage still reaches, and nothing else, without an index on rows written at every step (three
such indexes cost ~50 us and three WAL pages per commit, measured). So every store records
sharing where it is created, which is rare:

- each revision remembers the thread whose commit first wrote it (its *writer*);
- a *pin* ``(revision, thread)`` marks where a thread's lineage joins history it did not write:
  the head it is created on (a fork), the held revision a commit attaches its new ones to when
  they do not grow from the thread's own head (``attach_point``), and any revision a commit
  walked that the store already held;
- an entry a commit found already held (two revisions naming one entry) is marked shared.

Then every revision on a thread's lineage is its own (it wrote it) or an ancestor of one of its
pins, by induction over its commits. A deletion walks up from the deleted threads' heads
(``reached``, id -> (parent, entry)), seeds every reached revision whose writer is a remaining
thread (or unknown: rows written before this bookkeeping are never collected) and every
reached revision a remaining thread pinned, and ``collectable`` keeps each seed's lineage. What
it keeps may include a revision nobody reaches any more (a thread that moved its head
elsewhere): the rule errs toward keeping, never toward losing a message someone can load.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from repertory.core.history import HistoryRevision

__all__ = ["Collectable", "attach_point", "collectable"]


@dataclass(frozen=True, slots=True)
class Collectable:
    """Revisions no remaining lineage reaches, and the entries only they (of ``reached``) hold.

    An entry marked shared stays even so (the store checks): another revision may name it.
    """

    revisions: list[str]
    entries: set[str]


def attach_point(new_revisions: list[HistoryRevision], head: str | None, base: str | None) -> str | None:
    """Where a commit's lineage joins history this commit did not write, when that is not the thread's own head.

    ``new_revisions`` are the ones the commit writes, root-most first. ``None`` when the commit
    grows from ``base`` (the thread's own head) or starts a history from nothing.
    """
    joined = new_revisions[0].parent_id if new_revisions else head
    return None if joined is None or joined == base else joined


def collectable(reached: Mapping[str, tuple[str | None, str]], seeds: Iterable[str]) -> Collectable:
    """The revisions of ``reached`` (id -> (parent_id, entry_id)) that are on no seed's lineage.

    ``seeds`` are the revisions remaining threads need; a seed outside ``reached`` keeps nothing.
    """
    kept: set[str] = set()
    for seed in seeds:
        current: str | None = seed
        while current is not None and current in reached and current not in kept:
            kept.add(current)
            current = reached[current][0]
    doomed = [rid for rid in reached if rid not in kept]
    held = {reached[rid][1] for rid in kept}
    return Collectable(revisions=doomed, entries={reached[rid][1] for rid in doomed} - held)
