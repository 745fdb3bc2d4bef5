"""cProfile of an event loop thread (the client's, or a host's), own time per turn by layer.

``profile_figures`` returns plain data: it runs inside a host process too, and what a host returns
crosses Ray as a dict; the client reads it into ``RayProfile``.
"""

from __future__ import annotations

import cProfile
import os
from typing import Any

from benchmarks.harness.profiling import Key, by_category, stats_of, top_by_tottime, total_tottime
from benchmarks.ray.report import RayProfile

__all__ = ["IDLE", "layer", "profile_figures", "ray_profile"]

IDLE = "idle (epoll wait)"


def layer(key: Key) -> str:
    """The layer a profiled function belongs to."""
    filename, _, name = key
    f = filename.replace("\\", "/")
    if "select.epoll" in name:
        return IDLE
    if "/repertory/actors/" in f:
        return "repertory.actors"
    if "/repertory/storage/" in f:
        return "repertory.storage"
    if "/repertory/" in f or "__main__" in f or "/benchmarks/ray/" in f:
        return "repertory (runtime, handles, records)"
    if "/ray/" in f:
        return "ray (python side)"
    if "/pydantic" in f:
        return "pydantic"
    if "/asyncio/" in f or "selectors" in f:
        return "asyncio"
    if "sqlite3" in f or "sqlite3" in name:
        return "sqlite3"
    if f.startswith("~") or f == "":
        if "pydantic" in name:
            return "pydantic"
        if "_raylet" in name or "ray." in name:
            return "ray (C++ bindings)"
        return "builtins (C)"
    return "other"


def profile_figures(profiler: cProfile.Profile, turns: int) -> dict[str, Any]:
    """Own time per turn, grouped by layer (idle wait apart), and the top functions (``RayProfile``'s fields)."""
    stats = stats_of(profiler)
    total = total_tottime(stats)
    layers = by_category(stats, layer)
    idle = layers.get(IDLE, 0.0)
    return {
        "profiled_seconds": round(total, 3),
        "busy_seconds": round(total - idle, 3),
        "busy_us_per_turn": round((total - idle) / turns * 1e6, 1),
        "by_layer_us_per_turn": {k: round(v / turns * 1e6, 1) for k, v in layers.items()},
        "top_tottime": [
            {
                "function": f"{os.path.basename(key[0])}:{key[1]}({key[2]})",
                "tottime_s": round(s[2], 3),
                "calls": s[1],
                "us_per_turn": round(s[2] / turns * 1e6, 1),
            }
            for key, s in top_by_tottime(stats, 30)
        ],
    }


def ray_profile(profiler: cProfile.Profile, turns: int) -> RayProfile:
    """``profile_figures`` of a profile taken in this process."""
    return RayProfile.model_validate(profile_figures(profiler, turns))
