"""repertory's benchmarks: ``python -m benchmarks`` runs the suite, ``python -m benchmarks.<name>`` one of them.

``harness/`` is the one harness they all use (typed reports, the machine, statistics, timing,
profiling, ``/proc`` probes, JSON output, ``RESULTS.md`` and the plots). Every other folder is one
benchmark: its ``__init__`` says what it measures and why it is shaped that way and holds the
suite's entry, ``report.py`` its typed report (figures, summary rows, plots), the other modules its
workloads, ``__main__.py`` its command line. Speed is measured here, never asserted in a test.
"""
