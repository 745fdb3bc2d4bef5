"""Chaos soak (issue 26): a mixed fleet under seeded faults for minutes, then an independent check.

    python -m tests.soak [--minutes N] [--backend local|ray] [--store sqlite|postgresql] [--seed S] [--out DIR]

The conductor (``run``) starts a store, a driver process that runs the fleet (``driver``:
orchestrators that delegate and spawn, follow-ups sent mid-turn, notifications, forks, timers,
MCP tools, seeded slow and failing model replies; ``workload``) and an approver process with a
runtime of its own (``approver``), then injects faults on a seeded schedule (``faults``), quiesces
and runs the checker (``checker``, written separately) on what the run left in its folder
(``records`` names the files). Nothing here is a timed assertion: the figures are a report.

It lives with the tests because its checker asserts invariants (the short seeded soaks,
``test_chaos_short.py``, run in the suite); ``python -m benchmarks`` runs four soaks through
``tests.soak.suite`` (``benchmarks.harness.suite.HOMES``) and renders their figures.
"""
