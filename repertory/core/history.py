"""The immutable history graph: entries hold messages, revisions chain them into conversations.

A revision adds exactly one entry on top of its parent, so a conversation is the lineage of its
head revision, oldest first. Entries and revisions are frozen and their ids are minted once, which
is what makes a fork free: a new thread simply points at an existing revision, and both threads
grow their own revisions on top of the shared prefix. A message is stored once however many
threads reach it.

``MessageHistory`` is the in-memory view of one lineage (or of a graph that contains it). The
records inside are immutable; the container grows in place through :meth:`MessageHistory.append`
so that a session keeps its history in memory between steps at O(1) per message instead of
copying the conversation every step.

A context boundary (a message with ``boundary=True``: a compaction's summary) splits a lineage in
two for the model only: it sees the latest boundary and what follows it
(:meth:`MessageHistory.context_messages`), while ``messages`` is still every message. A compaction
puts its summary *into* the lineage, right after the last message it summarises, with
:meth:`MessageHistory.insert`: the messages it keeps get new revisions on top of the summary that
point at their existing entries, so the lineage reads in the order the model sees it, no message
is copied and no revision or entry is changed or deleted.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from repertory.core.ids import Id, new_id, now_ms
from repertory.core.messages import ModelMessage
from repertory.core.trusted import trusted

__all__ = ["HistoryEntry", "HistoryRevision", "MessageHistory", "HistoryIntegrityError"]


class HistoryIntegrityError(ValueError):
    """A MessageHistory does not hold a revision or entry its own lineage needs."""


class HistoryEntry(BaseModel):
    """One stored message, written once and shared by every revision and thread that reaches it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: Id
    message: ModelMessage
    created_at: int


class HistoryRevision(BaseModel):
    """One step of a conversation: ``entry_id`` added on top of ``parent_id`` (``depth`` 1 at a root)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: Id
    parent_id: Id | None
    entry_id: Id
    depth: int = Field(ge=1)
    created_at: int


class MessageHistory(BaseModel):
    """A view of the history graph headed at ``revision_id``; ``messages`` is its lineage, oldest first."""

    model_config = ConfigDict(extra="forbid")
    revision_id: str | None = None
    entries: list[HistoryEntry] = Field(default_factory=list)
    revisions: list[HistoryRevision] = Field(default_factory=list)

    # Lookup indexes, rebuilt lazily when someone changed the public lists behind our back. They
    # are read through ``__pydantic_private__`` directly: pydantic's attribute hook costs ~1.7 us
    # per private read, which was a fifth of a whole step on the hot path.
    _rev_index: dict[str, HistoryRevision] = PrivateAttr(default_factory=dict)
    _entry_index: dict[str, HistoryEntry] = PrivateAttr(default_factory=dict)
    # The context at a head, kept once asked for and grown by ``append``: a drive starts from it on
    # every turn, and walking the lineage again cost O(depth) per turn (14 us at depth 12, 86 us at
    # 100). (head, length, messages): the length tells a list another view grew (``model_copy``
    # shares private values) from ours, so such a view walks again instead of reading it.
    _context: tuple[str, int, list[ModelMessage]] | None = PrivateAttr(default=None)
    # (head, n, revisions, entries): ``revisions[:n]`` is the head's lineage root first and
    # ``entries[:n]`` its entries, one each, in the same order, while those are still the lists.
    # Known when the lists were built so (``of_lineage``, ``append`` onto such a view or onto an
    # empty one), it lets ``messages`` and a first ``context_messages`` read the lists instead of
    # walking the lineage by id: at depth 10,000 those walks cost 15 and 33 ms, against 10 for the
    # cached ``load_history`` that made the view.
    _line: tuple[str, int, list[HistoryRevision], list[HistoryEntry]] | None = PrivateAttr(default=None)

    @classmethod
    def of_lineage(
        cls, revision_id: str | None, revisions: list[HistoryRevision], entries: list[HistoryEntry]
    ) -> MessageHistory:
        """A view from lists that are one lineage: ``revisions`` root first, ``entries[i]`` that of ``revisions[i]``.

        What a store builds from a lineage query, whose rows are that by construction. Like
        ``trusted`` records, the order is the caller's word: checking every pair would cost as much
        as the walk this spares (~11 ms at depth 10,000), so only the ends are checked (the lengths,
        the root, the head, the first and last entries); lists failing those make an ordinary view,
        whose reads walk by id and say what is missing. Lists reordered in the middle would read
        in that order: build such a view with the constructor.
        """
        history = cls(revision_id=revision_id, entries=entries, revisions=revisions)
        n = len(revisions)
        if (
            n
            and revision_id is not None
            and len(entries) == n
            and revisions[-1].id == revision_id
            and revisions[-1].depth == n
            and revisions[0].parent_id is None
            and entries[0].id == revisions[0].entry_id
            and entries[-1].id == revisions[-1].entry_id
        ):
            private = history.__pydantic_private__
            assert private is not None
            private["_line"] = (revision_id, n, history.revisions, history.entries)
        return history

    def _line_messages(self) -> list[ModelMessage] | None:
        """The lineage's messages read from the lists, when they are known to be it (``_line``); else ``None``."""
        private = self.__pydantic_private__
        assert private is not None
        line = private.get("_line")
        if line is None or line[0] != self.revision_id:
            return None
        n = line[1]
        revisions, entries = self.revisions, self.entries
        if revisions is not line[2] or entries is not line[3] or len(revisions) < n or len(entries) < n:
            private["_line"] = None  # the lists were changed behind our back
            return None
        return [e.message for e in entries[:n]]

    def _revs(self) -> dict[str, HistoryRevision]:
        private = self.__pydantic_private__
        assert private is not None
        index: dict[str, HistoryRevision] = private["_rev_index"]
        if len(index) != len(self.revisions):
            index = private["_rev_index"] = {r.id: r for r in self.revisions}
        return index

    def _entries(self) -> dict[str, HistoryEntry]:
        private = self.__pydantic_private__
        assert private is not None
        index: dict[str, HistoryEntry] = private["_entry_index"]
        if len(index) != len(self.entries):
            index = private["_entry_index"] = {e.id: e for e in self.entries}
        return index

    def revision(self, revision_id: str) -> HistoryRevision | None:
        """The revision with this id, if this view holds it."""
        return self._revs().get(revision_id)

    def entry(self, entry_id: str) -> HistoryEntry | None:
        """The entry with this id, if this view holds it."""
        return self._entries().get(entry_id)

    @property
    def head(self) -> HistoryRevision | None:
        """The head revision, or ``None`` for an empty history."""
        return None if self.revision_id is None else self._require_revision(self.revision_id)

    @property
    def depth(self) -> int:
        """Number of messages on the head's lineage."""
        head = self.head
        return 0 if head is None else head.depth

    def _require_revision(self, revision_id: str) -> HistoryRevision:
        rev = self._revs().get(revision_id)
        if rev is None:
            raise HistoryIntegrityError(f"history does not hold revision {revision_id!r}")
        return rev

    def walk_back(self, stop_at: str | None = None) -> list[HistoryRevision]:
        """Revisions from the head back towards the root, newest first, stopping before ``stop_at``.

        This is how a commit finds what it must write: the revisions added since the base it
        last read. The cost is the number of revisions walked, not the history's length.
        """
        out: list[HistoryRevision] = []
        current = self.revision_id
        revs = self._revs()
        while current is not None and current != stop_at:
            rev = revs.get(current)
            if rev is None:
                raise HistoryIntegrityError(f"history does not hold revision {current!r}")
            out.append(rev)
            current = rev.parent_id
        return out

    def lineage(self) -> list[HistoryRevision]:
        """The head's lineage, root first."""
        out = self.walk_back()
        out.reverse()
        return out

    @property
    def messages(self) -> list[ModelMessage]:
        """The conversation at the head, oldest message first."""
        listed = self._line_messages()
        if listed is not None:
            return listed
        # One pass from the head down, not the lineage then its entries: at depth 10,000 the two
        # walks cost as much as a cached ``load_history`` itself.
        revs, entries = self._revs(), self._entries()
        out: list[ModelMessage] = []
        current = self.revision_id
        while current is not None:
            rev = revs.get(current)
            if rev is None:
                raise HistoryIntegrityError(f"history does not hold revision {current!r}")
            entry = entries.get(rev.entry_id)
            if entry is None:
                raise HistoryIntegrityError(f"history does not hold entry {rev.entry_id!r}")
            out.append(entry.message)
            current = rev.parent_id
        out.reverse()
        return out

    def context_revisions(self) -> list[HistoryRevision]:
        """The revisions the model sees, root first: from the latest context boundary to the head.

        The whole lineage when there is no boundary. The walk stops at the boundary, so its cost is
        the context's length, not the history's.
        """
        out: list[HistoryRevision] = []
        current = self.revision_id
        revs, entries = self._revs(), self._entries()
        while current is not None:
            rev = revs.get(current)
            if rev is None:
                raise HistoryIntegrityError(f"history does not hold revision {current!r}")
            out.append(rev)
            entry = entries.get(rev.entry_id)
            if entry is None:
                raise HistoryIntegrityError(f"history does not hold entry {rev.entry_id!r}")
            if entry.message.boundary:
                break
            current = rev.parent_id
        out.reverse()
        return out

    def context_messages(self) -> list[ModelMessage]:
        """What the model sees of this conversation: the latest context boundary and every message after it.

        Without a boundary this is ``messages``. The agent's instructions (and memory recalled for a
        run) are added by the engine for each request; they are never in the history.
        """
        private = self.__pydantic_private__
        assert private is not None
        cached = private.get("_context")
        head = self.revision_id
        if cached is not None and cached[0] == head and len(cached[2]) == cached[1]:
            return list(cached[2])
        listed = self._line_messages()
        if listed is not None:
            start = next((i for i in range(len(listed) - 1, -1, -1) if listed[i].boundary), 0)
            out = listed[start:]
        else:
            entries = self._entries()
            out = [entries[r.entry_id].message for r in self.context_revisions()]
        private["_context"] = None if head is None else (head, len(out), out)
        return list(out)

    def reaches(self, revision_id: str) -> bool:
        """True when ``revision_id`` is on the head's lineage (the head itself included)."""
        target = self._revs().get(revision_id)
        head = self.head
        if target is None or head is None or target.depth > head.depth:
            return False
        current: HistoryRevision | None = head
        revs = self._revs()
        while current is not None and current.depth > target.depth:
            current = revs.get(current.parent_id) if current.parent_id is not None else None
        return current is not None and current.id == revision_id

    def append(self, message: ModelMessage, *, entry_id: str | None = None) -> HistoryRevision:
        """Add ``message`` on top of the head, in place, and return the new revision.

        The new entry and revision get fresh ids (``entry_id``: one minted before the message
        existed, as a streamed reply's deltas name it); nothing already in the graph changes, so
        any other view that shares the old head is unaffected.
        """
        parent = self.head
        at = now_ms()
        # Minted here from our own ids around a message that is already a record: nothing to validate.
        entry = trusted(HistoryEntry, id=entry_id or new_id(), message=message, created_at=at)
        rev = trusted(
            HistoryRevision,
            id=new_id(),
            parent_id=None if parent is None else parent.id,
            entry_id=entry.id,
            depth=1 if parent is None else parent.depth + 1,
            created_at=at,
        )
        entries, revs = self._entries(), self._revs()
        private = self.__pydantic_private__
        assert private is not None
        line = private.get("_line")
        revisions, listed = self.revisions, self.entries
        n = len(revisions)
        if parent is None and n == 0 and not listed:
            line = (rev.id, 1, revisions, listed)  # an empty view growing: its lists are its lineage
        elif (
            line is not None
            and parent is not None
            and line[0] == parent.id
            and line[1] == n == len(listed)
            and line[2] is revisions
            and line[3] is listed
        ):
            line = (rev.id, n + 1, revisions, listed)
        else:
            line = None
        private["_line"] = line
        self.entries.append(entry)
        entries[entry.id] = entry
        self.revisions.append(rev)
        revs[rev.id] = rev
        self.revision_id = rev.id
        cached = private.get("_context")
        if cached is not None:
            if parent is not None and cached[0] == parent.id and len(cached[2]) == cached[1]:
                context = [message] if message.boundary else cached[2]
                if not message.boundary:
                    context.append(message)
                private["_context"] = (rev.id, len(context), context)
            else:
                private["_context"] = None
        return rev

    def _add_revision(self, entry: HistoryEntry, at: int) -> HistoryRevision:
        """A new revision of ``entry`` (new or already in the graph) on top of the head; it becomes the head."""
        parent = self.head
        rev = trusted(
            HistoryRevision,
            id=new_id(),
            parent_id=None if parent is None else parent.id,
            entry_id=entry.id,
            depth=1 if parent is None else parent.depth + 1,
            created_at=at,
        )
        revs = self._revs()
        private = self.__pydantic_private__
        assert private is not None
        private["_line"] = None  # a revision without an entry of its own: the lists are no longer aligned
        self.revisions.append(rev)
        revs[rev.id] = rev
        self.revision_id = rev.id
        return rev

    def insert(self, message: ModelMessage, *, after: str) -> HistoryRevision:
        """Put ``message`` into the head's lineage right after revision ``after``; return its revision.

        The revisions that followed ``after`` are added again on top of the new one, each pointing
        at the entry it already had, so the new head's lineage reads ``..., after, message, <what
        followed>``: the messages are shared, not copied, and cost a revision row each. Nothing in
        the graph changes: the old head and its revisions stay, and any thread pointing at them is
        unaffected. This is how a compaction's summary takes its place before the messages it keeps.
        """
        if not self.reaches(after):
            raise HistoryIntegrityError(f"revision {after!r} is not on the head's lineage")
        followed = self.walk_back(stop_at=after)
        followed.reverse()
        entries = self._entries()
        at = now_ms()
        private = self.__pydantic_private__
        assert private is not None
        private["_context"] = None  # the lineage is rebuilt from ``after``: the next read walks it
        self.revision_id = after
        entry = trusted(HistoryEntry, id=new_id(), message=message, created_at=at)
        self.entries.append(entry)
        entries[entry.id] = entry
        inserted = self._add_revision(entry, at)
        for rev in followed:
            self._add_revision(entries[rev.entry_id], at)
        return inserted

    def extend(self, messages: list[ModelMessage]) -> HistoryRevision | None:
        """Append several messages in order; returns the last new revision (``None`` if none)."""
        rev: HistoryRevision | None = None
        for message in messages:
            rev = self.append(message)
        return rev

    def branch(self, revision_id: str | None = None) -> MessageHistory:
        """A new view sharing this graph's records, headed at ``revision_id`` (default: this head).

        Appending to the branch never changes this view, and vice versa: records are shared,
        containers are not. This is a fork in memory; it copies references, not messages.
        """
        target = self.revision_id if revision_id is None else revision_id
        if target is not None:
            self._require_revision(target)
        out = MessageHistory(revision_id=target, entries=list(self.entries), revisions=list(self.revisions))
        return out
