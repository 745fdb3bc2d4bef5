"""``messages`` and ``context_messages`` read a view's lists when they are its lineage, and agree with a walk by id.

A view a store builds from one lineage (``MessageHistory.of_lineage``), or one grown by ``append``
from such a view or from an empty one, answers both from its lists instead of walking revision ids
(at depth 10,000: 1 and 3 ms against 15 and 33 ms). Hypothesis drives random sequences of what can
change a view (appends, compaction-style inserts, a head moved by hand, a copy that grows beside
it, lists replaced or reordered from outside, a reload through ``of_lineage``) and after each one
both reads must equal what walking the head's lineage by id says.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repertory import MessageHistory, ModelMessage, TextPart
from repertory.core.history import HistoryEntry, HistoryIntegrityError, HistoryRevision

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.booleans()),  # a message; True: a context boundary
        st.tuples(st.just("insert"), st.integers(0, 1_000)),  # a summary after a revision of the lineage
        st.tuples(st.just("move"), st.integers(0, 1_000)),  # the head set by hand to a revision of the lineage
        st.tuples(st.just("copy"), st.integers(0, 3)),  # a copy appends beside the view
        st.tuples(st.just("reversed"), st.just(0)),  # the public lists replaced, in another order
        st.tuples(st.just("reload"), st.booleans()),  # of_lineage of the lineage; False: entries misaligned
    ),
    min_size=1,
    max_size=40,
)


def _message(text: str, boundary: bool = False) -> ModelMessage:
    return ModelMessage(role="user", parts=[TextPart(text=text)], boundary=boundary)


def _walked(history: MessageHistory) -> list[ModelMessage]:
    """The head's lineage read by id through the public lookups, oldest first."""
    out: list[ModelMessage] = []
    current = history.revision_id
    while current is not None:
        rev = history.revision(current)
        assert rev is not None
        entry = history.entry(rev.entry_id)
        assert entry is not None
        out.append(entry.message)
        current = rev.parent_id
    out.reverse()
    return out


def _context(messages: list[ModelMessage]) -> list[ModelMessage]:
    start = max((i for i, m in enumerate(messages) if m.boundary), default=0)
    return messages[start:]


def _lineage_lists(history: MessageHistory) -> tuple[list[HistoryRevision], list[HistoryEntry]]:
    revisions = history.lineage()
    entries = [history.entry(r.entry_id) for r in revisions]
    assert all(e is not None for e in entries)
    return revisions, [e for e in entries if e is not None]


def _check(history: MessageHistory) -> None:
    walked = _walked(history)
    assert history.messages == walked
    assert history.context_messages() == _context(walked)
    assert history.context_messages() == _context(walked)  # the cached answer too


@settings(deadline=None, max_examples=80)
@given(_ops)
def test_list_reads_agree_with_a_walk_by_id(ops: list[tuple[str, int | bool]]) -> None:
    history = MessageHistory()
    made = 0
    for op, arg in ops:
        lineage = history.lineage()
        if op == "append":
            made += 1
            history.append(_message(f"m{made}", boundary=bool(arg)))
        elif op == "insert" and lineage:
            made += 1
            history.insert(_message(f"summary {made}", boundary=True), after=lineage[int(arg) % len(lineage)].id)
        elif op == "move" and lineage:
            history.revision_id = lineage[int(arg) % len(lineage)].id
        elif op == "copy":
            copy = history.model_copy()
            for _ in range(int(arg)):
                made += 1
                copy.append(ModelMessage.user(f"copy {made}"))
            _check(copy)
        elif op == "reversed":
            history.revisions = list(reversed(history.revisions))
            history.entries = list(reversed(history.entries))
        elif op == "reload" and lineage:
            revisions, entries = _lineage_lists(history)
            if not arg and len(entries) > 1:
                entries = entries[1:] + entries[:1]  # not aligned at the ends: the view must walk by id
            history = MessageHistory.of_lineage(history.revision_id, revisions, entries)
        _check(history)


def test_of_lineage_reads_a_compacted_lineage_from_its_lists() -> None:
    """One entry named twice (a kept message) and a boundary: both reads as the walk says."""
    history = MessageHistory()
    for text in ("one", "two", "three", "four"):
        history.append(ModelMessage.user(text))
    history.insert(_message("summary", boundary=True), after=history.lineage()[1].id)
    revisions, entries = _lineage_lists(history)
    loaded = MessageHistory.of_lineage(history.revision_id, revisions, entries)
    assert [m.text for m in loaded.messages] == ["one", "two", "summary", "three", "four"]
    assert [m.text for m in loaded.context_messages()] == ["summary", "three", "four"]
    loaded.append(ModelMessage.assistant("five"))
    assert [m.text for m in loaded.messages] == ["one", "two", "summary", "three", "four", "five"]
    assert [m.text for m in loaded.context_messages()] == ["summary", "three", "four", "five"]


def test_of_lineage_of_lists_that_are_not_a_lineage_still_reads_by_id() -> None:
    """Lists whose ends are not a lineage's (out of order, a gap) make an ordinary view: reads walk by id."""
    history = MessageHistory()
    for text in ("one", "two", "three"):
        history.append(ModelMessage.user(text))
    revisions, entries = _lineage_lists(history)
    shuffled = MessageHistory.of_lineage(history.revision_id, [revisions[1], revisions[0], revisions[2]], entries)
    assert [m.text for m in shuffled.messages] == ["one", "two", "three"]
    gap = MessageHistory.of_lineage(history.revision_id, [revisions[0], revisions[2]], [entries[0], entries[2]])
    with pytest.raises(HistoryIntegrityError):
        _ = gap.messages
