"""``repertory demo``: a fleet of agent sessions on the embedded default (local Ray + SQLite).

Orchestrators plan, spawn workers in parallel, wait for a reviewer to approve or reject their
writes, hear back through notifications and summarise; one gets a follow-up mid-turn, one is
forked, and on Ray one host is killed and recovers. Then the run history is exported to Parquet
and a few questions are answered with DuckDB.
"""

from repertory.demo.main import run_demo

__all__ = ["run_demo"]
