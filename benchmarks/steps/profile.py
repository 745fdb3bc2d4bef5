"""Where a step's time goes: cProfile of a repertory run, own time by category, the step's pieces.

Self time is grouped into categories by the file a function lives in; builtins and generic helpers
(``hasattr``, ``str.join``, ``ModelMessage.text``, ``contextlib``) are charged to their callers in
proportion to the time each caller spent in them, so the categories add up to the profiled total.
The profiler slows Python calls but not the C inside sqlite3, so the report gives the raw profiled
microseconds, the share, and an estimate that keeps SQLite's time and scales the Python categories
down to the unprofiled wall time.
"""

from __future__ import annotations

import cProfile

from benchmarks.harness.profiling import (
    Key,
    charged_to_callers,
    label,
    matches,
    stats_of,
    top_by_tottime,
    total_tottime,
)
from benchmarks.steps.report import CategoryCost, Inclusive, ProfileReport, TopRow

__all__ = ["INCLUSIVE", "direct_category", "profile_report"]

UNSCALED = "sqlite execute"


def direct_category(key: Key) -> str | None:
    """The category a function's own time belongs to, or None to charge it to its callers."""
    file, _, name = key
    if file == "~":
        if "sqlite3." in name:
            return "sqlite execute"
        if "SchemaSerializer" in name or "to_jsonable_python" in name or name.endswith("to_json>"):
            return "pydantic serialize"
        if "SchemaValidator" in name or "pydantic_core" in name:
            return "pydantic validate/construct/copy"
        return None
    path = file.replace("\\", "/")
    if "/pydantic/" in path or "/pydantic_core/" in path:
        if name == "__getattr__":
            return "pydantic private-attr reads"
        if name in ("model_dump_json", "model_dump"):
            return "pydantic serialize"
        return "pydantic validate/construct/copy"
    if "/repertory/testing/" in path:
        return "ScriptedModel"
    if path.endswith("repertory/core/history.py"):
        return "history (MessageHistory)"
    if path.endswith(("repertory/runtime/tools.py", "repertory/runtime/_calls.py")) or "/asyncio/" in path:
        return "tools + asyncio"
    if "/benchmarks/steps/" in path:
        return "tools + asyncio"  # the benchmark's tool body and result_text
    if "/repertory/storage/" in path:
        return "store Python (plan, rows, guards)"
    if path.endswith("repertory/core/ids.py"):
        return "ids + clock"
    if ("/repertory/runtime/" in path or "/repertory/core/" in path) and not path.endswith("messages.py"):
        return "step loop (Drive, Session)"
    return None


# Inclusive time of the pieces of a step: (label, file suffix, function name).
INCLUSIVE: list[tuple[str, str, str]] = [
    ("Drive.request (one model request, incl. stream)", "repertory/runtime/_loop.py", "request"),
    ("  ScriptedModel.request (async generator)", "repertory/testing/scripted.py", "request"),
    ("  Drive.request_messages (list copy)", "repertory/runtime/_loop.py", "request_messages"),
    ("Drive._settle (plan + run calls, append result)", "repertory/runtime/_loop.py", "_settle"),
    ("  Tool.invoke (validate args, run, to_jsonable)", "repertory/runtime/tools.py", "invoke"),
    ("Drive.append -> MessageHistory.append", "repertory/core/history.py", "append"),
    ("Drive.commit (one checkpoint)", "repertory/runtime/_loop.py", "commit"),
    ("  SqliteSessionStore.commit_session", "repertory/storage/sqlite/store.py", "commit_session"),
    ("    plan_commit (walk back, delta)", "repertory/storage/commit_plan.py", "plan_commit"),
    ("    run_row (RunState.model_dump_json)", "repertory/storage/sqlite/store.py", "run_row"),
    ("BaseModel.model_dump_json (all callers)", "pydantic/main.py", "model_dump_json"),
    ("BaseModel.model_copy (all callers)", "pydantic/main.py", "model_copy"),
    ("BaseModel.__getattr__ (private attrs, all callers)", "pydantic/main.py", "__getattr__"),
    ("ids.new_id", "repertory/core/ids.py", "new_id"),
]


def profile_report(profile: cProfile.Profile, steps: int, wall_us_per_step: float, top: int = 20) -> ProfileReport:
    """Top functions by self time, self time by category, and inclusive time of the step's pieces."""
    stats = stats_of(profile)
    requests = steps + 1
    total = total_tottime(stats)
    profiled_us = total * 1e6 / requests
    scale = wall_us_per_step / profiled_us if profiled_us else 0.0
    top_rows = [
        TopRow(
            function=label(key),
            ncalls=int(v[1]),
            calls_per_step=v[1] / requests,
            tottime_s=v[2],
            tottime_us_per_step=v[2] * 1e6 / requests,
            cumtime_us_per_step=v[3] * 1e6 / requests,
        )
        for key, v in top_by_tottime(stats, top)
    ]
    cats = charged_to_callers(stats, direct_category)
    # The profiler slows Python calls, not the C inside sqlite3: keep SQLite's time as measured and
    # scale the Python categories by what is left of the unprofiled wall time.
    c_us = cats.get(UNSCALED, 0.0) * 1e6 / requests
    python_scale = (wall_us_per_step - c_us) / (profiled_us - c_us) if profiled_us > c_us else 0.0
    categories = {
        cat: CategoryCost(
            share=sec / total if total else 0.0,
            profiled_us_per_step=sec * 1e6 / requests,
            est_unprofiled_us_per_step=sec * 1e6 / requests * (1.0 if cat == UNSCALED else python_scale),
        )
        for cat, sec in sorted(cats.items(), key=lambda kv: kv[1], reverse=True)
    }
    inclusive = []
    for piece, suffix, name in INCLUSIVE:
        found = [v for k, v in stats.items() if matches(k, suffix, name)]
        if not found:
            continue
        calls = sum(v[1] for v in found)
        cum = sum(v[3] for v in found)
        inclusive.append(
            Inclusive(piece=piece, calls_per_step=calls / requests, profiled_us_per_step=cum * 1e6 / requests)
        )
    return ProfileReport(
        model_requests=requests,
        profiled_us_per_step=profiled_us,
        wall_us_per_step_unprofiled=wall_us_per_step,
        profiler_inflation=1 / scale if scale else None,
        python_profiler_inflation=1 / python_scale if python_scale else None,
        top_by_tottime=top_rows,
        categories=categories,
        inclusive=inclusive,
    )
