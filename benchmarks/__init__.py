"""repertory's benchmarks: ``python -m benchmarks`` runs the suite, ``python -m benchmarks.<name>`` one of them.

Each module is one benchmark: its docstring says what it measures and why it is shaped that way,
its code is the workload and the figures it records. ``harness/`` is what they share: pyperf's
``Runner`` and the figures kept as pyperf suites (``command``, ``figures``), the one renderer of
``RESULTS.md`` and the plots (``render``), the registry (``suite``) and a few shared workloads and
probes. Speed is measured here, never asserted in a test.
"""
