"""What a figure was measured with, beyond what pyperf reads itself: the git commit, the versions that move figures."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

__all__ = ["ROOT", "VERSIONS", "git_commit", "version"]

ROOT = Path(__file__).resolve().parent.parent.parent

VERSIONS = (
    "repertory", "pyperf", "pydantic", "pydantic-core", "psycopg", "psycopg-pool", "ray", "pyarrow", "duckdb",
    "mcp", "a2a-sdk", "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "matplotlib",
)  # fmt: skip
"""Distributions whose versions change the figures: repertory's own dependencies, then the peer's."""


def version(dist: str) -> str | None:
    """The installed version of a distribution, or ``None``."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_commit() -> str:
    """The commit measured, with ``+dirty`` when ``repertory/`` had uncommitted changes; ``unknown`` outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "repertory"], cwd=ROOT, capture_output=True,
                               text=True, check=True, timeout=10).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+dirty" if dirty else head
