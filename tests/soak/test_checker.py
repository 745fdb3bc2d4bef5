"""The chaos checker finds nothing wrong in a real run, and finds exactly what one corruption breaks.

The run is real (``fleet.build_run``: a Runtime on SQLite or PostgreSQL, delegation, approvals
approved, rejected and edited, a fork, the export). Each corruption test changes one thing in a
copy of it, in the store with plain SQL, in a journal or in the Parquet export, and expects the
violation kind it breaks, naming the ids it changed. A change to the store made after the export
also makes the export differ from the store, which the checker rightly reports too
(``export_*``); those tests compare the other kinds.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from repertory.testing.pg_temp import TemporaryPostgres
from tests.conftest import truncate_pg
from tests.soak.checker import CheckReport, check
from tests.soak.fleet import build_run


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One real run on SQLite, built once; tests corrupt copies of it."""
    run_dir = tmp_path_factory.mktemp("chaos-run")
    ids = asyncio.run(build_run(f"sqlite:///{run_dir / 'store.db'}", run_dir))
    return run_dir, ids


@pytest.fixture
def run(clean_run: tuple[Path, dict[str, str]], tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A private copy of the clean run (store file, journals, export) with run.json pointing at it."""
    source, ids = clean_run
    copy = tmp_path / "run"
    shutil.copytree(source, copy)
    meta = json.loads((copy / "run.json").read_text())
    meta["export_dir"] = str(copy / "export")
    meta["store_url"] = _url(copy)
    (copy / "run.json").write_text(json.dumps(meta))
    yield copy, ids


def _url(run_dir: Path) -> str:
    return f"sqlite:///{run_dir / 'store.db'}"


def _sql(run_dir: Path, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(run_dir / "store.db")
    try:
        rows = conn.execute(statement, params).fetchall()
        conn.commit()
        return rows
    finally:
        conn.close()


def _set_message(run_dir: Path, entry_id: str, message: dict[str, Any] | None) -> None:
    """Rewrite (``None``: delete) an entry's message wherever the store keeps it: inline, or in its own row."""
    text = None if message is None else json.dumps(message)
    _sql(
        run_dir,
        "UPDATE history_revisions SET message = ?, entry_created_at = CASE WHEN ? IS NULL THEN NULL "
        "ELSE entry_created_at END WHERE entry_id = ? AND message IS NOT NULL",
        (text, text, entry_id),
    )
    if message is None:
        _sql(run_dir, "DELETE FROM history_entry_rows WHERE id = ?", (entry_id,))
    else:
        _sql(run_dir, "UPDATE history_entry_rows SET message = ? WHERE id = ?", (text, entry_id))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _kinds(report: CheckReport, *, export: bool = False) -> set[str]:
    """The violation kinds found; without the export's unless ``export``."""
    return {v.kind for v in report.violations if export or not v.kind.startswith("export_")}


def _history(run_dir: Path, session_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(revision id, entry id, message) of a session's thread, oldest first, read with SQL."""
    [(head,)] = _sql(run_dir, "SELECT head FROM threads WHERE thread_id = ?", (session_id,))
    out = []
    while head is not None:
        [(parent, entry_id)] = _sql(run_dir, "SELECT parent_id, entry_id FROM history_revisions WHERE id = ?", (head,))
        [(message,)] = _sql(run_dir, "SELECT message FROM history_entries WHERE id = ?", (entry_id,))
        out.append((head, entry_id, json.loads(message)))
        head = parent
    return out[::-1]


def test_a_clean_run_on_sqlite_has_no_violations(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    report = check(_url(run_dir), run_dir)
    assert report.violations == []
    # It looked at everything the fleet made: 3 roots, 3 delegated children, a fork; 5 side effects
    # (one of them the MCP server's publish_figures, which wrote its own line).
    assert (report.sessions, report.accepted_turns, report.ledger_entries, report.decisions) == (7, 7, 5, 3)
    assert report.turns == 10 and report.runs == 10 and report.events > 50 and report.tool_calls >= 9
    [published] = [line for line in _lines(run_dir / "ledger.jsonl") if line["tool"] == "publish_figures"]
    assert published["session_id"] == ids["c"] and published["tool_call_id"].startswith("call_")
    assert report.messages == report.revisions > 20 and report.export_rows > 100


def test_a_deleted_event_is_a_gap_in_its_session(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    [(seq,)] = _sql(
        run_dir, "SELECT min(seq) FROM events WHERE session_id = ? AND type = 'checkpoint' AND seq > 1", (ids["a"],)
    )
    _sql(run_dir, "DELETE FROM events WHERE session_id = ? AND seq = ?", (ids["a"], seq))

    report = check(_url(run_dir), run_dir)

    assert _kinds(report) == {"event_seq_gap"}
    [gap] = [v for v in report.violations if v.kind == "event_seq_gap"]
    assert gap.ids == {"session_id": ids["a"], "seq": str(seq)}
    [extra] = [v for v in report.violations if v.kind == "export_extra_row"]  # the export still has it
    assert extra.ids == {"table": "events", "key": f"{ids['a']}/{seq}"}


def test_a_duplicated_ledger_line_is_a_call_that_ran_twice(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, _ = run
    ledger = run_dir / "ledger.jsonl"
    first = _lines(ledger)[0]
    with ledger.open("a") as fh:
        fh.write(json.dumps({**first, "pid": first["pid"] + 1}) + "\n")

    report = check(_url(run_dir), run_dir)

    assert _kinds(report, export=True) == {"ledger_duplicate"}
    [dup] = report.violations
    assert dup.ids["tool_call_id"] == first["tool_call_id"] and dup.ids["run_id"] == first["run_id"]


def test_a_deleted_history_entry_is_a_broken_lineage(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    history = _history(run_dir, ids["a"])
    # The first turn's final reply: plain text, no call, not a turn's own message.
    rev, entry, _ = next(h for h in history if h[2]["role"] == "assistant" and h[2]["parts"][0]["type"] == "text")
    _set_message(run_dir, entry, None)

    report = check(_url(run_dir), run_dir)

    assert _kinds(report) == {"entry_missing"}
    [missing] = [v for v in report.violations if v.kind == "entry_missing"]
    assert missing.ids == {"revision_id": rev, "entry_id": entry}


def test_a_dropped_tool_result_leaves_its_call_unanswered(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    history = _history(run_dir, ids["a"])
    _, entry, message = next(
        h for h in history if any(p.get("tool_name") == "lookup" for p in h[2]["parts"]) and h[2]["role"] == "tool"
    )
    [call_id] = [p["tool_call_id"] for p in message["parts"] if p["tool_name"] == "lookup"]
    message["parts"] = [p for p in message["parts"] if p["tool_name"] != "lookup"]
    _set_message(run_dir, entry, message)

    report = check(_url(run_dir), run_dir)

    assert _kinds(report) == {"call_unanswered"}
    found = [v for v in report.violations if v.kind == "call_unanswered"]
    assert {v.ids["tool_call_id"] for v in found} == {call_id}
    # Every run whose history holds it: the turn that made it, a's later turns, and the fork's.
    [(first_run,)] = _sql(
        run_dir,
        "SELECT run_id FROM runs WHERE thread_id = ? ORDER BY json_extract(state, '$.created_at') LIMIT 1",
        (ids["a"],),
    )
    assert first_run in {v.ids["run_id"] for v in found} and len(found) >= 3
    [mismatch] = [v for v in report.violations if v.kind.startswith("export_")]
    assert (mismatch.kind, mismatch.ids) == ("export_message_mismatch", {"table": "entries", "key": entry})


def test_a_turn_without_its_completion_event_did_not_end_once(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    [(seq, sub, kind)] = _sql(
        run_dir,
        "SELECT seq, submission_id, type FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
        (ids["a"],),
    )
    assert kind == "turn.completed"  # the last event of the session: deleting it leaves no gap
    _sql(run_dir, "DELETE FROM events WHERE session_id = ? AND seq = ?", (ids["a"], seq))

    report = check(_url(run_dir), run_dir)

    assert _kinds(report) == {"turn_completion_missing"}
    [missing] = [v for v in report.violations if v.kind == "turn_completion_missing"]
    assert missing.ids == {"session_id": ids["a"], "submission_id": sub}


def test_an_accepted_turn_left_running_is_reported(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    sub = next(line["submission_id"] for line in _lines(run_dir / "accepted.jsonl") if line["session_id"] == ids["b"])
    [(record,)] = _sql(run_dir, "SELECT record FROM turns WHERE submission_id = ?", (sub,))
    turn = json.loads(record) | {"status": "running"}
    _sql(run_dir, "UPDATE turns SET status = 'running', record = ? WHERE submission_id = ?", (json.dumps(turn), sub))

    report = check(_url(run_dir), run_dir)

    assert _kinds(report) == {"accepted_turn_not_ended", "turn_completed_while_open"}
    assert {v.ids["submission_id"] for v in report.violations if not v.kind.startswith("export_")} == {sub}


def test_an_export_that_differs_from_the_store_is_reported(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, _ = run
    [part] = sorted((run_dir / "export" / "entries").glob("part-*.parquet"))
    table = pq.read_table(part)
    rows = table.to_pylist()
    changed = rows[3]
    message = json.loads(changed["message"])
    message["parts"] = [{"type": "text", "text": "something else"}]
    changed["message"] = json.dumps(message)
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), part)
    [runs_part] = sorted((run_dir / "export" / "runs").glob("part-*.parquet"))
    runs = pq.read_table(runs_part)
    dropped = runs.column("run_id")[0].as_py()
    pq.write_table(runs.slice(1), runs_part)

    report = check(_url(run_dir), run_dir)

    assert {
        (v.kind, v.ids.get("table"), v.ids.get("key")) for v in report.violations if v.kind.startswith("export_")
    } == {
        ("export_message_mismatch", "entries", changed["entry_id"]),
        ("export_missing_row", "runs", dropped),
    }
    # The dropped run's usage is missing from its tree's totals in the export.
    assert _kinds(report) == {"usage_tree_export", "usage_tree_macro"}


def test_a_token_decided_twice_is_reported(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, _ = run
    decisions = run_dir / "decisions.jsonl"
    first = _lines(decisions)[0]
    with decisions.open("a") as fh:
        fh.write(json.dumps(first) + "\n")

    report = check(_url(run_dir), run_dir)

    assert _kinds(report, export=True) == {"token_redeemed_twice", "decision_twice"}
    assert {v.ids.get("token") or v.ids.get("tool_call_id") for v in report.violations} == {
        first["token"],
        first["tool_call_id"],
    }


def test_a_side_effect_of_a_rejected_call_is_reported(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, _ = run
    rejected = next(line for line in _lines(run_dir / "decisions.jsonl") if line["decision"] == "reject")
    [(run_id,)] = _sql(
        run_dir,
        "SELECT run_id FROM runs, json_each(runs.state, '$.approvals') AS a "
        "WHERE json_extract(a.value, '$.tool_call_id') = ?",
        (rejected["tool_call_id"],),
    )
    line = {
        "session_id": rejected["session_id"],
        "run_id": run_id,
        "tool_call_id": rejected["tool_call_id"],
        "tool": "charge",
        "args": {"account": "acct", "amount": 7},
        "pid": 1,
        "at_ms": 0,
    }
    with (run_dir / "ledger.jsonl").open("a") as fh:
        fh.write(json.dumps(line) + "\n")

    report = check(_url(run_dir), run_dir)

    # It ran (ledger) though rejected (store), after the approver's reject (journal), and its
    # result is the rejection's error: three views of one violation, all naming the call.
    assert _kinds(report, export=True) == {"ran_without_approval", "ran_after_reject", "side_effect_with_error_result"}
    assert {v.ids["tool_call_id"] for v in report.violations} == {rejected["tool_call_id"]}


def test_a_run_whose_usage_differs_from_the_export_breaks_the_roll_ups(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    [(run_id, state)] = _sql(run_dir, "SELECT run_id, state FROM runs WHERE thread_id = ? LIMIT 1", (ids["b"],))
    changed = json.loads(state)
    changed["usage"]["output_tokens"] += 1000
    _sql(run_dir, "UPDATE runs SET state = ? WHERE run_id = ?", (json.dumps(changed), run_id))

    report = check(_url(run_dir), run_dir)

    assert _kinds(report, export=True) == {"usage_export_run", "usage_tree_export", "usage_tree_macro"}
    assert {v.ids.get("run_id") or v.ids.get("root_id") for v in report.violations} == {run_id, ids["b"]}


def test_a_clean_run_on_postgresql_has_no_violations(pg_server: TemporaryPostgres, tmp_path: Path) -> None:
    truncate_pg(pg_server.url)
    ids = asyncio.run(build_run(pg_server.url, tmp_path))
    report = check(pg_server.url, tmp_path)
    assert report.violations == []
    assert (report.sessions, report.accepted_turns, report.ledger_entries, report.decisions) == (7, 7, 5, 3)

    # The checker reads PostgreSQL's tables too: a deleted event is a gap there as well.
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT min(seq) FROM repertory.events WHERE session_id = %s AND type = 'checkpoint' AND seq > 1",
            (ids["a"],),
        ).fetchone()
        assert row is not None
        conn.execute("DELETE FROM repertory.events WHERE session_id = %s AND seq = %s", (ids["a"], row[0]))
    report = check(pg_server.url, tmp_path)
    assert _kinds(report) == {"event_seq_gap"}
    assert [v.ids for v in report.violations if v.kind == "event_seq_gap"] == [
        {"session_id": ids["a"], "seq": str(row[0])}
    ]


def test_a_done_turn_whose_run_is_gone_is_reported(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    sub = [line["submission_id"] for line in _lines(run_dir / "accepted.jsonl") if line["session_id"] == ids["a"]][-1]
    [(record,)] = _sql(run_dir, "SELECT record FROM turns WHERE submission_id = ?", (sub,))
    run_id = json.loads(record)["run_id"]
    _sql(run_dir, "DELETE FROM runs WHERE run_id = ?", (run_id,))  # the 'say hi' turn: no side effects

    report = check(_url(run_dir), run_dir)

    # The export still holds the run, so a's tree totals there exceed the store's runs.
    assert _kinds(report) == {"turn_run_missing", "usage_tree_export", "usage_tree_macro"}
    [missing] = [v for v in report.violations if v.kind == "turn_run_missing"]
    assert missing.ids == {"submission_id": sub, "run_id": run_id}
    assert [v.ids for v in report.violations if v.kind == "export_extra_row"] == [{"table": "runs", "key": run_id}]


def test_a_result_whose_ledger_line_is_gone_is_a_side_effect_not_recorded(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    ledger = run_dir / "ledger.jsonl"
    lines = _lines(ledger)
    [email] = [line for line in lines if line["session_id"] == ids["a"] and line["tool"] == "send_email"]
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines if line is not email))

    report = check(_url(run_dir), run_dir)

    assert _kinds(report, export=True) == {"result_without_side_effect"}
    [found] = report.violations
    assert found.ids == {"run_id": email["run_id"], "tool_call_id": email["tool_call_id"]}


def test_a_revision_whose_parent_is_gone_is_reported_where_the_lineage_breaks(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    rev, _, _ = _history(run_dir, ids["b"])[2]
    _sql(run_dir, "UPDATE history_revisions SET parent_id = 'nowhere' WHERE id = ?", (rev,))

    report = check(_url(run_dir), run_dir)

    assert [v.ids for v in report.violations if v.kind == "revision_parent_missing"] == [
        {"revision_id": rev, "parent_id": "nowhere"}
    ]
    # Reported where it breaks, once: not again for each run and lineage above the break.
    assert _kinds(report) == {"revision_parent_missing"}
    assert [(v.kind, v.ids) for v in report.violations if v.kind.startswith("export_")] == [
        ("export_value_mismatch", {"table": "revisions", "key": rev})
    ]


def test_a_tool_result_given_twice_is_reported(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    history = _history(run_dir, ids["a"])
    _, entry, message = next(h for h in history if h[2]["role"] == "tool")
    message["parts"] = message["parts"] + message["parts"][-1:]
    _set_message(run_dir, entry, message)

    report = check(_url(run_dir), run_dir)

    assert _kinds(report) == {"result_duplicate"}
    assert {v.ids["tool_call_id"] for v in report.violations if v.kind == "result_duplicate"} == {
        message["parts"][-1]["tool_call_id"]
    }


def test_a_redeemed_token_still_live_is_reported(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, _ = run
    decided = _lines(run_dir / "decisions.jsonl")[0]
    [(run_id,)] = _sql(
        run_dir,
        "SELECT run_id FROM runs, json_each(runs.state, '$.approvals') AS a "
        "WHERE json_extract(a.value, '$.tool_call_id') = ?",
        (decided["tool_call_id"],),
    )
    _sql(run_dir, "UPDATE runs SET token = ? WHERE run_id = ?", (decided["token"], run_id))

    report = check(_url(run_dir), run_dir)

    # A token on a run that is not suspended, and one the approver already redeemed.
    assert _kinds(report, export=True) == {"token_state_mismatch", "token_still_live"}
    assert {v.ids["run_id"] for v in report.violations} == {run_id}


def test_an_mcp_side_effect_the_server_recorded_twice_ran_twice(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, _ = run
    ledger = run_dir / "ledger.jsonl"
    [published] = [line for line in _lines(ledger) if line["tool"] == "publish_figures"]
    with ledger.open("a") as fh:  # as if the server had been sent the call again after a crash
        fh.write(json.dumps({**published, "pid": published["pid"] + 1}) + "\n")

    report = check(_url(run_dir), run_dir)

    assert _kinds(report, export=True) == {"ledger_duplicate"}
    [dup] = report.violations
    assert dup.ids == {
        "tool_call_id": published["tool_call_id"],
        "run_id": published["run_id"],
        "first_run_id": published["run_id"],
        "tool": "publish_figures",
    }


def test_an_mcp_result_the_server_never_recorded_is_a_side_effect_missing(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    ledger = run_dir / "ledger.jsonl"
    lines = _lines(ledger)
    [published] = [line for line in lines if line["tool"] == "publish_figures"]
    # What the soak saw before repertory sent call ids: the server could not say which call it ran.
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines if line is not published))

    report = check(_url(run_dir), run_dir)

    assert _kinds(report, export=True) == {"result_without_side_effect"}
    [found] = report.violations
    assert found.ids == {"run_id": published["run_id"], "tool_call_id": published["tool_call_id"]}
    assert published["session_id"] == ids["c"]


def test_events_announcing_a_commit_that_never_landed_are_reported(run: tuple[Path, dict[str, str]]) -> None:
    run_dir, ids = run
    [(seq, data)] = _sql(
        run_dir,
        "SELECT seq, data FROM events WHERE session_id = ? AND type = 'checkpoint' ORDER BY seq LIMIT 1",
        (ids["a"],),
    )
    _sql(
        run_dir,
        "UPDATE events SET data = ? WHERE session_id = ? AND seq = ?",
        (json.dumps(json.loads(data) | {"history_revision_id": "never-committed"}), ids["a"], seq),
    )
    [(call_seq, call_data)] = _sql(
        run_dir,
        "SELECT seq, data FROM events WHERE session_id = ? AND type = 'tool.call' ORDER BY seq LIMIT 1",
        (ids["b"],),
    )
    _sql(
        run_dir,
        "UPDATE events SET data = ? WHERE session_id = ? AND seq = ?",
        (json.dumps(json.loads(call_data) | {"tool_call_id": "call_never_made"}), ids["b"], call_seq),
    )

    report = check(_url(run_dir), run_dir)

    assert _kinds(report) == {"event_checkpoint_unstored", "event_call_unstored"}
    found = {v.kind: v.ids for v in report.violations if not v.kind.startswith("export_")}
    assert found == {
        "event_checkpoint_unstored": {"session_id": ids["a"], "seq": str(seq), "revision_id": "never-committed"},
        "event_call_unstored": {"session_id": ids["b"], "seq": str(call_seq), "tool_call_id": "call_never_made"},
    }
