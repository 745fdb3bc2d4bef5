"""Schemathesis over ``/openapi.json``: whatever a client sends, no route answers 5xx.

Every operation of the document gets generated requests, both valid ones and ones that break
the schema (wrong types, missing fields, odd path and query values), with alice's key; a third
strategy aims valid requests at a thread and run that exist and at a served assistant, so the
generated bodies reach the run and interrupt code instead of stopping at a 404. The strategies
come from schemathesis and run under plain hypothesis: schemathesis' pytest integration
(``from_fixture``) reads a private pytest attribute that pytest 9 removed.
"""

from __future__ import annotations

from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.result import Ok

from tests.http.conftest import ALICE, ServerThread, human

EXAMPLES_PER_OPERATION = 40


def _aimed(case: Any) -> Any:
    """A served assistant, and a message it answers at once unless the body resumes instead."""
    if isinstance(case.body, dict) and "assistant_id" in case.body:
        case.body["assistant_id"] = "assistant"
        if case.body.get("command") is None:
            case.body["input"] = human("hello fuzz")
    return case


def test_no_route_answers_a_server_error(sqlite_server: ServerThread) -> None:
    with httpx.Client(base_url=sqlite_server.url, headers={"x-api-key": ALICE}) as http:
        thread_id = http.post("/threads", json={}).json()["thread_id"]
        run = http.post(f"/threads/{thread_id}/runs", json={"assistant_id": "assistant", "input": human("hello")})
        known = {"thread_id": thread_id, "run_id": run.json()["run_id"]}
    schema = schemathesis.openapi.from_url(f"{sqlite_server.url}/openapi.json", headers={"x-api-key": ALICE})
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result.err()  # every route's schema loads
        operations.append(result.ok())
    assert len(operations) >= 20
    for operation in operations:
        if operation.path.endswith("/events"):
            continue  # the event stream follows live events until the caller stops (tested in test_lifecycle.py)
        names = {p.name for p in operation.path_parameters}
        cases = st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE),
            operation.as_strategy(GenerationMode.NEGATIVE),
            operation.as_strategy(
                GenerationMode.POSITIVE, path_parameters={k: v for k, v in known.items() if k in names}
            ).map(_aimed),
        )

        @given(case=cases)
        @settings(
            max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def no_server_error(case: Any) -> None:
            response = case.call(headers={"x-api-key": ALICE}, timeout=30)
            assert response.status_code < 500, (
                f"{case.method} {case.formatted_path} {case.body!r}: {response.status_code} {response.text}"
            )

        no_server_error()
