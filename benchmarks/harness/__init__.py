"""The one harness every benchmark uses: pyperf for timing and keeping figures, one renderer, shared workloads.

- ``command``: a benchmark's command line and pyperf ``Runner`` (``main``, ``Timer``, ``Options``);
- ``figures``: what a run measured, written as a pyperf suite (``Figures``, ``Plot``, ``Target``);
- ``render``: the one renderer of ``RESULTS.md``, the docs' performance page and every plot;
- ``suite``: the registry ``python -m benchmarks`` runs, each benchmark in its own process;
- ``versions``: the repository, package versions and git commit a figure was measured on;
- ``interleaved``: kinds of one call timed side by side in alternating blocks;
- ``served``, ``echo``: ``repertory serve`` in its own process, and the echo agent a face's overhead is read on;
- ``commits``: the engine-style commit workload the store-level benchmarks share;
- ``lognormal``: the log-normal model delay of the concurrency workloads;
- ``profiling``, ``gctime``, ``sqlcount``, ``sqlite_files``: cProfile by category, the collector's
  time, SQL statements counted, a SQLite database's bytes on disk;
- ``children``, ``local_ray``: a benchmark's child processes, its Ray.

Speed is measured here, never asserted: a slow figure is a finding, not a failure.
"""
