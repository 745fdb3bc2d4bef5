"""Which history rows a deletion may collect, and the bookkeeping at write time that lets it know.

Deleting sessions (``TreeStore.delete_sessions``) must keep every revision another thread's
lineage still reaches, and nothing else, without an index on rows written at every step (three
such indexes cost ~50 us and three WAL pages per commit, measured). So every store records
sharing where it is created, which is rare:

- each revision remembers the thread whose commit first wrote it (its *writer*);
- a *pin* ``(revision, thread)`` marks where a thread's lineage joins history it did not write:
  the head it is created on (a fork), the held revision a commit attaches its new ones to when
  they do not grow from the thread's own head, and any revision a commit walked that the store
  already held;
- a commit whose lineage does not continue from its base (a compaction re-adding the messages
  it keeps after its summary) pins that base for its thread too (``commit_pins`` gives both),
  and a head move
  pins the head it leaves and where it lands (``head_move_pins``): the thread still needs them
  (its earlier runs point there), and a deletion of the thread must reach them;
- an entry a commit found already held (two revisions naming one entry) is marked shared, unless
  the base's own lineage names it (a compaction re-adding a kept message): then every revision
  naming it is recorded (``base_namers``, the store's *namers*), and a deletion collects it with
  the last of them.

Then every revision on a thread's lineage is its own (it wrote it) or an ancestor of one of its
pins, by induction over its commits. A deletion walks up from the deleted threads' heads and
from their pins (``reached``, id -> (parent, entry)): so a thread's former lineages go with it,
and a remaining thread's pin on one of them is seen (a fork at the head a compaction left).
It seeds every reached revision whose writer is a remaining thread (or unknown: rows written
before this bookkeeping are never collected) and every reached revision a remaining thread
pinned, and ``collectable`` keeps each seed's lineage. A kept revision whose writer is deleted
now gets the remaining thread that needed it as its writer, and that thread pins where its walk
climbed onto a revision it does not own (``Collectable.writers``, ``Collectable.pins``): the
invariant holds after the deletion too, so a later one that reaches the revision from another
lineage, and not the pin that kept it, still keeps it (without this, deleting a parent and then
its other fork collected what a fork at the parent's left head reads).
The rule errs toward keeping, never toward losing a message someone can load. Heads left before
schema version 9 were not pinned, so their lineages stay, as they always did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from repertory.core.history import HistoryRevision, MessageHistory

__all__ = ["Collectable", "base_namers", "collectable", "commit_pins", "head_move_pins"]


@dataclass(frozen=True, slots=True)
class Collectable:
    """Revisions no remaining lineage reaches, the entries only they (of ``reached``) hold, and the needs to record.

    An entry marked shared stays even so (the store checks): another revision may name it.
    ``writers`` and ``pins`` keep the invariant for later deletions: a kept revision whose writer
    is gone gets the remaining thread that needs it as its writer (``None``: nobody knows, so it
    is never collected), and where that thread's lineage climbs onto a revision it does not own,
    it pins it. Without them a later deletion that reaches the revision from another lineage and
    not the pin that kept it would collect it.
    """

    revisions: list[str]
    entries: set[str]
    writers: dict[str, str | None] = field(default_factory=dict)
    pins: list[tuple[str, str]] = field(default_factory=list)


def _joined(new_revisions: list[HistoryRevision], head: str | None) -> str | None:
    """Where a write's new lineage stands on stored history: the parent of its root-most new revision."""
    return new_revisions[0].parent_id if new_revisions else head


def commit_pins(new_revisions: list[HistoryRevision], head: str | None, base: str | None) -> list[str]:
    """What a commit pins for its thread: nothing for a step (its lineage grows from ``base``), else two.

    ``new_revisions`` are the ones the commit writes, root-most first. A commit whose lineage does
    not grow from ``base`` (a compaction re-adding the messages it keeps after its summary) pins
    where it joins history it did not write (the *attach point*, unless it starts from nothing)
    and the base it leaves: the thread still needs it (its earlier runs point there), and without
    the pin a compaction's former lineage would be reached by no deletion of the thread, nor
    would a fork's pin on it. A thread's first commit pins nothing.
    """
    joined = _joined(new_revisions, head)
    if joined == base:
        return []
    return [r for r in (joined, base) if r is not None]


def head_move_pins(new_revisions: list[HistoryRevision], head: str | None, base: str | None) -> list[str]:
    """What a head move pins for its thread: where its new lineage joins stored history, and the head it left.

    A head move (a run from an earlier checkpoint, a fork's open calls) may land on any stored
    revision, its own thread's or another's, and its revisions have no writer (no deletion
    collects them); the pins make the lineage it lands on, and the one it leaves, needed.
    """
    joined = _joined(new_revisions, head)
    return sorted({r for r in (joined, base) if r is not None})


def base_namers(history: MessageHistory, base: str | None, wanted: Iterable[str]) -> dict[str, list[str]]:
    """Of the ``wanted`` entries, those ``base``'s lineage names, each with the revisions there naming it.

    Asked of commits that do not grow, about the entries they name again: a compaction re-adding
    the messages it keeps. The store records every namer of such an entry (these and the
    commit's own), so a deletion collects the entry when the last of them goes and not before;
    an entry found stored that the base's lineage does not name is marked shared, as ever.
    """
    want = set(wanted)
    namers: dict[str, list[str]] = {}
    current = None if base is None or not want else history.revision(base)
    while current is not None:
        if current.entry_id in want:
            namers.setdefault(current.entry_id, []).append(current.id)
        current = None if current.parent_id is None else history.revision(current.parent_id)
    return namers


def collectable(
    reached: Mapping[str, tuple[str | None, str]],
    seeds: Iterable[tuple[str, str | None]],
    writer: Callable[[str], str | None],
    alive: Callable[[str], bool],
) -> Collectable:
    """The revisions of ``reached`` (id -> (parent_id, entry_id)) that are on no seed's lineage.

    ``seeds`` are ``(revision, thread)``: a revision a remaining thread needs (it wrote or pinned
    it; ``None`` when the revision has no known writer). ``writer`` is a reached revision's
    writer and ``alive`` whether a thread remains. A seed outside ``reached`` keeps nothing.
    """
    kept: dict[str, str | None] = {}  # kept revision -> the thread that owns it now
    writers: dict[str, str | None] = {}
    pins: list[tuple[str, str]] = []
    for seed, needer in seeds:
        current: str | None = seed
        covered = False  # the walk passed a pin of ``needer``: what is above is its ancestor
        while current is not None and current in reached:
            owner = kept.get(current, "")
            if owner == "":
                stored = writer(current)
                if stored is not None and not alive(stored):
                    writers[current] = owner = needer  # its writer goes: the thread that needs it owns it
                else:
                    owner = stored
            if needer is not None and owner != needer and not covered:
                pins.append((current, needer))
                covered = True
            if current in kept:
                break
            kept[current] = owner
            current = reached[current][0]
    doomed = [rid for rid in reached if rid not in kept]
    held = {reached[rid][1] for rid in kept}
    return Collectable(revisions=doomed, entries={reached[rid][1] for rid in doomed} - held, writers=writers, pins=pins)
