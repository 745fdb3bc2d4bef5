"""PostgreSQL schema, versioned migrations and the one-round-trip commit function.

Everything lives in its own schema, ``repertory``, so it never collides with an application's
tables in a shared database. Migrations run under a transaction-scoped advisory lock, so several
processes opening the same database at once migrate it exactly once.

``repertory_commit`` is the whole of ``commit_session`` on the server: the compare-and-set on the
thread head, the finished-run and token guards, the history delta, the run row and the thread head,
in one statement and so one round trip. A guard that fails raises SQLSTATE ``RP001`` (conflict) or
``RP002`` (the resume token is no longer live), and the transaction writes nothing.

``repertory_commit_batch`` is group commit on the server: several commits in one transaction and
one round trip, each a call of ``repertory_commit`` inside its own exception block (a savepoint),
so a commit whose guard fails is rolled back alone; it returns one outcome per commit, NULL when
it landed or ``"<sqlstate> <message>"`` when it did not.

``repertory_spend`` adds what checkpoints spent to their ledgers (``core.budget``), in the
statement that calls the commit function (its result is the spend call's argument, so it runs
first) and so in its transaction: only commits that landed add theirs.
"""

from __future__ import annotations

__all__ = ["CONFLICT_SQLSTATE", "TOKEN_SQLSTATE", "MIGRATIONS", "SCHEMA", "SCHEMA_VERSION", "MIGRATION_LOCK"]

SCHEMA = "repertory"
SCHEMA_VERSION = 13
CONFLICT_SQLSTATE = "RP001"
TOKEN_SQLSTATE = "RP002"  # a conflict whose cause is a resume token that is no longer live
MIGRATION_LOCK = 0x7265706572746F  # "repert" as an integer: the advisory lock key for migrations

_COMMIT_FUNCTION = r"""
CREATE OR REPLACE FUNCTION repertory.repertory_commit(
    p_thread_id text, p_base text, p_head text, p_thread_created bigint, p_thread_updated bigint, p_updated bigint,
    p_run_id text, p_status text, p_token text, p_state text, p_redeem text,
    p_entry_ids text[], p_entry_created bigint[], p_entry_messages text[],
    p_rev_ids text[], p_rev_parents text[], p_rev_entries text[], p_rev_depths integer[], p_rev_created bigint[]
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_head text;
    v_status text;
    v_token text;
BEGIN
    IF p_base IS NULL THEN
        -- Creating a thread: racing creators serialise on the primary key here.
        INSERT INTO repertory.threads (thread_id, head, created_at, updated_at)
        VALUES (p_thread_id, NULL, p_thread_created, p_thread_updated) ON CONFLICT (thread_id) DO NOTHING;
    END IF;
    SELECT head INTO v_head FROM repertory.threads WHERE thread_id = p_thread_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('thread %L head moved: stored none, expected %L', p_thread_id, p_base);
    END IF;
    IF p_base IS NULL AND v_head IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('thread %L already has head %L; a commit with base_revision_id=None only creates a thread',
                             p_thread_id, v_head);
    ELSIF p_base IS NOT NULL AND v_head IS DISTINCT FROM p_base THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('thread %L head moved: stored %L, expected %L', p_thread_id, v_head, p_base);
    END IF;
    SELECT status, token INTO v_status, v_token FROM repertory.runs WHERE run_id = p_run_id FOR UPDATE;
    IF v_status IN ('done', 'cancelled') THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('run %L is already %s; a finished run cannot change', p_run_id, v_status);
    END IF;
    IF p_redeem IS NOT NULL AND (v_token IS NULL OR v_token <> p_redeem) THEN
        RAISE EXCEPTION USING ERRCODE = 'RP002',
            MESSAGE = format('run %L: the resume token is no longer live', p_run_id);
    END IF;
    IF cardinality(p_entry_ids) > 0 THEN
        INSERT INTO repertory.history_entries (id, created_at, message)
        SELECT * FROM unnest(p_entry_ids, p_entry_created, p_entry_messages) ON CONFLICT (id) DO NOTHING;
    END IF;
    IF cardinality(p_rev_ids) > 0 THEN
        INSERT INTO repertory.history_revisions (id, parent_id, entry_id, depth, created_at)
        SELECT * FROM unnest(p_rev_ids, p_rev_parents, p_rev_entries, p_rev_depths, p_rev_created)
        ON CONFLICT (id) DO NOTHING;
    END IF;
    INSERT INTO repertory.runs (run_id, thread_id, status, updated_at, write_seq, token, state)
    VALUES (p_run_id, p_thread_id, p_status, p_updated, nextval('repertory.runs_write_seq'), p_token, p_state)
    ON CONFLICT (run_id) DO UPDATE SET
        thread_id = excluded.thread_id, status = excluded.status, updated_at = excluded.updated_at,
        write_seq = excluded.write_seq, token = excluded.token, state = excluded.state;
    UPDATE repertory.threads SET head = p_head, updated_at = p_thread_updated WHERE thread_id = p_thread_id;
END
$fn$;
"""

_COMMIT_FUNCTION_V2 = r"""
CREATE OR REPLACE FUNCTION repertory.repertory_commit(
    p_thread_id text, p_base text, p_head text, p_thread_created bigint, p_thread_updated bigint, p_updated bigint,
    p_run_id text, p_status text, p_token text, p_state text, p_redeem text,
    p_entry_ids text[], p_entry_created bigint[], p_entry_messages text[],
    p_rev_ids text[], p_rev_parents text[], p_rev_entries text[], p_rev_depths integer[], p_rev_created bigint[],
    p_ev_seqs bigint[], p_ev_subs text[], p_ev_types text[], p_ev_ats bigint[], p_ev_data text[]
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_head text;
    v_status text;
    v_token text;
    v_last bigint;
BEGIN
    IF p_base IS NULL THEN
        -- Creating a thread: racing creators serialise on the primary key here.
        INSERT INTO repertory.threads (thread_id, head, created_at, updated_at)
        VALUES (p_thread_id, NULL, p_thread_created, p_thread_updated) ON CONFLICT (thread_id) DO NOTHING;
    END IF;
    SELECT head INTO v_head FROM repertory.threads WHERE thread_id = p_thread_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('thread %L head moved: stored none, expected %L', p_thread_id, p_base);
    END IF;
    IF p_base IS NULL AND v_head IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('thread %L already has head %L; a commit with base_revision_id=None only creates a thread',
                             p_thread_id, v_head);
    ELSIF p_base IS NOT NULL AND v_head IS DISTINCT FROM p_base THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('thread %L head moved: stored %L, expected %L', p_thread_id, v_head, p_base);
    END IF;
    SELECT status, token INTO v_status, v_token FROM repertory.runs WHERE run_id = p_run_id FOR UPDATE;
    IF v_status IN ('done', 'cancelled') THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('run %L is already %s; a finished run cannot change', p_run_id, v_status);
    END IF;
    IF p_redeem IS NOT NULL AND (v_token IS NULL OR v_token <> p_redeem) THEN
        RAISE EXCEPTION USING ERRCODE = 'RP002',
            MESSAGE = format('run %L: the resume token is no longer live', p_run_id);
    END IF;
    IF cardinality(p_entry_ids) > 0 THEN
        INSERT INTO repertory.history_entries (id, created_at, message)
        SELECT * FROM unnest(p_entry_ids, p_entry_created, p_entry_messages) ON CONFLICT (id) DO NOTHING;
    END IF;
    IF cardinality(p_rev_ids) > 0 THEN
        INSERT INTO repertory.history_revisions (id, parent_id, entry_id, depth, created_at)
        SELECT * FROM unnest(p_rev_ids, p_rev_parents, p_rev_entries, p_rev_depths, p_rev_created)
        ON CONFLICT (id) DO NOTHING;
    END IF;
    INSERT INTO repertory.runs (run_id, thread_id, status, updated_at, write_seq, token, state)
    VALUES (p_run_id, p_thread_id, p_status, p_updated, nextval('repertory.runs_write_seq'), p_token, p_state)
    ON CONFLICT (run_id) DO UPDATE SET
        thread_id = excluded.thread_id, status = excluded.status, updated_at = excluded.updated_at,
        write_seq = excluded.write_seq, token = excluded.token, state = excluded.state;
    UPDATE repertory.threads SET head = p_head, updated_at = p_thread_updated WHERE thread_id = p_thread_id;
    IF cardinality(p_ev_seqs) > 0 THEN
        -- A session's thread id is its session id; the thread row lock above serialises its writers.
        SELECT COALESCE(MAX(seq), 0) INTO v_last FROM repertory.events WHERE session_id = p_thread_id;
        IF EXISTS (SELECT 1 FROM unnest(p_ev_seqs) WITH ORDINALITY AS u(s, i) WHERE s <> v_last + i) THEN
            RAISE EXCEPTION USING ERRCODE = 'RP001',
                MESSAGE = format('events of session %L do not continue its seq %s', p_thread_id, v_last);
        END IF;
        INSERT INTO repertory.events (session_id, seq, submission_id, type, at, data)
        SELECT p_thread_id, * FROM unnest(p_ev_seqs, p_ev_subs, p_ev_types, p_ev_ats, p_ev_data);
    END IF;
END
$fn$;
"""

_COMMIT_FUNCTION_V3 = r"""
CREATE OR REPLACE FUNCTION repertory.repertory_commit(
    p_thread_id text, p_base text, p_head text, p_thread_created bigint, p_thread_updated bigint, p_updated bigint,
    p_run_id text, p_status text, p_token text, p_state text, p_redeem text,
    p_entry_ids text[], p_entry_created bigint[], p_entry_messages text[],
    p_rev_ids text[], p_rev_parents text[], p_rev_entries text[], p_rev_depths integer[], p_rev_created bigint[],
    p_ev_seqs bigint[], p_ev_subs text[], p_ev_types text[], p_ev_ats bigint[], p_ev_data text[]
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_head text;
    v_status text;
    v_token text;
    v_last bigint;
    v_written bigint;
    v_joined text;
BEGIN
    IF p_base IS NULL THEN
        -- Creating a thread: racing creators serialise on the primary key here.
        INSERT INTO repertory.threads (thread_id, head, created_at, updated_at)
        VALUES (p_thread_id, NULL, p_thread_created, p_thread_updated) ON CONFLICT (thread_id) DO NOTHING;
    END IF;
    SELECT head INTO v_head FROM repertory.threads WHERE thread_id = p_thread_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('thread %L head moved: stored none, expected %L', p_thread_id, p_base);
    END IF;
    IF p_base IS NULL AND v_head IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('thread %L already has head %L; a commit with base_revision_id=None only creates a thread',
                             p_thread_id, v_head);
    ELSIF p_base IS NOT NULL AND v_head IS DISTINCT FROM p_base THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('thread %L head moved: stored %L, expected %L', p_thread_id, v_head, p_base);
    END IF;
    SELECT status, token INTO v_status, v_token FROM repertory.runs WHERE run_id = p_run_id FOR UPDATE;
    IF v_status IN ('done', 'cancelled') THEN
        RAISE EXCEPTION USING ERRCODE = 'RP001',
            MESSAGE = format('run %L is already %s; a finished run cannot change', p_run_id, v_status);
    END IF;
    IF p_redeem IS NOT NULL AND (v_token IS NULL OR v_token <> p_redeem) THEN
        RAISE EXCEPTION USING ERRCODE = 'RP002',
            MESSAGE = format('run %L: the resume token is no longer live', p_run_id);
    END IF;
    -- Sharing is recorded where it is created (repertory.storage.history_gc): an entry or a
    -- revision already held, and the held revision new ones attach to when it is not the base.
    IF cardinality(p_entry_ids) > 0 THEN
        INSERT INTO repertory.history_entries (id, created_at, message)
        SELECT * FROM unnest(p_entry_ids, p_entry_created, p_entry_messages) ON CONFLICT (id) DO NOTHING;
        GET DIAGNOSTICS v_written = ROW_COUNT;
        IF v_written < cardinality(p_entry_ids) THEN
            INSERT INTO repertory.history_shared_entries (entry_id)
            SELECT unnest(p_entry_ids) ON CONFLICT DO NOTHING;
        END IF;
    END IF;
    IF cardinality(p_rev_ids) > 0 THEN
        INSERT INTO repertory.history_revisions (id, parent_id, entry_id, depth, created_at, thread_id)
        SELECT r.*, p_thread_id FROM unnest(p_rev_ids, p_rev_parents, p_rev_entries, p_rev_depths, p_rev_created) AS r
        ON CONFLICT (id) DO NOTHING;
        GET DIAGNOSTICS v_written = ROW_COUNT;
        IF v_written < cardinality(p_rev_ids) THEN
            INSERT INTO repertory.history_pins (revision_id, thread_id)
            SELECT unnest(p_rev_ids), p_thread_id ON CONFLICT DO NOTHING;
        END IF;
        v_joined := p_rev_parents[1];  -- the delta is root-most first
    ELSE
        v_joined := p_head;
    END IF;
    IF v_joined IS NOT NULL AND v_joined IS DISTINCT FROM p_base THEN
        INSERT INTO repertory.history_pins (revision_id, thread_id) VALUES (v_joined, p_thread_id)
        ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO repertory.runs (run_id, thread_id, status, updated_at, write_seq, token, state)
    VALUES (p_run_id, p_thread_id, p_status, p_updated, nextval('repertory.runs_write_seq'), p_token, p_state)
    ON CONFLICT (run_id) DO UPDATE SET
        thread_id = excluded.thread_id, status = excluded.status, updated_at = excluded.updated_at,
        write_seq = excluded.write_seq, token = excluded.token, state = excluded.state;
    UPDATE repertory.threads SET head = p_head, updated_at = p_thread_updated WHERE thread_id = p_thread_id;
    IF cardinality(p_ev_seqs) > 0 THEN
        -- A session's thread id is its session id; the thread row lock above serialises its writers.
        SELECT COALESCE(MAX(seq), 0) INTO v_last FROM repertory.events WHERE session_id = p_thread_id;
        IF EXISTS (SELECT 1 FROM unnest(p_ev_seqs) WITH ORDINALITY AS u(s, i) WHERE s <> v_last + i) THEN
            RAISE EXCEPTION USING ERRCODE = 'RP001',
                MESSAGE = format('events of session %L do not continue its seq %s', p_thread_id, v_last);
        END IF;
        INSERT INTO repertory.events (session_id, seq, submission_id, type, at, data)
        SELECT p_thread_id, * FROM unnest(p_ev_seqs, p_ev_subs, p_ev_types, p_ev_ats, p_ev_data);
    END IF;
END
$fn$;
"""


def _amended(function: str, old: str, new: str) -> str:
    """``function`` with its one ``old`` passage replaced: a passage edited away fails at import, not silently."""
    if function.count(old) != 1:
        raise AssertionError(f"the passage to amend occurs {function.count(old)} times, not once")
    return function.replace(old, new)


# Version 9: the same signature (so the batch function that calls it is unchanged); the base a
# commit leaves is pinned for its thread (``history_gc.commit_pins``), and the namers of an entry a
# compaction adds again are recorded.
_COMMIT_FUNCTION_V4 = _amended(
    _COMMIT_FUNCTION_V3,
    """    IF v_joined IS NOT NULL AND v_joined IS DISTINCT FROM p_base THEN
        INSERT INTO repertory.history_pins (revision_id, thread_id) VALUES (v_joined, p_thread_id)
        ON CONFLICT DO NOTHING;
    END IF;""",
    """    IF v_joined IS NOT NULL AND v_joined IS DISTINCT FROM p_base THEN
        INSERT INTO repertory.history_pins (revision_id, thread_id) VALUES (v_joined, p_thread_id)
        ON CONFLICT DO NOTHING;
    END IF;
    IF p_base IS NOT NULL AND v_joined IS DISTINCT FROM p_base THEN
        INSERT INTO repertory.history_pins (revision_id, thread_id) VALUES (p_base, p_thread_id)
        ON CONFLICT DO NOTHING;
    END IF;
    -- Revisions naming an entry the client did not send name one the base's lineage holds (a
    -- compaction adding kept messages again, history_gc.base_namers): record every namer.
    IF EXISTS (SELECT 1 FROM unnest(p_rev_entries) AS r(entry_id) WHERE NOT r.entry_id = ANY(p_entry_ids)) THEN
        INSERT INTO repertory.history_entry_namers (entry_id, revision_id)
        SELECT r.entry_id, r.id FROM unnest(p_rev_ids, p_rev_entries) AS r(id, entry_id)
        WHERE NOT r.entry_id = ANY(p_entry_ids)
        UNION
        SELECT line.entry_id, line.id FROM (
            WITH RECURSIVE line(id, parent_id, entry_id) AS (
                SELECT h.id, h.parent_id, h.entry_id FROM repertory.history_revisions AS h WHERE h.id = p_base
                UNION ALL
                SELECT h.id, h.parent_id, h.entry_id
                FROM repertory.history_revisions AS h JOIN line ON h.id = line.parent_id
            )
            SELECT * FROM line
        ) AS line
        WHERE line.entry_id = ANY(p_rev_entries) AND NOT line.entry_id = ANY(p_entry_ids)
        ON CONFLICT DO NOTHING;
    END IF;""",
)

# The commits' variable-length columns travel flattened: member i owns the next p_*_counts[i]
# elements of each flat array (slicing past the end of an array gives an empty one).
_COMMIT_BATCH_FUNCTION = r"""
CREATE OR REPLACE FUNCTION repertory.repertory_commit_batch(
    p_thread_ids text[], p_bases text[], p_heads text[], p_thread_created bigint[], p_thread_updated bigint[],
    p_updated bigint[], p_run_ids text[], p_statuses text[], p_tokens text[], p_states text[], p_redeems text[],
    p_entry_counts integer[], p_rev_counts integer[], p_ev_counts integer[],
    p_entry_ids text[], p_entry_created bigint[], p_entry_messages text[],
    p_rev_ids text[], p_rev_parents text[], p_rev_entries text[], p_rev_depths integer[], p_rev_created bigint[],
    p_ev_seqs bigint[], p_ev_subs text[], p_ev_types text[], p_ev_ats bigint[], p_ev_data text[]
) RETURNS text[] LANGUAGE plpgsql AS $fn$
DECLARE
    v_out text[] := array_fill(NULL::text, ARRAY[cardinality(p_run_ids)]);
    v_e integer := 0;
    v_r integer := 0;
    v_v integer := 0;
    v_state text;
    v_message text;
BEGIN
    FOR i IN 1 .. cardinality(p_run_ids) LOOP
        BEGIN
            PERFORM repertory.repertory_commit(
                p_thread_ids[i], p_bases[i], p_heads[i], p_thread_created[i], p_thread_updated[i], p_updated[i],
                p_run_ids[i], p_statuses[i], p_tokens[i], p_states[i], p_redeems[i],
                p_entry_ids[v_e + 1 : v_e + p_entry_counts[i]], p_entry_created[v_e + 1 : v_e + p_entry_counts[i]],
                p_entry_messages[v_e + 1 : v_e + p_entry_counts[i]],
                p_rev_ids[v_r + 1 : v_r + p_rev_counts[i]], p_rev_parents[v_r + 1 : v_r + p_rev_counts[i]],
                p_rev_entries[v_r + 1 : v_r + p_rev_counts[i]], p_rev_depths[v_r + 1 : v_r + p_rev_counts[i]],
                p_rev_created[v_r + 1 : v_r + p_rev_counts[i]],
                p_ev_seqs[v_v + 1 : v_v + p_ev_counts[i]], p_ev_subs[v_v + 1 : v_v + p_ev_counts[i]],
                p_ev_types[v_v + 1 : v_v + p_ev_counts[i]], p_ev_ats[v_v + 1 : v_v + p_ev_counts[i]],
                p_ev_data[v_v + 1 : v_v + p_ev_counts[i]]);
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT;
            v_out[i] := v_state || ' ' || v_message;
        END;
        v_e := v_e + p_entry_counts[i];
        v_r := v_r + p_rev_counts[i];
        v_v := v_v + p_ev_counts[i];
    END LOOP;
    RETURN v_out;
END
$fn$;
"""

# Accepting a turn in one statement: the events it carries (gap-checked as the commit function
# does), the session row locked so racing adders take seqs one after another (each statement of a
# plpgsql function sees what committed before it), the turn row, and the session's thread row back.
# The record travels split around its top-level ``seq`` value (``p_record_head || seq ||
# p_record_tail``): the server cannot rewrite it as JSON, since a message may hold ``\u0000``,
# which both jsonb and the json functions refuse.
_ACCEPT_TURN_FUNCTION = r"""
CREATE OR REPLACE FUNCTION repertory.repertory_accept_turn(
    p_submission_id text, p_session_id text, p_status text, p_record_head text, p_record_tail text,
    p_ev_seqs bigint[], p_ev_subs text[], p_ev_types text[], p_ev_ats bigint[], p_ev_data text[],
    OUT o_seq integer, OUT o_head text, OUT o_created bigint, OUT o_updated bigint
) LANGUAGE plpgsql AS $fn$
DECLARE
    v_last bigint;
BEGIN
    IF cardinality(p_ev_seqs) > 0 THEN
        SELECT COALESCE(MAX(seq), 0) INTO v_last FROM repertory.events WHERE session_id = p_session_id;
        IF EXISTS (SELECT 1 FROM unnest(p_ev_seqs) WITH ORDINALITY AS u(s, i) WHERE s <> v_last + i) THEN
            RAISE EXCEPTION USING ERRCODE = 'RP001',
                MESSAGE = format('event seq %s of session %L is not the next one (%s)', p_ev_seqs[1], p_session_id,
                                 v_last + 1);
        END IF;
        INSERT INTO repertory.events (session_id, seq, submission_id, type, at, data)
        SELECT p_session_id, * FROM unnest(p_ev_seqs, p_ev_subs, p_ev_types, p_ev_ats, p_ev_data);
    END IF;
    PERFORM 1 FROM repertory.sessions WHERE session_id = p_session_id FOR UPDATE;
    SELECT COALESCE(MAX(seq), 0) + 1 INTO o_seq FROM repertory.turns WHERE session_id = p_session_id;
    INSERT INTO repertory.turns (submission_id, session_id, seq, status, record)
    VALUES (p_submission_id, p_session_id, o_seq, p_status, p_record_head || o_seq || p_record_tail);
    SELECT head, created_at, updated_at INTO o_head, o_created, o_updated
    FROM repertory.threads WHERE thread_id = p_session_id;
END
$fn$;
"""

# Adding spend to ledgers: member i of a commit (or a group-commit batch) adds its spend to its
# ``p_counts[i]`` scopes (flattened in ``p_scopes``) when ``p_outcomes[i]`` is NULL, that is when
# it landed (NULL outcomes: a lone commit, which got here only by landing). Every row is locked
# first, in scope order, so transactions adding to the same ledgers (a tree's sessions committing
# in parallel batches) take their locks in one order and never deadlock; they queue on the row.
_SPEND_FUNCTION = r"""
CREATE OR REPLACE FUNCTION repertory.repertory_spend(
    p_outcomes text[], p_counts integer[], p_scopes text[],
    p_cost double precision[], p_tokens bigint[], p_requests bigint[], p_tool_calls bigint[]
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_s integer := 0;
BEGIN
    PERFORM 1 FROM repertory.ledgers WHERE scope = ANY(p_scopes) ORDER BY scope FOR UPDATE;
    FOR i IN 1 .. cardinality(p_counts) LOOP
        IF p_outcomes[i] IS NULL AND p_counts[i] > 0 THEN
            UPDATE repertory.ledgers
            SET cost = cost + p_cost[i], tokens = tokens + p_tokens[i],
                model_requests = model_requests + p_requests[i], tool_calls = tool_calls + p_tool_calls[i]
            WHERE scope = ANY(p_scopes[v_s + 1 : v_s + p_counts[i]]);
        END IF;
        v_s := v_s + p_counts[i];
    END LOOP;
END
$fn$;
"""

MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE repertory.meta (key text PRIMARY KEY, value text NOT NULL)",
        """CREATE TABLE repertory.history_entries (
               id text PRIMARY KEY, created_at bigint NOT NULL, message text NOT NULL)""",
        """CREATE TABLE repertory.history_revisions (
               id text PRIMARY KEY, parent_id text, entry_id text NOT NULL,
               depth integer NOT NULL, created_at bigint NOT NULL)""",
        """CREATE TABLE repertory.threads (
               thread_id text PRIMARY KEY, head text, created_at bigint NOT NULL, updated_at bigint NOT NULL)""",
        "CREATE SEQUENCE repertory.runs_write_seq",
        """CREATE TABLE repertory.runs (
               run_id text PRIMARY KEY, thread_id text NOT NULL, status text NOT NULL,
               updated_at bigint NOT NULL, write_seq bigint NOT NULL, token text, state text NOT NULL)""",
        "CREATE INDEX runs_by_thread ON repertory.runs (thread_id)",
        _COMMIT_FUNCTION,
    ],
    # The session tree: sessions, durable turns, the per-session event log; commits carry events.
    2: [
        """CREATE TABLE repertory.sessions (
               session_id text PRIMARY KEY, parent_id text, created_at bigint NOT NULL, record text NOT NULL,
               ord bigserial NOT NULL)""",
        "CREATE INDEX sessions_by_parent ON repertory.sessions (parent_id) WHERE parent_id IS NOT NULL",
        """CREATE TABLE repertory.turns (
               submission_id text PRIMARY KEY, session_id text NOT NULL, seq integer NOT NULL,
               status text NOT NULL, record text NOT NULL, UNIQUE (session_id, seq))""",
        "CREATE INDEX turns_open ON repertory.turns (status) WHERE status IN ('queued', 'running')",
        """CREATE TABLE repertory.events (
               session_id text NOT NULL, seq bigint NOT NULL, submission_id text, type text NOT NULL,
               at bigint NOT NULL, data text NOT NULL, PRIMARY KEY (session_id, seq))""",
        "DROP FUNCTION repertory.repertory_commit",
        _COMMIT_FUNCTION_V2,
    ],
    # Long-term memory (``repertory.memory``): remembered messages with their embeddings, a seq
    # counter per resource (its row lock orders appends in commit order), one working-memory
    # document per resource. Text, not jsonb, for the document: jsonb refuses the NUL character.
    3: [
        "CREATE TABLE repertory.memory_resources (resource text PRIMARY KEY, last_seq bigint NOT NULL)",
        """CREATE TABLE repertory.memory_messages (
               resource text NOT NULL, seq bigint NOT NULL, thread_id text NOT NULL, role text NOT NULL,
               text text NOT NULL, created_at bigint NOT NULL, embedder text, embedding bytea,
               PRIMARY KEY (resource, seq))""",
        """CREATE TABLE repertory.working_memory (
               resource text PRIMARY KEY, doc text NOT NULL, updated_at bigint NOT NULL)""",
    ],
    # Group commit: several commits in one transaction and one round trip, a savepoint each.
    4: [_COMMIT_BATCH_FUNCTION],
    # The web UI's session listing (``page_sessions``, ``session_counts``): pages walk sessions
    # newest first by ``ord``, and ask which threads rest suspended or failed. The runs index is
    # partial, so the row rewritten every step of a ``running`` run never touches it.
    5: [
        "CREATE INDEX sessions_by_ord ON repertory.sessions (ord)",
        "CREATE INDEX runs_resting ON repertory.runs (status, thread_id) WHERE status IN ('suspended', 'error')",
    ],
    # Durable time (``repertory.core.timing``): armed timers, cron schedules, webhook deliveries,
    # each found by its due time through an index; records are JSON in ``text`` like the others.
    6: [
        """CREATE TABLE repertory.timers (
               run_id text PRIMARY KEY, session_id text NOT NULL, token text NOT NULL,
               wake_at bigint NOT NULL, due_at bigint NOT NULL)""",
        "CREATE INDEX timers_due ON repertory.timers (due_at)",
        """CREATE TABLE repertory.schedules (
               schedule_id text PRIMARY KEY, session_id text, enabled boolean NOT NULL, next_at bigint,
               record text NOT NULL, ord bigserial NOT NULL)""",
        "CREATE INDEX schedules_due ON repertory.schedules (next_at) WHERE enabled AND next_at IS NOT NULL",
        "CREATE INDEX schedules_by_session ON repertory.schedules (session_id)",
        """CREATE TABLE repertory.webhooks (
               delivery_id text PRIMARY KEY, submission_id text NOT NULL, status text NOT NULL,
               attempts integer NOT NULL, due_at bigint NOT NULL, record text NOT NULL, ord bigserial NOT NULL)""",
        "CREATE INDEX webhooks_pending ON repertory.webhooks (due_at) WHERE status = 'pending'",
        "CREATE INDEX webhooks_by_submission ON repertory.webhooks (submission_id)",
    ],
    # Deleting sessions (``delete_sessions``, ``repertory.storage.history_gc``): each revision's
    # writer, the pins where a thread's lineage joins history it did not write, and entries a
    # second revision came to hold; the commit function records them (same signature, so the
    # batch function that calls it is unchanged). Nothing written at every step is indexed.
    7: [
        "ALTER TABLE repertory.history_revisions ADD COLUMN thread_id text",
        """CREATE TABLE repertory.history_pins (
               revision_id text NOT NULL, thread_id text NOT NULL, PRIMARY KEY (revision_id, thread_id))""",
        "CREATE INDEX history_pins_by_thread ON repertory.history_pins (thread_id)",
        "CREATE TABLE repertory.history_shared_entries (entry_id text PRIMARY KEY)",
        "CREATE INDEX memory_messages_by_thread ON repertory.memory_messages (thread_id)",
        _COMMIT_FUNCTION_V3,
    ],
    # A turn accepted in one round trip (``accept_turn``): it was five statements and a read of
    # the thread head after it.
    8: [_ACCEPT_TURN_FUNCTION],
    # A commit whose lineage does not continue from its base (a compaction) pins that base for its
    # thread (``history_gc.commit_pins``), so deleting the thread reaches the lineage it left;
    # and every revision naming an entry a compaction adds again (``history_entry_namers``), so
    # a deletion collects a kept message with the last revision naming it (it was marked shared
    # and never collected).
    9: [
        """CREATE TABLE repertory.history_entry_namers (
               entry_id text NOT NULL, revision_id text NOT NULL, PRIMARY KEY (entry_id, revision_id))""",
        "CREATE INDEX history_entry_namers_by_revision ON repertory.history_entry_namers (revision_id)",
        _COMMIT_FUNCTION_V4,
    ],
    # A tenant's sessions, newest first (``page_sessions(owner=)``: the HTTP server's searches and
    # its web UI under a key): the listing tested every session's JSON back to the oldest for a
    # tenant with few (63 ms a page at 100,000 sessions on SQLite). The owner never changes, so it
    # gets a column written once at creation and an index with ``ord``: a page is an index range
    # read backwards, and the per-turn rewrite of ``record`` leaves the index alone. The
    # operator's sessions (no owner) are left out of it.
    10: [
        "ALTER TABLE repertory.sessions ADD COLUMN owner text",
        # Only owned rows are rewritten: a row updated to what it holds is still a new tuple version.
        "UPDATE repertory.sessions SET owner = (record::json ->> 'owner') WHERE (record::json ->> 'owner') IS NOT NULL",
        "CREATE INDEX sessions_by_owner ON repertory.sessions (owner, ord) WHERE owner IS NOT NULL",
    ],
    # A tenant's crons are bounded (the HTTP server's ``max_crons_per_owner``), and counting them
    # must not read every other tenant's schedules: the owner (fixed at creation) gets a column and
    # an index.
    11: [
        "ALTER TABLE repertory.schedules ADD COLUMN owner text",
        "UPDATE repertory.schedules SET owner = (record::json ->> 'owner') "
        "WHERE (record::json ->> 'owner') IS NOT NULL",
        "CREATE INDEX schedules_by_owner ON repertory.schedules (owner)",
    ],
    # The decision inbox (``repertory.core.inbox``): decisions taken in one process for a session
    # another drives, and the beats of the hosts that drive them. The pending index holds only
    # pending rows in the pending query's order (``created_at``, then ``ord``: insertion order),
    # so that query is a bounded walk from its start; settled rows stay (until their session is
    # deleted, through ``decision_requests_by_session``) and never enter it.
    12: [
        """CREATE TABLE repertory.decision_requests (
               request_id text PRIMARY KEY, session_id text NOT NULL, status text NOT NULL,
               claims integer NOT NULL, claimed_until bigint NOT NULL, created_at bigint NOT NULL,
               record text NOT NULL, ord bigserial NOT NULL)""",
        "CREATE INDEX decision_requests_pending ON repertory.decision_requests (created_at, ord) "
        "WHERE status = 'pending'",
        "CREATE INDEX decision_requests_by_session ON repertory.decision_requests (session_id)",
        "CREATE TABLE repertory.host_beats (host_id text PRIMARY KEY, seen_at bigint NOT NULL)",
    ],
    # Budgets (``repertory.core.budget``): a ledger per scope (``tree:<root>``, ``owner:<owner>``),
    # its budget as JSON and the spend counted against it in columns, which a checkpoint adds to
    # in its own transaction (``repertory_spend``; the commit functions are unchanged, so a
    # process of the previous version keeps committing on an upgraded database).
    13: [
        """CREATE TABLE repertory.ledgers (
               scope text PRIMARY KEY, budget text NOT NULL, cost double precision NOT NULL DEFAULT 0,
               tokens bigint NOT NULL DEFAULT 0, model_requests bigint NOT NULL DEFAULT 0,
               tool_calls bigint NOT NULL DEFAULT 0)""",
        _SPEND_FUNCTION,
    ],
}
