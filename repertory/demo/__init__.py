"""``repertory demo``: a fleet of agent sessions on the embedded default (local Ray + SQLite).

Orchestrators' models delegate to workers (``agent_tool``: one child session per call, run in
parallel), a reviewer approves or rejects the workers' writes at the orchestrator, and the
orchestrators summarise what came back; one gets a follow-up mid-turn, one is forked, and on Ray
one host is killed and recovers with no second child. Then the run history is exported to Parquet
and a few questions are answered with DuckDB.
"""

from repertory.demo.main import run_demo

__all__ = ["run_demo"]
