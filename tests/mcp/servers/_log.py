"""The call log the test servers keep: one JSON line per event, appended with one ``write`` each.

A server writes ``{"event": "call", ...}`` the moment a call arrives (before doing anything) and
``{"event": "done", ...}`` just before it answers, so a test counts calls received, however the
process (the server's or its client's) died in between. One ``os.write`` on an ``O_APPEND`` file
lands whole or not at all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["append", "read"]


def append(path: str | None, **entry: Any) -> None:
    """Add one event (nothing if the server was started without a log)."""
    if not path:
        return
    line = json.dumps({**entry, "pid": os.getpid()}, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read(path: str | Path) -> list[dict[str, Any]]:
    """Every event logged so far, oldest first."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
