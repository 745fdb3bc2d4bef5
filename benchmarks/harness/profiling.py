"""cProfile tables, read the same way by every benchmark: labels, top functions, time by category.

``pstats`` keeps its table in ``Stats.stats``: ``{(file, line, function): (primitive calls, calls,
own seconds, cumulative seconds, {caller key: (the same four for that caller)})}``, where a
built-in has file ``"~"``. ``stats_of`` reads it once, typed; the rest works on that.

cProfile slows every Python call but not the C inside sqlite3, so its microseconds are read as
shares of the profiled run, and each benchmark gives the unprofiled wall time beside them.
"""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from benchmarks.harness.versions import ROOT

__all__ = [
    "Key",
    "Stat",
    "by_category",
    "charged_to_callers",
    "cumulative",
    "label",
    "matches",
    "short_path",
    "stats_of",
    "top_by_tottime",
    "total_tottime",
]

Key = tuple[str, int, str]
"""(file, line, function) of a profiled function; file ``"~"`` for a built-in."""

Stat = tuple[int, int, float, float, dict[Key, tuple[Any, ...]]]
"""(primitive calls, calls, own seconds, cumulative seconds, callers)."""


def stats_of(profile: cProfile.Profile) -> dict[Key, Stat]:
    """The profile's table (see the module docstring)."""
    table: dict[Key, Stat] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    return table


def total_tottime(stats: dict[Key, Stat]) -> float:
    """Seconds of own time of every function: the profiled total."""
    return sum(s[2] for s in stats.values())


def short_path(filename: str) -> str:
    """A file name shortened to the part a reader recognises (package path, or repository-relative)."""
    path = filename.replace("\\", "/")
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return path


def label(key: Key, *, basename: bool = False) -> str:
    """``file:line(function)`` of a key (``basename``: the file's name only); a built-in's own name."""
    filename, line, name = key
    if filename == "~":
        return name
    where = Path(filename).name if basename else short_path(filename)
    return f"{where}:{line}({name})"


def matches(key: Key, suffix: str, function: str) -> bool:
    """Whether ``key`` is ``function`` in a file ending with ``suffix`` (``"~"``: a built-in)."""
    filename, _, name = key
    if name != function:
        return False
    return filename == "~" if suffix == "~" else filename.replace("\\", "/").endswith(suffix)


def top_by_tottime(stats: dict[Key, Stat], n: int) -> list[tuple[Key, Stat]]:
    """The ``n`` functions with the most own time, most first."""
    return sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:n]


def by_category(stats: dict[Key, Stat], classify: Callable[[Key], str]) -> dict[str, float]:
    """Own seconds summed by the category ``classify`` gives each function, largest first."""
    totals: dict[str, float] = {}
    for key, stat in stats.items():
        category = classify(key)
        totals[category] = totals.get(category, 0.0) + stat[2]
    return dict(sorted(totals.items(), key=lambda kv: kv[1], reverse=True))


def charged_to_callers(stats: dict[Key, Stat], direct: Callable[[Key], str | None]) -> dict[str, float]:
    """Own seconds by category, where a function ``direct`` gives no category is charged to its callers.

    A generic helper (a builtin, ``str.join``, ``contextlib``) is split among its callers in
    proportion to the time each spent in it (by calls when no time was recorded), recursively, so
    the categories add up to the profiled total; a cycle is cut where it closes.
    """
    memo: dict[Key, dict[str, float]] = {}

    def shares(key: Key, visiting: frozenset[Key]) -> dict[str, float]:
        if key in memo:
            return memo[key]
        category = direct(key)
        out: dict[str, float] = {}
        if category is not None:
            out = {category: 1.0}
        else:
            callers = stats[key][4] if key in stats else {}
            weights = {c: float(edge[2]) for c, edge in callers.items() if c not in visiting}
            total = sum(weights.values())
            if total <= 0:
                weights = {c: float(edge[0]) for c, edge in callers.items() if c not in visiting}
                total = sum(weights.values())
            if total <= 0:
                out = {"other": 1.0}
            else:
                for caller, weight in weights.items():
                    for cat, share in shares(caller, visiting | {key}).items():
                        out[cat] = out.get(cat, 0.0) + share * weight / total
        if not visiting:
            memo[key] = out
        return out

    seconds: dict[str, float] = {}
    for key, stat in stats.items():
        for cat, share in shares(key, frozenset()).items():
            seconds[cat] = seconds.get(cat, 0.0) + stat[2] * share
    return seconds


def cumulative(stats: dict[Key, Stat], wanted: Iterable[tuple[str, str]]) -> float:
    """Cumulative seconds of the functions named by ``(file suffix, function)`` pairs."""
    pairs = list(wanted)
    return sum(s[3] for key, s in stats.items() if any(matches(key, suffix, fn) for suffix, fn in pairs))
