"""What a figure was measured on: platform, interpreter, library versions, cores, the git commit.

One reading for every benchmark (there were four copies), so every report names its machine the same
way; the git commit is read-only git, for telling runs apart, and says whether ``repertory/`` had
uncommitted changes (a figure of uncommitted code says so).
"""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import Field, SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from benchmarks.harness.model import BenchModel

__all__ = [
    "ROOT",
    "VERSIONS",
    "Machine",
    "cpu_model",
    "git_state",
    "machine_info",
    "memory_gb",
    "version",
    "versions",
]

ROOT = Path(__file__).resolve().parent.parent.parent

# Distributions whose versions change the figures: repertory's own dependencies, then the peers.
VERSIONS = (
    "repertory", "pydantic", "pydantic-core", "psycopg", "psycopg-pool", "ray", "numpy", "pyarrow", "duckdb",
    "rich", "typer", "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "langgraph-prebuilt",
    "langchain-core", "aiosqlite", "ormsgpack", "matplotlib",
)  # fmt: skip


class Machine(BenchModel):
    """What the figures were measured on; the load average before and after, since the machine is shared."""

    platform: str = ""
    machine: str = ""
    processor: str | None = None
    python: str = ""
    python_implementation: str = ""
    cpu_count: int | None = None
    sqlite_version: str = ""
    pydantic_version: str | None = None
    psycopg_version: str | None = None
    pyarrow: str | None = None  # older export reports named these two here
    duckdb: str | None = None
    versions: dict[str, str | None] = Field(default_factory=dict)
    langsmith_tracing_env: dict[str, str | None] | None = None
    load_average_before: list[float] | None = None
    load_average_after: list[float] | None = None
    git_commit: str | None = None
    repertory_tree_dirty: bool | None = None
    git_commit_after: str | None = None
    repertory_tree_dirty_after: bool | None = None

    @model_serializer(mode="wrap")
    def _known_only(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        # A field this run did not read (an older report's, another benchmark's) is left out, not null.
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None}


def version(dist: str) -> str | None:
    """The installed version of a distribution, or ``None``."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions(dists: tuple[str, ...] = VERSIONS) -> dict[str, str | None]:
    """Installed versions of ``dists`` (``None``: not installed)."""
    return {d: version(d) for d in dists}


def git_state() -> dict[str, Any]:
    """The commit measured and whether ``repertory/`` had uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "repertory"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None}
    return {"git_commit": head, "repertory_tree_dirty": bool(dirty)}


def machine_info() -> Machine:
    """The machine now: platform, Python, cores, SQLite, versions, load average, git commit."""
    git = git_state()
    return Machine(
        platform=platform.platform(),
        machine=platform.machine(),
        processor=platform.processor() or None,
        python=sys.version.split()[0],
        python_implementation=platform.python_implementation(),
        cpu_count=os.cpu_count(),
        sqlite_version=sqlite3.sqlite_version,
        pydantic_version=version("pydantic"),
        psycopg_version=version("psycopg"),
        versions=versions(),
        load_average_before=list(os.getloadavg()),
        git_commit=git.get("git_commit"),
        repertory_tree_dirty=git.get("repertory_tree_dirty"),
    )


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), for the header of ``RESULTS.md``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gb() -> str:
    """The machine's RAM, as text."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return "unknown"
    return f"{pages * size / 2**30:.1f} GB"
