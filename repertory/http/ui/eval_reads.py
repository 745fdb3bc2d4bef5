"""What the eval pages show: the evals in the store, and each case's original turn beside its variant's.

An eval (``repertory.evals.run_eval``) leaves one fork per case in the store: a root session (a
tree of its own) tagged ``{"eval": name, "eval_case": source turn id, "source_session": id}``.
These pages read those forks and the source turns through the store, so they show what the store
holds: replies, tool calls with their results, statuses, usage. Scores are kept nowhere but the
eval's Parquet files (``eval_scores`` under the folder given to ``run_eval(out_dir=)``); when the
server is told that folder (``repertory ui --export DIR``), ``read_scores`` reads them for the
cases a page shows.

The UI does not import ``repertory.evals``: the two are siblings in the layers, and a server needs
no pydantic-evals. The tags are the documented metadata keys, and a turn is read by the rule
``repertory.evals`` reads it with (its input looked for from the depth its run started at, since
a compaction during the run may put it further on).

Bounds: the forks are found by one store search (``page_sessions``: root sessions whose id starts
with, or whose title holds, ``eval``, as every eval's fork does; its metadata decides), of the
viewer's owner only, at most ``EVAL_SCAN`` of them, newest first; an eval's page shows at most
``EVAL_CASES`` cases. The scores are read with one DuckDB query filtered by eval, at most
``SCORE_ROWS`` rows. Tenancy: the search is the owner's (through the owner index, as the sessions
list's), every fork also passes ``sees``, and a case's source session is shown only when the
viewer sees it too.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repertory.core.state import RunState, Usage
from repertory.core.store import TreeStore
from repertory.core.tree import SessionRecord, TurnRecord
from repertory.http.ui.conversation import CallView, conversation
from repertory.http.ui.reads import Sees

__all__ = [
    "CASE_KEY",
    "EVAL_CASES",
    "EVAL_KEY",
    "EVAL_SCAN",
    "SCORE_ROWS",
    "SOURCE_KEY",
    "CaseView",
    "EvalSummary",
    "Score",
    "Side",
    "eval_cases",
    "eval_forks",
    "eval_summaries",
    "read_scores",
]

EVAL_KEY = "eval"
"""The metadata key of an eval's fork: the eval's name."""
CASE_KEY = "eval_case"
"""The metadata key of an eval's fork: the source turn's submission id."""
SOURCE_KEY = "source_session"
"""The metadata key of an eval's fork: the session the case comes from."""
EVAL_SCAN = 5000
"""The most eval forks the pages read (newest first)."""
EVAL_CASES = 200
"""The most cases an eval's page shows."""
SCORE_ROWS = 20_000
"""The most score rows an eval's page reads from the Parquet files."""
_PAGE = 500
_NEEDLE = "eval"  # every fork's id starts with "eval-" and its title is "eval <name>"


@dataclass
class Score:
    """One result of an evaluator on one side of a case, as ``eval_scores`` holds it."""

    eval: str
    name: str
    kind: str
    value: float | None
    label: str | None
    reason: str | None

    @property
    def shown(self) -> str:
        """``pass``/``fail`` for an assertion, the number for a score, the text for a label."""
        if self.kind == "assertion":
            return "pass" if self.value == 1 else "fail"
        if self.kind == "score" and self.value is not None:
            return f"{self.value:,.4g}"
        return self.label or ""

    @property
    def verdict(self) -> Literal["pass", "fail", ""]:
        """The assertion's outcome (a class for the page); empty for scores and labels."""
        if self.kind != "assertion":
            return ""
        return "pass" if self.value == 1 else "fail"


@dataclass
class Side:
    """One side of a case: a turn of a session (the original's in its source, the variant's in its fork)."""

    session: SessionRecord | None
    turn: TurnRecord | None
    run: RunState | None
    reply: str | None = None
    calls: list[CallView] = field(default_factory=list)
    model: str | None = None  # the model that answered (its last assistant message's)
    scores: list[Score] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The run's status, else the turn's (``queued``), else ``missing``."""
        if self.run is not None:
            return self.run.status
        return self.turn.status if self.turn is not None else "missing"

    @property
    def usage(self) -> Usage:
        """What the turn's run spent."""
        return self.run.usage if self.run is not None else Usage()


@dataclass
class CaseView:
    """A case of an eval: the user's message, the original turn and the variant's, side by side."""

    name: str
    message: str
    fork: SessionRecord
    original: Side
    variant: Side


@dataclass
class EvalSummary:
    """An eval as the list shows it: its cases, their variant turns' statuses, agents and spend."""

    name: str
    cases: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    agents: set[str] = field(default_factory=set)
    tokens: int = 0
    latest: int = 0


def _eval_of(record: SessionRecord) -> str | None:
    name = record.metadata.get(EVAL_KEY)
    return name if isinstance(name, str) and name else None


async def eval_forks(store: TreeStore, owner: str | None, sees: Sees, name: str | None = None) -> list[SessionRecord]:
    """The eval forks the viewer sees (of the eval ``name``, or of every eval), newest first, at most ``EVAL_SCAN``."""
    found: list[SessionRecord] = []
    before: str | None = None
    scanned = 0
    while scanned < EVAL_SCAN:
        limit = min(_PAGE, EVAL_SCAN - scanned)
        page = await store.page_sessions(before=before, limit=limit, roots_only=True, search=_NEEDLE, owner=owner)
        scanned += len(page)
        found.extend(r for r in page if sees(r) and _eval_of(r) is not None and name in (None, _eval_of(r)))
        if len(page) < limit:
            break
        before = page[-1].session_id
    return found


async def _variant_turn(store: TreeStore, fork: SessionRecord) -> TurnRecord | None:
    """The fork's case turn: its first message turn (an eval sends one)."""
    turns = [t for t in await store.list_turns(fork.session_id) if t.kind == "message"]
    return turns[0] if turns else None


async def eval_summaries(store: TreeStore, owner: str | None, sees: Sees) -> list[EvalSummary]:
    """Every eval the viewer's forks belong to, newest first, with its cases counted by the variant's status."""
    forks = await eval_forks(store, owner, sees)
    turns = await asyncio.gather(*(_variant_turn(store, f) for f in forks))
    runs = await asyncio.gather(*(store.load_run(t.run_id) if t is not None else _none() for t in turns))
    evals: dict[str, EvalSummary] = {}
    for fork, turn, run in zip(forks, turns, runs, strict=True):
        name = _eval_of(fork) or ""
        summary = evals.setdefault(name, EvalSummary(name))
        status = run.status if run is not None else turn.status if turn is not None else "not sent"
        summary.cases += 1
        summary.statuses[status] = summary.statuses.get(status, 0) + 1
        summary.agents.add(fork.agent)
        summary.tokens += run.usage.total_tokens if run is not None else 0
        summary.latest = max(summary.latest, fork.created_at)
    return sorted(evals.values(), key=lambda s: (-s.latest, s.name))


async def _none() -> None:
    return None


def _same(a: Any, b: Any) -> bool:
    return bool(a.role == b.role and a.parts == b.parts)


async def _side(store: TreeStore, session: SessionRecord | None, turn: TurnRecord | None) -> Side:
    """The turn's run, reply and tool calls (each with its result and approval), read from its run's history."""
    if turn is None:
        return Side(session, None, None)
    run = await store.load_run(turn.run_id)
    if run is None:
        return Side(session, turn, None)
    reply: str | None = None
    if run.status == "done" and run.result is not None:
        reply = run.result if isinstance(run.result, str) else json.dumps(run.result, sort_keys=True)
    calls: list[CallView] = []
    model: str | None = None
    history = None if run.history_revision_id is None else await store.load_history(run.history_revision_id)
    if history is not None and run.input_depth is not None:
        revisions = history.lineage()
        for i in range(run.input_depth, len(revisions)):
            entry = history.entry(revisions[i].entry_id)
            if entry is not None and _same(entry.message, turn.message):
                cut = revisions[i].parent_id
                views = conversation(history, [run], since_revision=cut) if cut else conversation(history, [run])
                answers = [view for view in views if view.kind == "assistant"]
                calls = [call for view in answers for call in view.calls]
                model = next((view.model for view in reversed(answers) if view.model), None)
                break
    return Side(session, turn, run, reply, calls, model)


async def _case(store: TreeStore, fork: SessionRecord, sees: Sees) -> CaseView:
    source_id, case_id = fork.metadata.get(SOURCE_KEY), fork.metadata.get(CASE_KEY)
    source = await store.load_session(source_id) if isinstance(source_id, str) else None
    original_turn: TurnRecord | None = None
    if source is not None and sees(source) and isinstance(case_id, str):
        found = await store.load_turn(case_id)
        original_turn = found if found is not None and found.session_id == source.session_id else None
    else:
        source = None  # another owner's source (or none left): nothing of it is shown
    original, variant = await asyncio.gather(
        _side(store, source, original_turn), _side(store, fork, await _variant_turn(store, fork))
    )
    turn = original_turn or variant.turn
    name = f"{source.session_id}#{original_turn.seq}" if source and original_turn else fork.session_id
    return CaseView(name, turn.message.text if turn is not None else "", fork, original, variant)


async def eval_cases(store: TreeStore, name: str, owner: str | None, sees: Sees) -> tuple[list[CaseView], int]:
    """The eval's cases the viewer sees, in case order (at most ``EVAL_CASES``), and how many it has."""
    forks = await eval_forks(store, owner, sees, name)
    cases = await asyncio.gather(*(_case(store, f, sees) for f in forks[:EVAL_CASES]))
    return sorted(cases, key=lambda c: c.name), len(forks)


def _score_files(folder: Path) -> list[str]:
    return sorted(str(p) for p in (folder / "eval_scores").glob("*.parquet"))


def read_scores(folder: str | os.PathLike[str], name: str, cases: Sequence[CaseView]) -> None:
    """Attach the scores in ``folder``'s ``eval_scores`` to the cases' sides (blocking: run it off the loop).

    The variant's side gets the rows of the eval ``name`` for its fork; the original's the rows
    whose scored session is the source itself (``score_recorded``'s baseline, under any eval name).
    Only the given cases, already filtered by tenancy, receive rows.
    """
    files = _score_files(Path(folder))
    if not files or not cases:
        return
    import duckdb

    forks = {c.fork.session_id: c for c in cases}
    sources = {c.original.session.session_id: c for c in cases if c.original.session is not None}
    with duckdb.connect() as con:
        rows = con.execute(
            "SELECT eval, source_turn_id, fork_session_id, name, kind, value, label, reason "
            "FROM read_parquet($files, union_by_name = true) "
            "WHERE (eval = $name AND fork_session_id IN (SELECT unnest($forks))) "
            "   OR (fork_session_id = source_session_id AND fork_session_id IN (SELECT unnest($sources))) "
            "ORDER BY eval, source_turn_id, kind, name LIMIT $limit",
            {"files": files, "name": name, "forks": list(forks), "sources": list(sources), "limit": SCORE_ROWS},
        ).fetchall()
    for evaluated, turn_id, scored, result, kind, value, label, reason in rows:
        score = Score(evaluated, result, kind, value, label, reason)
        if evaluated == name and scored in forks:
            forks[scored].variant.scores.append(score)
        elif scored in sources:
            case = sources[scored]
            if case.original.turn is not None and case.original.turn.submission_id == turn_id:
                case.original.scores.append(score)
