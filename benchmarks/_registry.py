"""The benchmarks ``python -m benchmarks`` runs, in order, and how each is found.

A benchmark is a module ``benchmarks.<name>`` with the suite entry (``benchmarks._suite``)::

    def run_suite(quick: bool, out_dir: Path, peers: bool = True) -> dict[str, Any]

Cheap benchmarks come first, so a quick look at a full run has figures early; Ray comes last
because it starts (and stops) a Ray instance of its own.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, cast

__all__ = ["BENCHMARKS", "Benchmark", "entry_of", "load"]


@dataclass(frozen=True)
class Benchmark:
    """One registered benchmark; ``quick_skip`` says why ``--quick`` leaves it out (None: it runs)."""

    name: str
    about: str
    quick_skip: str | None = None


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("store", "commit_session throughput, load_history, bytes per message (SQLite, PostgreSQL)"),
    Benchmark("latency", "commit latency p50 / p99, one writer and many"),
    Benchmark("group_commit", "group commit: concurrent sessions' commits coalesced"),
    Benchmark("steps", "model steps/s of one session against LangGraph; bytes per step by run length"),
    Benchmark("fork", "fork cost vs history depth 10 to 100,000"),
    Benchmark("concurrency", "N concurrent sessions, log-normal model delay, local and Ray"),
    Benchmark("recovery", "10,000 suspended + 100 running sessions, SIGKILL, a fresh runtime"),
    Benchmark("sessions", "memory per session, creation rate, many sessions in one process"),
    Benchmark("memory", "long-term memory recall latency"),
    Benchmark("export", "Parquet export and DuckDB queries"),
    Benchmark("ray", "the Ray backend: overhead, throughput, creation, memory, events, host crash",
              quick_skip="starting Ray takes ~10 s; `python -m benchmarks.ray --quick` runs it"),
    Benchmark("ray_failover", "a node of a three-node Ray cluster dies; its sessions are served elsewhere",
              quick_skip="starts a three-node Ray cluster; `python -m benchmarks.ray_failover --quick` runs it"),
    Benchmark("http", "repertory serve through langgraph-sdk: create + wait, stream, concurrent clients"),
)  # fmt: skip


def load(name: str) -> ModuleType | None:
    """The module ``benchmarks.<name>``, or ``None`` when no such file exists (yet).

    Only the module's own absence counts as "not present": an import error inside it is a failure
    the caller must see.
    """
    try:
        return importlib.import_module(f"benchmarks.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"benchmarks.{name}":
            return None
        raise


def entry_of(module: ModuleType) -> Callable[..., dict[str, Any]] | None:
    """The module's suite entry: ``run_suite``, or a plain ``run(quick)`` of the same shape.

    A ``run`` is taken only when it is synchronous and its one required parameter is ``quick``
    (older scripts have ``run`` functions with other signatures, which are not entries).
    """
    fn = getattr(module, "run_suite", None)
    if callable(fn) and not inspect.iscoroutinefunction(fn):
        return cast(Callable[..., dict[str, Any]], fn)
    fn = getattr(module, "run", None)
    if not callable(fn) or inspect.iscoroutinefunction(fn):
        return None
    required = [p.name for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty]
    return cast(Callable[..., dict[str, Any]], fn) if required == ["quick"] else None
