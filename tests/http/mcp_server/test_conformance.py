"""``@modelcontextprotocol/conformance`` 0.2.0-alpha.12's server scenarios against a keyless ``repertory serve``.

The whole suite (``--suite all``: both protocol eras and the tasks extension's scenarios) runs
once against a real ``repertory serve`` process on loopback with no keys (the suite sends no
headers of its own). It runs its scenarios at once, all as the one anonymous caller, so the
server's per-key stream bound is raised for it (``--max-streams``), as a deployment would for
one trusted client.

Most scenarios call fixture tools, prompts and resources of the suite's own reference server
(``test_simple_text``, ``greet``, ``slow_compute``, ``test://static-text``...); repertory serves
agents, not fixtures, and we do not fake them. So a scenario here either passes (no check failed
and at least one check other than the wire-schema check succeeded: ``PASSING``), or is not
applicable, with the reason (``NOT_APPLICABLE``); in scenarios that are partly applicable the
checks that apply must pass (``PASSING_CHECKS``). Every failed check must be one the suite itself
reports as a missing fixture or method, so a genuine failure cannot hide among them. The same
lists are on docs/guides/mcp-server.md.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from pathlib import Path
from typing import Any

from tests.http.mcp_server.npm_tools import run_js
from tests.http.test_serve import _serve as serve

PASSING = {
    "dns-rebinding-protection",
    "http-header-validation",
    "input-required-result-unsupported-methods",
    "ping",
    "resources-list",
    "sep-2164-resource-not-found",
    "server-initialize",
    "tools-list",
}
"""Scenarios that apply to repertory and pass whole."""

PASSING_CHECKS = {
    "caching": {
        "sep-2549-tools-list-caching-hints",
        "sep-2549-resources-list-caching-hints",
        "sep-2549-resources-templates-list-caching-hints",
        "sep-2549-ttl-non-negative",
        "sep-2549-cache-scope-valid",
    },
    "server-stateless": {
        "sep-2575-request-meta-invalid-missing-meta",
        "sep-2575-http-server-meta-invalid-400",
        "sep-2575-request-meta-invalid-missing-protocol-version",
        "sep-2575-request-meta-invalid-missing-client-capabilities",
        "sep-2575-request-meta-client-info-optional",
        "sep-2575-server-implements-discover",
        "sep-2575-server-identifies-in-result-meta",
        "sep-2575-discover-capabilities-match-handlers",
        "sep-2575-server-unsupported-version-error",
        "sep-2575-http-server-unsupported-version-400",
        "sep-2575-http-server-header-mismatch-400",
        "sep-2575-http-server-method-not-found-404",
        "sep-2575-server-sends-subscription-ack",
        "sep-2575-server-tags-subscription-id",
        "sep-2575-server-honors-notification-filter",
        "sep-2575-http-server-error-jsonrpc-id",
    },
    "tasks-capability-negotiation": {"tasks-extension-advertised", "sep-2663-tasks-methods-non-declaring"},
    "tasks-dispatch-and-envelope": {
        "sep-2663-tasks-result-removed-method-not-found",
        "tasks-removed-tasks-list",
        "sep-2663-tasks-get-invalid-task-id-32602",
    },
    "tasks-request-headers": {"tasks-headers-reject-mismatched-method"},
}
"""In scenarios that are partly applicable (the rest needs fixtures): the checks that must pass."""

_FIXTURE_TOOLS = "calls the reference server's fixture tools ({}), which repertory does not serve"
_TASK_FIXTURES = "greet, slow_compute, failing_job, protocol_error_job, confirm_delete, multi_input"
NOT_APPLICABLE = {
    "caching": "prompts/list: repertory serves no prompts (the other lists' cache hints pass)",
    "completion-complete": "completion/complete: repertory serves no completions",
    "elicitation-sep1034-defaults": _FIXTURE_TOOLS.format("test_elicitation_sep1034_defaults"),
    "elicitation-sep1330-enums": _FIXTURE_TOOLS.format("test_elicitation_sep1330_enums"),
    "http-custom-header-server-validation": "no tool declares x-mcp-header parameters (an agent's are task and "
    "session_id)",
    "input-required-result-basic-elicitation": _FIXTURE_TOOLS.format("test_input_required_result_elicitation"),
    "input-required-result-basic-list-roots": _FIXTURE_TOOLS.format("test_input_required_result_list_roots"),
    "input-required-result-basic-sampling": _FIXTURE_TOOLS.format("test_input_required_result_sampling"),
    "input-required-result-capability-check": _FIXTURE_TOOLS.format("test_input_required_result_capabilities"),
    "input-required-result-ignore-extra-params": _FIXTURE_TOOLS.format("test_input_required_result_elicitation"),
    "input-required-result-missing-input-response": _FIXTURE_TOOLS.format("test_input_required_result_*"),
    "input-required-result-multi-round": _FIXTURE_TOOLS.format("test_input_required_result_multi_round"),
    "input-required-result-multiple-input-requests": _FIXTURE_TOOLS.format(
        "test_input_required_result_multiple_inputs"
    ),
    "input-required-result-non-tool-request": "MRTR on prompts/get: repertory serves no prompts",
    "input-required-result-request-state": _FIXTURE_TOOLS.format("test_input_required_result_request_state"),
    "input-required-result-result-type": _FIXTURE_TOOLS.format("test_input_required_result_elicitation"),
    "input-required-result-tampered-state": _FIXTURE_TOOLS.format("test_input_required_result_tampered_state"),
    "input-required-result-validate-input": "its checks pass only because the fixture tool "
    "test_input_required_result_elicitation is unknown (the MRTR answers are tested with the official client)",
    "json-schema-2020-12": _FIXTURE_TOOLS.format("json_schema_2020_12_tool"),
    "logging-set-level": "logging/setLevel: logging is deprecated in 2026-07-28 and not served",
    "prompts-get-embedded-resource": "repertory serves no prompts",
    "prompts-get-simple": "repertory serves no prompts",
    "prompts-get-with-args": "repertory serves no prompts",
    "prompts-get-with-image": "repertory serves no prompts",
    "prompts-list": "repertory serves no prompts",
    "resources-read-binary": "reads the fixture resource test://static-binary (repertory's are repertory://sessions/...)",
    "resources-read-text": "reads the fixture resource test://static-text (repertory's are repertory://sessions/...)",
    "resources-subscribe": "resources/subscribe is the 2025 era's; not served (2026-07-28 has subscriptions/listen)",
    "resources-templates-read": "reads a fixture template's resource (test://template/...)",
    "resources-unsubscribe": "resources/unsubscribe is the 2025 era's; not served",
    "sep-2640-skills-directory": "the skills extension (io.modelcontextprotocol/skills) is not served",
    "sep-2640-skills-enumeration": "the skills extension (io.modelcontextprotocol/skills) is not served",
    "sep-2640-skills-manifest": "the skills extension (io.modelcontextprotocol/skills) is not served",
    "server-session-lifecycle": "stateful 2025 sessions (Mcp-Session-Id): the server is stateless, any process answers",
    "server-sse-multiple-streams": "needs a stateful 2025 session (a standalone GET stream): the server is stateless",
    "server-sse-polling": "needs a stateful 2025 session (SSE resumption): the server is stateless",
    "server-stateless": _FIXTURE_TOOLS.format("test_missing_capability, test_streaming_elicitation, test_logging_tool")
    + "; the rest passes",
    "tasks-capability-negotiation": _FIXTURE_TOOLS.format("slow_compute") + "; the rest passes",
    "tasks-dispatch-and-envelope": _FIXTURE_TOOLS.format(_TASK_FIXTURES) + "; the rest passes",
    "tasks-lifecycle": _FIXTURE_TOOLS.format(_TASK_FIXTURES),
    "tasks-mrtr-composition": _FIXTURE_TOOLS.format("test_tool_with_task"),
    "tasks-mrtr-input": _FIXTURE_TOOLS.format("confirm_delete, multi_input"),
    "tasks-request-headers": _FIXTURE_TOOLS.format("greet, slow_compute") + "; the rest passes",
    "tasks-request-state-removal": _FIXTURE_TOOLS.format("slow_compute"),
    "tasks-required-task-error": _FIXTURE_TOOLS.format("failing_job, declared task-required"),
    "tasks-status-notifications": "skipped by the suite itself (its harness awaits a subscriptions/listen rewrite); "
    "repertory's notifications/tasks are tested with raw SSE in test_tasks.py",
    "tasks-wire-fields": _FIXTURE_TOOLS.format("slow_compute"),
    "tools-call-audio": _FIXTURE_TOOLS.format("test_audio_content"),
    "tools-call-elicitation": _FIXTURE_TOOLS.format("test_elicitation"),
    "tools-call-embedded-resource": _FIXTURE_TOOLS.format("test_embedded_resource"),
    "tools-call-error": _FIXTURE_TOOLS.format("test_error_handling"),
    "tools-call-image": _FIXTURE_TOOLS.format("test_image_content"),
    "tools-call-mixed-content": _FIXTURE_TOOLS.format("test_multiple_content_types"),
    "tools-call-sampling": _FIXTURE_TOOLS.format("test_sampling"),
    "tools-call-simple-text": _FIXTURE_TOOLS.format("test_simple_text"),
    "tools-call-with-logging": "logging/setLevel first: logging is deprecated in 2026-07-28 and not served",
    "tools-call-with-progress": _FIXTURE_TOOLS.format("test_tool_with_progress"),
}
"""Every scenario that does not pass whole, with the reason it does not apply."""

MISSING = re.compile(
    r"Unknown tool|Method not found|Resource not found|Not testable|not found\. Available tools|fixture .* unavailable"
    r"|Prerequisite failed|Expected InputRequiredResult|failing_job returned error code -32602"
)
"""How the suite words a check it could not run here: a fixture tool, method or resource the server lacks."""


def _scenario(folder: Path) -> str:
    return re.sub(r"-\d{4}-\d\d-\d\dT.*$", "", folder.name.removeprefix("server-"))


async def test_the_conformance_suite_passes_what_applies(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'conformance.db'}"
    proc, url = await serve("--store", store, "--max-streams", "256", agents="tests.http.agents:make_agents")
    out = tmp_path / "results"
    try:
        status, stdout, stderr = await run_js(
            "conformance", "server", "--url", f"{url}/mcp", "--suite", "all", "-o", str(out), limit_s=600
        )
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 60)
    assert "SUMMARY" in stdout, f"the suite did not finish ({status}):\n{stdout[-3000:]}\n{stderr[-3000:]}"
    results: dict[str, list[dict[str, Any]]] = {
        _scenario(folder): json.loads((folder / "checks.json").read_text()) for folder in out.iterdir()
    }
    assert len(results) == len(list(out.iterdir())) > 60  # one folder per scenario

    def passes(checks: list[dict[str, Any]]) -> bool:
        failed = any(c["status"] == "FAILURE" for c in checks)
        return not failed and any(c["status"] == "SUCCESS" and c["id"] != "wire-schema-valid" for c in checks)

    passing = {name for name, checks in results.items() if passes(checks)} - set(NOT_APPLICABLE)
    assert passing == PASSING
    assert set(results) == PASSING | set(NOT_APPLICABLE)  # every scenario is accounted for, and no other ran
    for name, wanted in PASSING_CHECKS.items():
        succeeded = {c["id"] for c in results[name] if c["status"] == "SUCCESS"}
        assert wanted <= succeeded, (name, wanted - succeeded)
    unexplained = [failure for failure in _failed(results) if not MISSING.search(failure[2])]
    assert unexplained == []


def _failed(results: dict[str, list[dict[str, Any]]]) -> set[tuple[str, str, str]]:
    return {
        (name, c["id"], c.get("errorMessage") or "") for name, checks in results.items() for c in checks
        if c["status"] == "FAILURE"
    }  # fmt: skip
