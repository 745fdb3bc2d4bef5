"""The one harness every benchmark uses: typed reports, the machine, statistics, timing, probes, output.

- ``report``: the report model (``Report``, ``Row``; ``model.BenchModel`` under every part), ``Clock``
  and ``finish`` for its frame, atomic JSON writing;
- ``machine``: what a figure was measured on (``Machine``: platform, versions, git commit);
- ``stats``: percentiles and latency distributions (``Dist``);
- ``timing``: timed calls, garbage-collector time, progress bars;
- ``interleaved``: kinds of one call timed side by side in alternating blocks;
- ``served``, ``echo``: ``repertory serve`` in its own process, and the echo agent a face's overhead is read on;
- ``profiling``: cProfile tables grouped into categories;
- ``procfs``: resident set, CPU seconds and process facts read from ``/proc``;
- ``sqlite_files``: bytes a SQLite database holds on disk;
- ``commits``: the engine-style commit workload the store-level benchmarks share;
- ``tables``: the plain-text tables printed after a run;
- ``cli``, ``children``, ``local_ray``: a benchmark's command line, its child processes, its Ray;
- ``suite``, ``render``, ``plots``: the registry ``python -m benchmarks`` runs, ``RESULTS.md``, the PNGs.

Speed is measured here, never asserted: a slow figure is a finding, not a failure.
"""
