"""Which history rows a deletion may collect: the part of the rule every store shares.

Deleting sessions (``TreeStore.delete_sessions``) must keep every revision another thread's
lineage still reaches, and nothing else. A store gathers three things inside its transaction:

- ``reached``: every revision on the lineage of a deleted thread's head (id -> parent, entry),
  the one recursive walk up from those heads;
- the heads of remaining threads that lie in ``reached`` (a fork that has said nothing yet, a
  parent whose fork went on, a thread the store was handed a shared history for);
- the parents, in ``reached``, of revisions outside it (a remaining thread grew on top of them).

Every revision of the store lies on the lineage of some thread's head (commits move a head and
write its new revisions in one transaction, and collected rows are gone), so a revision outside
``reached`` belongs to a remaining thread: its ancestors must stay. ``collectable`` then keeps
each seed's lineage and gives back the rest. The cost is the size of the deleted lineages, not of
the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Collectable", "collectable"]


@dataclass(frozen=True, slots=True)
class Collectable:
    """Revisions no remaining lineage reaches, and the entries only they (of ``reached``) hold.

    An entry in ``entries`` may still be held by a revision outside ``reached`` (the store accepts
    histories built by hand, where two revisions share an entry): the store deletes it only when
    no remaining revision names it.
    """

    revisions: list[str]
    entries: set[str]


def collectable(reached: Mapping[str, tuple[str | None, str]], seeds: Iterable[str]) -> Collectable:
    """The revisions of ``reached`` (id -> (parent_id, entry_id)) that are on no seed's lineage.

    ``seeds`` are the revisions remaining threads need (their heads, and parents of revisions
    grown outside ``reached``); a seed outside ``reached`` keeps nothing.
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
