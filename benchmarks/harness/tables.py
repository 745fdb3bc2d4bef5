"""The plain-text tables a benchmark prints after a run (the JSON report holds every figure)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["table", "yes"]


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A titled table: the first column (a label) left-aligned, the others (figures) right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    out = [
        title,
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    for r in rows:
        out.append(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        )
    return "\n".join(out)


def yes(ok: bool | None) -> str:
    """``yes``, ``NO`` (loud: a target missed), or ``-`` when there is nothing to judge."""
    return "-" if ok is None else "yes" if ok else "NO"
